"""runners.step: the step protocol, result.json schema 1, environments keyed by pins, worktree reuse."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from runners import result as result_json
from runners.envs import EnvCache, EnvError, EnvSpec, env_key, pins
from runners.result import ResultError
from runners.spec import RevertOf, StepResult, StepSpec
from runners.step import RUNNER_PYTHON, Request, SpecError, run_in_tree

PYPROJECT = """[project]
name = "demo"
version = "{version}"
dependencies = [{deps}]
"""

# exits 1 when bug.txt says "bad", prints a metric, and records which python ran it
TEST = (
    "import os, sys, pathlib; v = pathlib.Path('bug.txt').read_text().strip(); "
    "print('metric=' + ('0.9' if v == 'bad' else '0.1')); "
    "pathlib.Path(os.environ['REVERT_BISECT_RESULT']).parent.joinpath('python.txt').write_text(sys.executable); "
    "sys.exit(1 if v == 'bad' else 0)"
)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, message: str, **files: str) -> str:
    for name, text in files.items():
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict[str, str]]:
    """good -> version bump -> pin change -> bad (the bug) ; a revert of the bug exists only here."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    shas = {
        "good": commit(
            path, "good", **{"pyproject.toml": PYPROJECT.format(version="1", deps='"packaging>=20"'), "bug.txt": "ok\n"}
        )
    }
    shas["bump"] = commit(path, "bump", **{"pyproject.toml": PYPROJECT.format(version="2", deps='"packaging>=20"')})
    shas["pins"] = commit(
        path, "pins", **{"pyproject.toml": PYPROJECT.format(version="2", deps='"packaging>=21", "jinja2"')}
    )
    shas["bad"] = commit(path, "the bug", **{"bug.txt": "bad\n"})
    return path, shas


def spec(sha: str, step_id: int = 1, **kw) -> StepSpec:
    return StepSpec(step_id, sha, (RUNNER_PYTHON, "-c", TEST), 60, r"metric=(?P<value>[0-9.]+)", **kw)


def test_pins_ignore_version_and_formatting_but_not_requirements(repo):
    path, shas = repo
    keys = []
    for name in ("good", "bump", "pins"):
        git(path, "checkout", "-q", shas[name])
        keys.append(env_key(pins(path, EnvSpec()), sys.executable))
    assert keys[0] == keys[1] != keys[2]
    assert pins(path, EnvSpec()) == ["jinja2", "packaging>=21"]


def test_missing_or_broken_pyproject_is_an_env_error(tmp_path):
    with pytest.raises(EnvError, match="does not exist"):
        pins(tmp_path, EnvSpec())
    (tmp_path / "pyproject.toml").write_text("[project\n")
    with pytest.raises(EnvError, match="cannot be read"):
        pins(tmp_path, EnvSpec())


def test_steps_reuse_environments_by_pins_and_run_the_test_in_them(repo, tmp_path):
    path, shas = repo
    envs = EnvCache(tmp_path / "envs")
    tree = tmp_path / "wt"
    git(path, "worktree", "add", "-q", "--detach", str(tree), shas["good"])
    results = {}
    for i, name in enumerate(("good", "bump", "pins", "bad")):
        out = tmp_path / "out" / name
        in_env = replace(
            spec(shas[name], i, env_spec=EnvSpec(offline=True)), command=("python", "-c", TEST)
        )  # `python` from PATH
        results[name] = run_in_tree(in_env, tree, out, envs, "test-runner")
        assert (
            Path((out / "python.txt").read_text()).parent.parent == tmp_path / "envs" / results[name].env_key
        )  # ran in the env
    assert [results[n].env_reused for n in ("good", "bump", "pins", "bad")] == [False, True, False, True]
    assert results["good"].env_key == results["bump"].env_key != results["pins"].env_key == results["bad"].env_key
    assert (results["good"].exit_code, results["good"].metric) == (0, 0.1)
    assert (results["bad"].exit_code, results["bad"].metric) == (1, 0.9)
    assert "environment" in results["bump"].log_tail and "reused" in results["bump"].log_tail


def test_an_environment_wanted_by_two_steps_at_once_is_built_once(repo, tmp_path):
    path, shas = repo
    envs = EnvCache(tmp_path / "envs")
    got = []
    trees = []
    for n in range(3):
        trees.append(tmp_path / f"wt{n}")
        git(path, "worktree", "add", "-q", "--detach", str(trees[-1]), shas["good"])

    def one(n):
        got.append(envs.ensure(trees[n], EnvSpec(offline=True), lambda text: None))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(e.reused for e in got) == [False, True, True] and len({e.key for e in got}) == 1


def test_unmakeable_environment_is_a_skip_not_a_verdict(repo, tmp_path):
    path, shas = repo
    tree = tmp_path / "wt"
    git(path, "worktree", "add", "-q", "--detach", str(tree), shas["good"])
    (path / "pyproject.toml").unlink()
    sha = commit(path, "drop pyproject")
    res = run_in_tree(
        spec(sha, env_spec=EnvSpec(offline=True)), tree, tmp_path / "out", EnvCache(tmp_path / "envs"), "r"
    )
    assert res.exit_code == 125 and res.infra_reason is None
    assert "pyproject.toml does not exist" in res.log_tail


def test_a_runner_without_the_revert_commit_makes_the_same_tree(repo, tmp_path):
    path, shas = repo
    git(path, "revert", "--no-edit", shas["bad"])
    revert = git(path, "rev-parse", "HEAD")
    runner_clone = tmp_path / "runner"
    git(tmp_path, "clone", "-q", str(path), str(runner_clone))
    git(runner_clone, "reset", "-q", "--hard", shas["bad"])
    git(runner_clone, "update-ref", "-d", "refs/remotes/origin/main")
    git(runner_clone, "reflog", "expire", "--expire=now", "--all")
    git(runner_clone, "gc", "-q", "--prune=now")
    assert (
        subprocess.run(["git", "-C", str(runner_clone), "cat-file", "-e", revert], capture_output=True).returncode != 0
    )
    res = run_in_tree(
        spec(revert, revert=RevertOf(shas["bad"], shas["bad"])), runner_clone, tmp_path / "out", None, "r"
    )
    assert (res.exit_code, res.sha) == (0, revert)
    assert (runner_clone / "bug.txt").read_text() == "ok\n"


def test_request_round_trip_and_refusals():
    s = spec(
        "a" * 40,
        7,
        revert=RevertOf("b" * 40, "c" * 40),
        env_spec=EnvSpec("python/pyproject.toml", ("all",), ("python",)),
    )
    request = Request("https://github.com/o/r.git", s, 3, "kl", "avg_kl_div", 0.002)
    assert Request.from_json(json.loads(json.dumps(request.to_json()))) == request
    bad = request.to_json()
    for key, value, message in [
        ("schema", 2, "schema 2"),
        ("sha", "HEAD", "full 40-hex"),
        ("command", "rm -rf /", "list of strings"),
        ("step_id", "x", "malformed"),
    ]:
        with pytest.raises(SpecError, match=message):
            Request.from_json({**bad, key: value})
    with pytest.raises(SpecError, match="lacks 'repository'"):
        Request.from_json({k: v for k, v in bad.items() if k != "repository"})


NOW = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


def _result(**kw) -> StepResult:
    now = NOW
    return replace(
        StepResult(5, "d" * 40, 1, 0.0065, None, "gpu-h100-07", 412.3, "tail", now, now, "k" * 20, True), **kw
    )


def test_result_json_is_validated_on_both_sides():
    data = result_json.to_json(_result(), "avg_kl_div", 0.002)
    assert data["verdict"] == "bad" and data["metric"] == {"name": "avg_kl_div", "value": 0.0065, "threshold": 0.002}
    assert result_json.from_json(json.loads(json.dumps(data)), 5, "d" * 40) == _result()
    with pytest.raises(ResultError, match="not step 6"):
        result_json.from_json(data, 6)
    with pytest.raises(ResultError, match="not eeeeeeeeeeee"):
        result_json.from_json(data, 5, "e" * 40)
    for broken, message in [
        ({**data, "schema": 0}, "schema 0"),
        ({**data, "exit_code": "1"}, "exit_code is str"),
        ({**data, "verdict": "meh"}, "verdict 'meh'"),
        ({**data, "metric": {"value": float("nan")}}, "finite"),
        ({**data, "started_at": "yesterday"}, "ISO 8601"),
        ({**data, "env_reused": 1}, "env_reused is int"),
        ({**data, "exit_code": None}, "no exit code and no infra reason"),
        ([], "not a JSON object"),
    ]:
        with pytest.raises(ResultError, match=message):
            result_json.from_json(broken)
    data.pop("runner")
    with pytest.raises(ResultError, match="lacks runner"):
        result_json.from_json(data)
    assert (
        result_json.to_json(_result(exit_code=None, infra_reason="timeout after 5s", metric=None))["verdict"] == "infra"
    )


def test_the_step_command_on_a_runner(repo, tmp_path):
    """`python -m runners.step`: clones once into its cache, reuses the clone and slot, writes result.json."""
    path, shas = repo
    cache = tmp_path / "cache"
    outs = []
    for i, name in enumerate(("good", "bad")):
        request = Request(str(path), spec(shas[name], i + 1, env_spec=EnvSpec(offline=True)), 1, "t", "m", 0.5)
        out = tmp_path / f"out{i}"
        proc = subprocess.run(
            [
                sys.executable,
                "-P",
                "-m",
                "runners.step",
                "--spec",
                json.dumps(request.to_json()),
                "--out",
                str(out),
                "--cache",
                str(cache),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", "RUNNER_NAME": "gpu-7"},
        )
        assert proc.returncode == 0, proc.stderr
        outs.append(result_json.from_json(json.loads((out / "result.json").read_text()), i + 1, shas[name]))
    assert [(r.exit_code, r.metric, r.runner) for r in outs] == [(0, 0.1, "gpu-7"), (1, 0.9, "gpu-7")]
    assert [r.env_reused for r in outs] == [False, False]  # good and bad pin differently
    assert (
        len(list((cache / "repos").glob("*/clone"))) == 1
        and len(list((cache / "repos").glob("*/slots/wt-*.lock"))) == 1
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "runners.step", "--spec", "{", "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "not JSON" in proc.stderr and not (tmp_path / "x" / "result.json").exists()


def test_an_unreachable_repository_is_an_infra_result(tmp_path):
    request = Request(str(tmp_path / "nowhere"), spec("a" * 40), 1, "t")
    proc = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "runners.step",
            "--spec",
            json.dumps(request.to_json()),
            "--out",
            str(tmp_path / "o"),
            "--cache",
            str(tmp_path / "c"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads((tmp_path / "o" / "result.json").read_text())
    assert proc.returncode == 0 and data["verdict"] == "infra" and "cannot clone" in data["infra_reason"]


def test_a_test_that_leaves_a_server_running_in_the_background_does_not_leave_it_behind(tmp_path):
    """The command exits, its background child lives on: the step's process group goes with it."""
    import os
    import time

    from runners.proc import run_logged

    pidfile = tmp_path / "child.pid"
    script = (
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))"
    )
    done = run_logged([sys.executable, "-c", script], tmp_path, dict(os.environ), 30, tmp_path / "log")
    assert (done.code, done.infra) == (0, None)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{child}/stat").read().split()[2] == "Z":  # killed, awaiting its reaper (init)
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the background child of the test is still running")


def test_the_runners_exit_verdict_is_the_engines():
    from bot.domain.bisect.verdict import verdict_from_exit

    for code in [None, -9, *range(0, 300)]:
        assert result_json.exit_verdict(code) == verdict_from_exit(code).value, code
