"""One bisect step: put a worktree at the commit, get its environment, run the test, write result.json.

    python -m runners.step --spec '{"schema": 1, ...}' --out DIR      # or --spec-file F, --spec-env VAR

This is what a runner executes (the step workflow calls it); the local pool calls `run_in_tree`
directly. The test harness comes from this package -- the bot's version, installed on the runner
-- never from the commit under test, so the yardstick is the same along the whole range. The
spec (schema 1):

    {"schema": 1, "repository": "https://github.com/o/r.git" | "/path/to/clone", "sha": "...",
     "step_id": 17, "bisection_id": 3, "test": "decode-cache-hit",
     "command": ["{runner_python}", "-P", "-m", "runners.probes.sglang_kl", ...],
     "timeout_s": 3600, "metric_regex": null, "metric": {"name": "avg_kl_div", "threshold": 0.002},
     "revert": null | {"culprit": "<sha>", "onto": "<sha>"},
     "env": null | {"project": "python/pyproject.toml", "extras": [], "pythonpath": ["python"]}}

`{runner_python}` in the command is this interpreter. With `revert`, `sha` names HEAD + revert
as the bot made it; the runner makes the same tree itself (checkout `onto`, revert `culprit`), so
nothing needs pushing before the revert is proven. Exit status: 0 when result.json was written,
whatever the verdict (the verdict is in the file); 2 when the spec is unusable.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from runners import failure, gpus, junit, preflight, testrun
from runners import result as result_json
from runners.envs import EnvCache, EnvError, EnvSpec
from runners.git import checkout as git_checkout
from runners.git import git_auth, has_commit, revert_into, sync_clone
from runners.git import run as git_run
from runners.metric import (
    NO_METRIC,
    compile_metric_regex,
    metric_cases,
    metric_from_file,
    metric_from_output,
    why_no_metric,
)
from runners.proc import run_logged
from runners.spec import CaseResult, NamedMetric, NamedRun, Needs, RevertOf, StepResult, StepSpec, TestRun
from runners.worktrees import acquire

SPEC_SCHEMA = 1
RUNNER_PYTHON = "{runner_python}"
SHA = re.compile(r"^[0-9a-f]{40}$")


class SpecError(ValueError):
    pass


@dataclass(frozen=True)
class Request:
    """A step as sent to a runner: the StepSpec plus where the repository is and what it is for."""

    repository: str
    spec: StepSpec
    bisection_id: int | None = None
    test: str | None = None
    metric_name: str | None = None
    threshold: float | None = None

    def to_json(self) -> dict:
        s = self.spec
        return {
            "schema": SPEC_SCHEMA,
            "repository": self.repository,
            "sha": s.sha,
            "step_id": s.step_id,
            "bisection_id": self.bisection_id,
            "test": self.test,
            "command": list(s.command),
            "timeout_s": s.timeout_s,
            "metric_regex": s.metric_regex,
            "metric_file": s.metric_file,
            "metric": {"name": self.metric_name, "threshold": self.threshold},
            "revert": None if s.revert is None else {"culprit": s.revert.culprit, "onto": s.revert.onto},
            "env": None if s.env_spec is None else s.env_spec.to_json(),
            "test_run": None if s.test is None else s.test.to_json(),
            "needs": None if s.needs is None else s.needs.to_json(),
            "higher_is_worse": s.higher_is_worse,
            "junit": s.junit,
            "tests": [t.to_json() for t in s.tests],
            "metrics": [m.to_json() for m in s.metrics],
        }

    @classmethod
    def from_json(cls, data: object) -> Request:
        if not isinstance(data, dict):
            raise SpecError("the step spec is not a JSON object")
        if data.get("schema") != SPEC_SCHEMA:
            raise SpecError(
                f"step spec schema {data.get('schema')!r} is not {SPEC_SCHEMA}: "
                "install the bot's version on this runner"
            )
        try:
            command = data.get("command") or []
            test = None if data.get("test_run") is None else TestRun.from_json(data["test_run"])
            if not (isinstance(command, list) and all(isinstance(a, str) for a in command)):
                raise SpecError("command must be a list of strings")
            tests = tuple(NamedRun.from_json(t) for t in data.get("tests") or ())
            metrics = tuple(NamedMetric.from_json(m) for m in data.get("metrics") or ())
            if not command and test is None and not tests:
                raise SpecError("the step spec has neither a command nor a test_run")
            sha = _sha(data["sha"], "sha")
            revert = data.get("revert")
            metric = data.get("metric") or {}
            spec = StepSpec(
                step_id=int(data["step_id"]),
                sha=sha,
                command=tuple(command),
                timeout_s=None if data.get("timeout_s") is None else float(data["timeout_s"]),
                metric_regex=data.get("metric_regex"),
                metric_file=bool(data.get("metric_file", False)),
                revert=None
                if revert is None
                else RevertOf(_sha(revert["culprit"], "revert.culprit"), _sha(revert["onto"], "revert.onto")),
                env_spec=None if data.get("env") is None else EnvSpec.from_json(data["env"]),
                test=test,
                needs=None if data.get("needs") is None else Needs.from_json(data["needs"]),
                higher_is_worse=bool(data.get("higher_is_worse", True)),
                junit=data.get("junit"),
                tests=tests,
                metrics=metrics,
            )
            return cls(
                str(data["repository"]),
                spec,
                data.get("bisection_id"),
                data.get("test"),
                metric.get("name"),
                metric.get("threshold"),
            )
        except KeyError as exc:
            raise SpecError(f"the step spec lacks {exc.args[0]!r}") from None
        except (TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"the step spec is malformed: {exc}") from None


def _sha(value: object, name: str) -> str:
    if not isinstance(value, str) or not SHA.match(value):
        raise SpecError(f"{name} must be a full 40-hex commit id, not {value!r}")
    return value


def run_in_tree(
    spec: StepSpec, tree: Path, out: Path, envs: EnvCache | None, runner: str, pidfile: Path | None = None, started=None
) -> StepResult:
    """Run one step in a worktree this caller holds; every file it writes goes under `out`."""
    begun, t0 = datetime.now(UTC), time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    log_path, probe_result = out / "test.log", out / "probe.json"
    log_path.unlink(missing_ok=True)
    probe_result.unlink(missing_ok=True)

    def log(text: str) -> None:
        with open(log_path, "a") as f:
            f.write(text.rstrip("\n") + "\n")

    def finish(exit_code: int | None, infra: str | None, metric: float | None = None, env=None, cases=()) -> StepResult:
        tail = log_path.read_text(errors="replace")[-result_json.LOG_TAIL_CHARS :] if log_path.exists() else ""
        return StepResult(
            spec.step_id,
            spec.sha,
            exit_code,
            metric,
            infra,
            runner,
            time.monotonic() - t0,
            tail,
            begun,
            datetime.now(UTC),
            env.key if env else None,
            bool(env and env.reused),
            tuple(cases),
        )

    checkout(tree, spec, log)
    env = None
    variables = dict(os.environ)
    if spec.env_spec is not None and envs is not None:
        try:
            env = envs.ensure(tree, spec.env_spec, log)
        except EnvError as exc:
            log(f"revert-bisect: cannot make this commit's environment: {exc}")
            return finish(125, None)
        log(f"revert-bisect: environment {env.key} ({'reused' if env.reused else 'built'})")
        variables = env.variables(variables)
    variables.update(spec.env)
    variables.update(
        {
            "REVERT_BISECT_SHA": spec.sha,
            "REVERT_BISECT_WORKTREE": str(tree),
            "REVERT_BISECT_RESULT": str(probe_result),
            "REVERT_BISECT_STEP_ID": str(spec.step_id),
        }
    )
    if spec.test is None and not spec.tests:
        argv = [sys.executable if a == RUNNER_PYTHON else a for a in spec.command]
        report = None
        if spec.junit:  # a stale report from the worktree's last step must never stand for this one
            report = tree / spec.junit
            report.unlink(missing_ok=True)
            variables["REVERT_BISECT_JUNIT"] = str(report)
        at = log_path.stat().st_size if log_path.exists() else 0
        done = run_logged(argv, tree, variables, spec.timeout_s, log_path, pidfile, started)
        if spec.metrics:  # several metrics of this one run: a case each
            code, infra, metric, read = _metric_cases(spec.metrics, _since(log_path, at), done.code, done.infra, log)
            return finish(code, infra, metric, env, read)
        if report is not None:
            code, infra, reported = _junit_cases(done.code, done.infra, report, spec.junit or "", log)
            return finish(code, infra, None, env, reported)
        metric = metric_from_file(probe_result)
        regex = compile_metric_regex(spec.metric_regex) if spec.metric_regex else None
        if metric is None and regex is not None:
            metric = metric_from_output(log_path.read_text(errors="replace"), regex)
        if metric is None and done.infra is None and done.code == 0 and (regex is not None or spec.metric_file):
            # no reading, no verdict: the engine counts it as untestable and the CLI names this line as the cause
            log(f"revert-bisect: {NO_METRIC}{why_no_metric(log_path.read_text(errors='replace'), regex, probe_result)}")
        return finish(done.code, done.infra, metric, env)
    if spec.test is None:
        code, infra, per_test = _own_tests(spec, tree, variables, log_path, log, pidfile, started)
        return finish(code, infra, None, env, per_test)
    code, infra, metric, cases = _own_test(spec, spec.test, tree, variables, log_path, log, pidfile, started)
    return finish(code, infra, metric, env, cases)


def _since(log_path: Path, at: int) -> str:
    """What the step's log gained from byte `at` on: the test's own output."""
    with open(log_path, "rb") as f:
        f.seek(at)
        return f.read().decode(errors="replace")


def _metric_cases(
    metrics: tuple[NamedMetric, ...], output: str, code: int | None, infra: str | None, log
) -> tuple[int | None, str | None, float | None, tuple[CaseResult, ...]]:
    """(exit code, infra reason, the first metric's reading, a case per metric) of a run read for several metrics
    (runners.metric.metric_cases); each case is logged with its reading or why it has none."""
    cases = metric_cases(metrics, output, code, infra)
    for case in cases:
        reading = "" if case.metric is None else f", metric {case.metric:g}"
        log(f"revert-bisect: {case.case}: {case.outcome}{reading}{f' ({case.why})' if case.why else ''}")
    first = cases[0].metric if cases else None
    return code, infra, first, cases


def _own_tests(
    spec: StepSpec, tree: Path, variables, log_path: Path, log, pidfile, started
) -> tuple[int | None, str | None, list[CaseResult]]:
    """Several of the repository's own tests (a group's), one after another in this worktree, each as alone: a
    result per test id (its verdict, its worst case's metric, why it said nothing). The step's own exit code is 1
    when one failed, else 0; it is infra only when no test said anything."""
    results: list[CaseResult] = []
    builds: set[tuple[str, ...]] = set()
    for named in spec.tests:
        log(f"revert-bisect: test {named.id}")
        mine = replace(spec, higher_is_worse=named.higher_is_worse)
        code, infra, metric, cases = _own_test(
            mine, named.run, tree, dict(variables), log_path, log, pidfile, started, builds
        )
        errored = next((c.why for c in cases if c.failure == failure.ERROR), None)
        results.append(_as_case(named.id, code, infra, metric, failure.of_cases(c.failure for c in cases), errored))
    said = [c for c in results if c.outcome != testrun.INFRA]
    if not said:
        return None, "; ".join(f"{c.case}: {c.why}" for c in results), results
    return (1 if any(c.outcome == testrun.BAD for c in said) else 0), None, results


def _as_case(
    test: str,
    code: int | None,
    infra: str | None,
    metric: float | None,
    failed: str | None = None,
    why: str | None = None,
) -> CaseResult:
    if infra is not None or code is None or code < 0 or code >= 128:
        return CaseResult(test, testrun.INFRA, metric, infra or f"exited {code}")
    if code == 125:
        return CaseResult(test, testrun.SKIP, None, "untestable at this commit")
    if code == 0:
        return CaseResult(test, testrun.GOOD, metric)
    return CaseResult(test, testrun.BAD, metric, why if failed == failure.ERROR else None, failed)


def _junit_cases(
    code: int | None, infra: str | None, report: Path, shown: str, log
) -> tuple[int | None, str | None, tuple[CaseResult, ...]]:
    """(exit code, infra reason, cases) of a command that writes a JUnit report: a skip (125) or an infra
    exit keeps its meaning for every case; otherwise each case's verdict is the report's, and a missing or
    malformed report is an infra result naming it."""
    if infra is not None or code is None or code == 125 or code >= 128:
        return code, infra, ()
    try:
        cases = junit.read(report, shown)
    except junit.ReportError as exc:
        log(f"revert-bisect: {exc}")
        return code, str(exc), ()
    return code, None, cases


Ended = tuple[int | None, str | None, float | None, list[CaseResult]]  # exit code, infra reason, metric, cases


def _own_test(
    spec: StepSpec, run: TestRun, tree: Path, variables, log_path: Path, log, pidfile, started, builds=None
) -> Ended:
    """The repository's own test (runners.testrun): its plan at this commit, its build, what the runner must hold,
    GPUs of its own, the run, then a verdict per case. `builds`: the builds that already passed in this worktree at
    this commit (a step of several tests builds once)."""
    plan = testrun.plan(run, tree)
    if plan.missing:
        log(f"revert-bisect: untestable here: {plan.missing}")
        return 125, None, None, [CaseResult(c, testrun.SKIP, None, plan.missing) for c in run.cases]
    if plan.transplanted:
        log(f"revert-bisect: {run.file} taken from {run.transplant_from} (policy: missing: transplant)")
    needs = spec.needs or Needs()
    variables.update(testrun.env_of(run, needs))
    if run.build and run.build not in (builds or set()):
        log(f"revert-bisect: building: {' '.join(run.build)}")
        built = run_logged(list(run.build), tree, variables, spec.timeout_s, log_path, pidfile, started)
        if built.infra is not None:
            return None, f"the build {built.infra}", None, []
        if built.code != 0:
            log(f"revert-bisect: untestable here: the commit does not build (the build exited {built.code})")
            return 125, None, None, []
        if builds is not None:
            builds.add(run.build)
    lacking = preflight.missing(needs, variables, tree)
    if lacking:
        log("revert-bisect: the runner lacks what the test needs: " + "; ".join(lacking))
        return None, "; ".join(lacking), None, []
    held = None
    if needs.gpus:
        try:
            held = gpus.assign(needs.gpus, variables, needs.gpu_idle_timeout_s, log)
        except gpus.GpuError as exc:
            log(f"revert-bisect: {exc}")
            return None, str(exc), None, []
        variables["CUDA_VISIBLE_DEVICES"] = held.visible
        log(f"revert-bisect: GPUs {held.visible} (CUDA_VISIBLE_DEVICES)")
    log(f"revert-bisect: running in {plan.cwd.relative_to(tree)}: {' '.join(plan.argv)}")
    at = log_path.stat().st_size
    try:
        done = run_logged(plan.argv, plan.cwd, variables, spec.timeout_s, log_path, pidfile, started)
    finally:
        if held is not None:
            held.release()
    output = _since(log_path, at)
    regex = compile_metric_regex(spec.metric_regex) if spec.metric_regex else None
    cases = testrun.cases_of(run, output, regex)
    for case in cases:
        reading = "" if case.metric is None else f", metric {case.metric:g}"
        log(f"revert-bisect: {case.case}: {case.outcome}{reading}{f' ({case.why})' if case.why else ''}")
    code, infra = testrun.verdict(cases, done.code)
    if spec.metrics:  # several metrics of this one run: a case each, read from the test's output
        code, infra, metric, read = _metric_cases(spec.metrics, output, code, done.infra or infra, log)
        return code, infra, metric, list(read)
    return code, done.infra or infra, testrun.worst(cases, spec.higher_is_worse), cases


def checkout(tree: Path, spec: StepSpec, log) -> None:
    """The worktree at spec.sha; a runner that lacks HEAD + revert makes it from `onto` and `culprit`."""
    if spec.revert is None or has_commit(tree, spec.sha):
        git_checkout(tree, spec.sha)
        return
    git_checkout(tree, spec.revert.onto)
    revert_into(tree, spec.revert.culprit, spec.revert.onto)
    log(f"revert-bisect: testing {spec.revert.onto[:12]} + revert of {spec.revert.culprit[:12]}")


# -- on a runner: a cached clone of the repository, a worktree slot, then run_in_tree --


def clone_of(repository: str, cache: Path, sha: str, token: str | None) -> Path:
    """A clone of `repository` under cache, kept between steps and fetched only when it lacks `sha`."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", repository.rstrip("/").rsplit("/", 1)[-1])[:40]
    home = cache / "repos" / f"{name}-{hashlib.sha256(repository.encode()).hexdigest()[:10]}"
    home.mkdir(parents=True, exist_ok=True)
    clone = home / "clone"
    with open(home / "clone.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (clone / ".git").is_dir() or not has_commit(clone, sha):
            sync_clone(repository, clone, token)
        if not has_commit(clone, sha):
            git_run(clone, "fetch", "--quiet", "origin", sha, auth=git_auth(token))
    return clone


def execute(request: Request, cache: Path, out: Path, token: str | None = None) -> StepResult:
    spec = request.spec
    runner = os.environ.get("RUNNER_NAME") or socket.gethostname()
    needed = spec.revert.onto if spec.revert else spec.sha
    repo = clone_of(request.repository, cache, needed, token)  # a culprit to revert is in onto's history
    slot = acquire(repo, repo.parent / "slots")
    try:
        # the repository's own test runs on the interpreter its CI uses (on the runner's PATH): its environments
        # are layered on that one, not on the venv the runner package lives in
        base = shutil.which(spec.test.python) if spec.test is not None else None
        return run_in_tree(spec, slot.tree, out, EnvCache(cache / "envs", base), runner, slot.pidfile)
    finally:
        slot.release()


def _read_spec(args: argparse.Namespace) -> object:
    if args.spec_env:
        text = os.environ.get(args.spec_env)
        if text is None:
            raise SpecError(f"environment variable {args.spec_env} is not set")
    elif args.spec_file:
        text = Path(args.spec_file).read_text()
    else:
        text = args.spec
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SpecError(f"the step spec is not JSON: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m runners.step", description=__doc__.split("\n\n")[0])
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--spec", help="the step spec as JSON")
    given.add_argument("--spec-file", help="a file holding the step spec")
    given.add_argument("--spec-env", help="an environment variable holding the step spec")
    temp = os.environ.get("RUNNER_TEMP")
    p.add_argument(
        "--out",
        type=Path,
        default=Path(temp) / "revert-bisect" if temp else None,
        required=not temp,
        help="directory for result.json and logs, i.e. the artifact (default: $RUNNER_TEMP/revert-bisect)",
    )
    p.add_argument(
        "--cache",
        type=Path,
        default=Path(
            os.environ.get("REVERT_BISECT_RUNNER_CACHE") or Path.home() / ".cache" / "revert-bisect" / "runner"
        ),
        help="clones, worktrees and environments kept between steps",
    )
    args = p.parse_args(argv)
    try:
        request = Request.from_json(_read_spec(args))
    except SpecError as exc:
        print(f"revert-bisect step: {exc}", file=sys.stderr)
        return 2
    spec = request.spec
    try:
        res = execute(request, args.cache, args.out, os.environ.get("GITHUB_TOKEN"))
    except Exception as exc:  # noqa: BLE001 -- the runner failed, not the commit: an infra result says so
        now = datetime.now(UTC)
        res = StepResult(
            spec.step_id,
            spec.sha,
            None,
            None,
            f"runner error: {exc}",
            os.environ.get("RUNNER_NAME") or socket.gethostname(),
            0.0,
            "",
            now,
            now,
        )
    data = result_json.to_json(res, request.metric_name, request.threshold)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "result.json").write_text(json.dumps(data, indent=2) + "\n")
    summary = (
        f"step {spec.step_id} at {spec.sha[:12]}: **{data['verdict']}** "
        f"(exit {res.exit_code}, metric {res.metric}, env {res.env_key} {'reused' if res.env_reused else 'built'})"
    )
    print(summary)
    if os.environ.get("GITHUB_STEP_SUMMARY"):
        with open(os.environ["GITHUB_STEP_SUMMARY"], "a") as f:
            f.write(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
