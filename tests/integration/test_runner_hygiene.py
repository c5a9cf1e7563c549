"""On a shared GPU host: steps get disjoint GPUs, wait a bounded time for idle ones, and a runner that lacks the model
or data the test needs says what to provision (runners.gpus, runners.preflight), with a stand-in `nvidia-smi` on PATH
that answers in nvidia-smi's own CSV format (`--query-gpu=index,memory.used --format=csv,noheader,nounits`). The
host's GPU lock directory is made by deploy/gpu-locks.sh, as on a real host (runners.gpulocks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runners import gpulocks, gpus
from runners.spec import Needs, StepSpec, TestRun
from runners.step import run_in_tree

ROOT = Path(__file__).resolve().parents[2]
GPU_LOCKS_SH = ROOT / "deploy" / "gpu-locks.sh"

SMI = """#!/bin/sh
# a stand-in for nvidia-smi: the host's GPUs and their memory in use, from a file the test edits
case "$*" in
  *--query-gpu=index,memory.used*--format=csv,noheader,nounits*) cat "{table}" ;;
  *) echo "unexpected arguments: $*" >&2; exit 9 ;;
esac
"""


def provision(locks: Path) -> None:
    """The host's lock directory, made as deploy/README.md says (the runners' uid here: this test's own)."""
    env = {**os.environ, "RUNNER_UID": str(os.getuid())}
    subprocess.run([str(GPU_LOCKS_SH), str(locks)], env=env, check=True, capture_output=True)


def stand_in_smi(bindir: Path, table: Path) -> None:
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text(SMI.format(table=table))
    smi.chmod(0o755)


@pytest.fixture
def host(tmp_path) -> tuple[dict[str, str], Path]:
    """An 8-GPU host: PATH with the stand-in, the table of memory in use per GPU, the host's lock directory."""
    bindir, table = tmp_path / "bin", tmp_path / "gpus.csv"
    table.write_text("".join(f"{i}, 3\n" for i in range(8)))
    stand_in_smi(bindir, table)
    provision(tmp_path / "locks")
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "REVERT_BISECT_GPU_LOCKS": str(tmp_path / "locks")}
    return env, table


def assign(env, count, timeout=0.0, **kw):
    return gpus.assign(count, env, timeout, lambda _: None, locks=Path(env["REVERT_BISECT_GPU_LOCKS"]), **kw)


def test_two_steps_on_one_host_get_disjoint_gpus_and_a_third_waits_then_says_so(host):
    env, _ = host
    first, second = assign(env, 4), assign(env, 4)
    assert set(first.indices).isdisjoint(second.indices) and len(first.indices) == len(second.indices) == 4
    with pytest.raises(gpus.GpuError, match="waited 0.2s for 4 idle GPU"):
        assign(env, 4, timeout=0.2, poll_s=0.05)
    first.release()
    third = assign(env, 4)
    assert third.indices == first.indices  # freed devices are handed out again
    second.release()
    third.release()


def test_locks_are_held_across_processes_as_runner_instances_are(host):
    """Another runner instance (a process of its own) holding GPUs 0-3: this one gets 4-7."""
    env, _ = host
    holder = (
        "import sys, time; from pathlib import Path; from runners import gpus; "
        "a = gpus.assign(4, dict(__import__('os').environ), 0, print, locks=Path(sys.argv[1])); "
        "print('held', a.visible, flush=True); time.sleep(30)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder, env["REVERT_BISECT_GPU_LOCKS"]],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "held 0,1,2,3"
        mine = assign(env, 4)
        assert mine.visible == "4,5,6,7"
        mine.release()
    finally:
        proc.kill()
        proc.wait()


# A runner container as Docker makes one: a mount namespace of its own, with a /tmp of its own (a tmpfs) and the
# host's directory ($1) bind-mounted at /mnt/host; then the runner's process (the arguments after "--"). The runner's
# own code (the paths before "--": this checkout, its venv, the Python under it, each as written and as resolved)
# stays where it is, as an image's would: what lives under the host's /tmp (CI clones into /tmp, maybe through a
# symlink) is bind-mounted back into the container's fresh /tmp, resolved paths first, and nothing else of the host's.
CONTAINER = """set -e
mount -t tmpfs tmpfs /mnt
mkdir /mnt/host /mnt/hosttmp
mount --bind "$1" /mnt/host
mount --bind /tmp /mnt/hosttmp
mount -t tmpfs tmpfs /tmp
shift
while [ "$1" != -- ]; do
  case "$1" in /tmp/*) mkdir -p "$1"; mount --bind "/mnt/hosttmp/${1#/tmp/}" "$1" ;; esac
  shift
done
shift
umount -l /mnt/hosttmp
exec "$@"
"""

# A runner's step taking 4 GPUs: it says what it holds (and which /tmp it has), then holds them until stdin closes.
TAKES_FOUR = """
import os, sys, tempfile
from runners import gpus
try:
    held = gpus.assign(4, dict(os.environ), 0, print)
except gpus.GpuError as exc:
    print("refused", exc, flush=True)
    sys.exit(3)
tmp = tempfile.gettempdir()
print("held", held.visible, tmp, os.stat(tmp).st_dev, flush=True)
sys.stdin.read()
"""


def container_runner(host_dir: Path, **env: str) -> subprocess.Popen:
    """A runner process in a container of its own on this host (real mount namespaces, real flock)."""
    base = {k: v for k, v in os.environ.items() if k not in ("TMPDIR", gpulocks.ENV, gpulocks.SINGLE_RUNNER)}
    needed = [Path(p).absolute() for p in (ROOT, sys.prefix, sys.base_prefix, Path(sys.executable).parent)]
    code = dict.fromkeys([*(str(p.resolve()) for p in needed), *(str(p) for p in needed)])  # a symlink's target first
    argv = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", CONTAINER, "container", str(host_dir)]
    return subprocess.Popen(
        [*argv, *code, "--", sys.executable, "-c", TAKES_FOUR],
        env={**base, "PATH": f"/mnt/host/bin:{os.environ['PATH']}", **env},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def said(proc: subprocess.Popen) -> list[str]:
    line = proc.stdout.readline().split(" ", 1)
    assert line[0] in ("held", "refused"), proc.stderr.read()
    return line


def test_two_runner_containers_with_their_own_tmp_never_share_a_gpu(tmp_path):
    """Issue 30 (5): runner containers with a /tmp each on one 8-GPU host. With the host's lock directory mounted
    into both, their steps get disjoint GPUs and a third waits; a runner locking in its own /tmp refuses to start,
    naming what to mount -- and the single-runner opt-out shows why: its own /tmp hides the others' locks."""
    table = tmp_path / "gpus.csv"
    table.write_text("".join(f"{i}, 3\n" for i in range(8)))
    stand_in_smi(tmp_path / "bin", Path("/mnt/host/gpus.csv"))  # the host's table, as the containers see it
    provision(tmp_path / "gpu-locks")
    shared = {gpulocks.ENV: "/mnt/host/gpu-locks"}
    running = []
    try:
        first = container_runner(tmp_path, **shared)
        running.append(first)
        held_first = said(first)
        second = container_runner(tmp_path, **shared)
        running.append(second)
        held_second = said(second)
        assert held_first[0] == held_second[0] == "held"
        (visible_1, tmp_1, dev_1), (visible_2, tmp_2, dev_2) = held_first[1].split(), held_second[1].split()
        assert (tmp_1, tmp_2) == ("/tmp", "/tmp") and dev_1 != dev_2  # a /tmp of each one's own
        assert (visible_1, visible_2) == ("0,1,2,3", "4,5,6,7")

        third = container_runner(tmp_path, **shared)
        kind, why = said(third)
        assert kind == "refused" and why.startswith("waited 0s for 4 idle GPU(s) no other step holds")
        assert third.wait(30) == 3

        alone = container_runner(tmp_path)  # REVERT_BISECT_GPU_LOCKS unset: <its own /tmp>/revert-bisect-gpus
        kind, why = said(alone)
        assert kind == "refused" and alone.wait(30) == 3
        assert why.startswith("the GPU lock directory /tmp/revert-bisect-gpus does not exist")
        assert (
            "deploy/gpu-locks.sh" in why
            and "-v /var/lib/revert-bisect/gpu-locks:/var/lib/revert-bisect/gpu-locks" in why
        )
        assert "REVERT_BISECT_SINGLE_RUNNER_HOST=1" in why

        lone = container_runner(tmp_path, **{gpulocks.SINGLE_RUNNER: "1"})  # told it is alone: it is not
        running.append(lone)
        kind, what = said(lone)
        assert kind == "held" and what.split()[0] == "0,1,2,3"  # the first runner's GPUs: what the check prevents
    finally:
        for proc in running:
            proc.stdin.close()
            proc.wait(30)


def test_a_lock_directory_the_host_did_not_make_is_refused(tmp_path):
    """A copy of the host's directory (marker and all, as an image or an anonymous volume would hold one), or a
    marker naming another directory, is not the host's; a wrong opt-out value is said plainly."""
    host_dir = tmp_path / "host" / "gpu-locks"
    host_dir.parent.mkdir()
    provision(host_dir)
    assert (host_dir / gpulocks.MARKER).read_text() == gpulocks.marker_text(host_dir)  # the script's is the step's
    gpulocks.check(host_dir, {})
    copy = tmp_path / "copy"
    shutil.copytree(host_dir, copy)
    with pytest.raises(gpulocks.NotShared, match=r"/copy is not the one the host made \(.*\): a copy"):
        gpulocks.check(copy, {})
    gpulocks.check(copy, {gpulocks.SINGLE_RUNNER: "1"})  # the opt-out does what it says
    with pytest.raises(gpulocks.NotShared, match="REVERT_BISECT_SINGLE_RUNNER_HOST must be 1 .* or 0, not 'yes'"):
        gpulocks.check(copy, {gpulocks.SINGLE_RUNNER: "yes"})
    mine = tmp_path / "mine"
    mine.mkdir()
    with pytest.raises(gpulocks.NotShared, match=r"mine has no \.revert-bisect-gpu-locks \(the host did not make"):
        gpulocks.check(mine, {})


def test_busy_gpus_are_waited_for_and_never_handed_out(host):
    env, table = host
    table.write_text("0, 70000\n1, 3\n2, 65000\n3, 3\n")  # another job's server holds 0 and 2
    got = assign(env, 2)
    assert got.indices == [1, 3]
    got.release()
    with pytest.raises(gpus.GpuError, match=r"0 \(70000 MiB used\)"):
        assign(env, 3, timeout=0.1, poll_s=0.05)
    frees = threading.Timer(0.3, lambda: table.write_text("0, 3\n1, 3\n2, 65000\n3, 3\n"))
    frees.start()
    waited = assign(env, 3, timeout=10, poll_s=0.05)  # GPU 0 comes free within the bound
    assert waited.indices == [0, 1, 3]
    waited.release()


def test_a_host_with_too_few_gpus_or_no_nvidia_smi_is_an_infra_reason_with_what_to_do(host):
    env, _ = host
    with pytest.raises(gpus.GpuError, match="needs 4 GPU.*has 2.*CUDA_VISIBLE_DEVICES"):
        assign({**env, "CUDA_VISIBLE_DEVICES": "6,7"}, 4)
    limited = assign({**env, "CUDA_VISIBLE_DEVICES": "6,7"}, 2)  # the runner's own limit is respected
    assert limited.indices == [6, 7]
    limited.release()
    with pytest.raises(gpus.GpuError, match="nvidia-smi is not on this runner's PATH"):
        assign({**env, "PATH": "/nonexistent"}, 1)


TEST_FILE = """\
import os, unittest
class TestGpus(unittest.TestCase):
    def test_sees_its_own(self):
        print("visible=" + os.environ.get("CUDA_VISIBLE_DEVICES", "all"))
        print("offline=" + os.environ.get("HF_HUB_OFFLINE", "no"))
if __name__ == "__main__":
    unittest.main()
"""


def _tree(tmp_path: Path) -> tuple[Path, str]:
    tree = tmp_path / "tree"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_gpus.py").write_text(TEST_FILE)
    git = ["git", "-C", str(tree)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "t"], check=True)
    return tree, subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def _step(tree: Path, sha: str, needs: Needs, out: Path, env: dict[str, str]):
    run = TestRun("unittest", "test_gpus.py", "test", sys.executable, cases=("TestGpus.test_sees_its_own",))
    spec = StepSpec(1, sha, (), 60, None, env=env, test=run, needs=needs)
    return run_in_tree(spec, tree, out, None, "gpu-host-1")


def test_a_step_sees_only_its_gpus_and_a_missing_model_is_infra_naming_what_to_provision(host, tmp_path):
    env, _ = host
    tree, sha = _tree(tmp_path)
    hub = tmp_path / "hub"
    needs = Needs(gpus=2, gpu_idle_timeout_s=5, hf_models=("Qwen/Qwen3-Next-80B-A3B-Instruct",))
    lacking = _step(tree, sha, needs, tmp_path / "a", {**env, "HF_HUB_CACHE": str(hub)})
    assert lacking.exit_code is None and lacking.infra_reason.startswith(
        f"model Qwen/Qwen3-Next-80B-A3B-Instruct is not in this runner's Hugging Face cache ({hub})"
    )
    assert "huggingface-cli download Qwen/Qwen3-Next-80B-A3B-Instruct" in lacking.infra_reason
    snapshot = hub / "models--Qwen--Qwen3-Next-80B-A3B-Instruct" / "snapshots" / "0a1b2c"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    ran = _step(tree, sha, needs, tmp_path / "b", {**env, "HF_HUB_CACHE": str(hub)})
    assert (ran.exit_code, ran.infra_reason) == (0, None)
    assert "visible=0,1" in ran.log_tail and "offline=1" in ran.log_tail  # its own GPUs, the hub offline
    data = _step(tree, sha, Needs(files=("/nonexistent/prompts.jsonl",)), tmp_path / "c", env)
    assert (
        data.infra_reason
        == "file /nonexistent/prompts.jsonl does not exist on this runner: provision it before bisecting"
    )
    dataset = _step(
        tree, sha, Needs(hf_datasets=("THUDM/LongBench-v2",)), tmp_path / "d", {**env, "HF_HUB_CACHE": str(hub)}
    )
    assert "huggingface-cli download --repo-type dataset THUDM/LongBench-v2" in dataset.infra_reason


def test_a_step_whose_lock_directory_is_not_the_hosts_is_infra_saying_what_to_mount(host, tmp_path):
    """The refusal reaches result.json as an infra result (retried elsewhere, never a verdict), before the test runs."""
    env, _ = host
    tree, sha = _tree(tmp_path)
    own = tmp_path / "own-tmp" / "revert-bisect-gpus"
    refused = _step(tree, sha, Needs(gpus=2), tmp_path / "a", {**env, gpulocks.ENV: str(own)})
    assert refused.exit_code is None and refused.infra_reason.startswith(f"the GPU lock directory {own} does not exist")
    assert "deploy/gpu-locks.sh" in refused.infra_reason and "visible=" not in refused.log_tail  # the test never ran
    assert not own.exists()  # the step made no private lock directory of its own
    ran = _step(tree, sha, Needs(gpus=2), tmp_path / "b", {**env, gpulocks.ENV: str(own), gpulocks.SINGLE_RUNNER: "1"})
    assert (ran.exit_code, ran.infra_reason) == (0, None) and "visible=0,1" in ran.log_tail
