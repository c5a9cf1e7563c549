"""On a shared GPU host: steps get disjoint GPUs, wait a bounded time for idle ones, and a runner that lacks the model
or data the test needs says what to provision (runners.gpus, runners.preflight), with a stand-in `nvidia-smi` on PATH
that answers in nvidia-smi's own CSV format (`--query-gpu=index,memory.used --format=csv,noheader,nounits`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from runners import gpus
from runners.spec import Needs, StepSpec, TestRun
from runners.step import run_in_tree

SMI = """#!/bin/sh
# a stand-in for nvidia-smi: the host's GPUs and their memory in use, from a file the test edits
case "$*" in
  *--query-gpu=index,memory.used*--format=csv,noheader,nounits*) cat "{table}" ;;
  *) echo "unexpected arguments: $*" >&2; exit 9 ;;
esac
"""


@pytest.fixture
def host(tmp_path) -> tuple[dict[str, str], Path]:
    """An 8-GPU host: PATH with the stand-in, and the table of memory in use per GPU."""
    bindir, table = tmp_path / "bin", tmp_path / "gpus.csv"
    bindir.mkdir()
    table.write_text("".join(f"{i}, 3\n" for i in range(8)))
    smi = bindir / "nvidia-smi"
    smi.write_text(SMI.format(table=table))
    smi.chmod(0o755)
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
