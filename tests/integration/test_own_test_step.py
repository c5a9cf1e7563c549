"""A bisect step runs the repository's own test as its CI runs it (runners.testrun), on a repository shaped like
SGLang (tests/support/sglang_shaped.py): the commit's own file and flags, narrowed to the red run's failed cases,
a verdict and a metric per case, untestable where the test is not there."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bot.adapters.policy_files import parse
from bot.domain.cases import failures
from bot.domain.ci_results import failed_tests
from bot.service.config import bisect_config
from runners import testrun
from runners.spec import StepSpec, TestRun
from runners.step import run_in_tree
from tests.support import sglang_shaped as sg
from tests.support.suite_logs import KL_TEST, File, run_suite

DECODE = "test_input_output_logprobs_match_decode_cache_hit"
PAGE1, PAGE2, ALLOC = (
    "TestQwen3NextLazyExtraBuffer",
    "TestQwen3NextLazyExtraBufferLargePage",
    ("TestQwen3NextLazyExtraBufferAllocFail"),
)
METRIC = r"avg_kl_div=(?P<value>[0-9.eE+-]+)(?: > threshold=(?P<threshold>[0-9.eE+-]+))?"

POLICY = f"""\
repository: sgl-project/sglang
watch: [{{workflow: .github/workflows/pr-test.yml}}]
results:
  log:
    failed: '(?m)^\\s+(?P<test>\\S+\\.py) \\((?!\\d+ attempts)'
    metric: '{METRIC}'
tests:
  - id: qwen3-next-models
    match: '(?:^|/)test_qwen3_next_models\\.py$'
    metric: {{name: avg_kl_div, threshold: 0.002}}
    probe:
      name: unittest
      file: {sg.FILE}
      cwd: test
      python: {sys.executable}
      env: {{SGLANG_IS_IN_CI: "true"}}
"""


@pytest.fixture(scope="module")
def shaped(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("sglang")
    return root, sg.build(root)


@pytest.fixture
def tree(shaped, tmp_path) -> Path:
    root, _ = shaped
    target = tmp_path / "tree"
    subprocess.run(["git", "clone", "-q", str(root), str(target)], check=True)
    return target


def step(tree: Path, sha: str, run: TestRun, out: Path, step_id: int = 1):
    spec = StepSpec(
        step_id, sha, (), 120, METRIC, env={"PYTHONPATH": str(tree / "python")}, test=run, higher_is_worse=True
    )
    return run_in_tree(spec, tree, out, None, "test-runner")


def own(cases: tuple[str, ...], transplant_from: str | None = None) -> TestRun:
    return TestRun(
        "unittest", sg.FILE, "test", sys.executable, (), (("SGLANG_IS_IN_CI", "true"),), cases, transplant_from
    )


def ci_log(tree: Path, sha: str) -> str:
    """The red run's log: run_suite running the commit's file in full (each failure in unittest's report)."""
    sg.git(tree, "checkout", "-q", sha)
    done = subprocess.run(
        [sys.executable, sg.FILE],
        cwd=tree / "test",
        env={"PYTHONPATH": str(tree / "python"), "PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert done.returncode == 1, done.stdout
    return "\n".join(run_suite([File(KL_TEST, attempts=[False], output=done.stdout.splitlines())]))


def test_the_red_runs_failed_cases_are_what_each_step_runs_and_each_reads_its_own_metric(shaped, tree, tmp_path):
    _, shas = shaped
    policy = parse(POLICY, "sglang.yaml")
    log = ci_log(tree, shas["gsm8k"])
    assert "avg_kl_div=0.0001" in log  # passing readings (prefill, page size 2) sit among the failing ones
    (failure,) = failed_tests(policy, log)
    expected = (f"{PAGE1}.{DECODE}", f"{ALLOC}.{DECODE}", f"{PAGE2}.test_gsm8k")
    assert sorted(failure.cases) == sorted(expected)  # two methods, three classes: each as unittest named it
    assert (failure.metric, failure.threshold) == (0.0065, 0.002)  # the failing method's reading

    config = bisect_config(policy, policy.tests[0], "main", False, failure.cases)
    run = TestRun.from_json(config.test_run)
    bad = step(tree, shas["gsm8k"], run, tmp_path / "bad")
    assert f"-v {' '.join(failure.cases)}" in bad.log_tail  # exactly those, nothing else of the file
    assert sorted(c.case for c in bad.cases) == sorted(expected)
    assert {c.case: (c.outcome, c.metric) for c in bad.cases} == {
        f"{PAGE1}.{DECODE}": ("bad", 0.0065),
        f"{ALLOC}.{DECODE}": ("bad", 0.0065),
        f"{PAGE2}.test_gsm8k": ("bad", None),
    }
    assert (bad.exit_code, bad.metric, bad.infra_reason) == (1, 0.0065, None)

    good = step(tree, shas["filler"], run, tmp_path / "good")
    assert {c.outcome for c in good.cases} == {"good"} and (good.exit_code, good.metric) == (0, 0.0001)
    middle = step(tree, shas["culprit"], run, tmp_path / "middle")  # decode broken, GSM8K not yet
    assert {c.case: c.outcome for c in middle.cases}[f"{PAGE2}.test_gsm8k"] == "good"
    assert middle.exit_code == 1 and middle.metric == 0.0065


def test_each_commit_runs_its_own_flags_across_a_rename_where_bads_file_cannot(shaped, tree, tmp_path):
    _, shas = shaped
    run = own((f"{PAGE1}.{DECODE}",))
    for name in ("base", "filler"):  # before and after the flag rename
        result = step(tree, shas[name], run, tmp_path / name)
        assert (result.exit_code, result.infra_reason) == (0, None), result.log_tail
    # BAD's file (the new flag) on a commit before the rename: its server exits 2 before it is up -- what a fixed
    # command would meet halfway through the range. The method never ran: infra, never a verdict on the commit.
    sg.git(tree, "checkout", "-q", shas["base"])
    bads = sg.git(tree, "show", f"{shas['gsm8k']}:test/{sg.FILE}")
    (tree / "test" / sg.FILE).write_text(bads)
    done = subprocess.run(
        [sys.executable, sg.FILE, "-v", f"{PAGE1}.{DECODE}"],
        cwd=tree / "test",
        env={"PYTHONPATH": str(tree / "python"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    (case,) = testrun.cases_of(run, done.stderr, re.compile(METRIC))
    assert case.outcome == "infra" and "setUpClass failed" in case.why
    assert f"unrecognized arguments: {sg.NEW_FLAG}" in case.why
    assert testrun.verdict([case], done.returncode) == (None, f"{case.case}: {case.why}")


def test_a_test_that_is_not_at_a_commit_makes_it_untestable_never_a_verdict(shaped, tree, tmp_path):
    _, shas = shaped
    missing_class = step(tree, shas["gsm8k"], own(("TestNotYet.test_x",)), tmp_path / "a")
    assert missing_class.exit_code == 125 and missing_class.infra_reason is None
    assert "has no TestNotYet at this commit" in missing_class.log_tail
    missing_method = step(tree, shas["gsm8k"], own((f"{PAGE1}.test_not_yet",)), tmp_path / "b")
    assert missing_method.exit_code == 125 and missing_method.cases[0].outcome == "skip"
    assert "has no attribute 'test_not_yet'" in missing_method.cases[0].why
    sg.git(tree, "checkout", "-q", shas["base"])
    moved = tree / "test" / sg.FILE
    shutil.rmtree(moved.parent)
    sg.git(tree, "commit", "-qam", "Move the models tests (#6)")
    without = sg.git(tree, "rev-parse", "HEAD")
    gone = step(tree, without, own((f"{PAGE1}.{DECODE}",)), tmp_path / "c")
    assert gone.exit_code == 125 and f"test/{sg.FILE} does not exist at this commit" in gone.log_tail
    # `missing: transplant`: BAD's copy stands in (here, where it fits the commit's flags it runs and says so)
    carried = step(tree, without, own((f"{PAGE1}.{DECODE}",), transplant_from=shas["base"]), tmp_path / "d")
    assert carried.exit_code == 0 and f"taken from {shas['base']}" in carried.log_tail


def test_a_test_file_that_dies_before_its_tests_fails_the_commit(shaped, tree, tmp_path):
    _, shas = shaped
    sg.git(tree, "checkout", "-q", shas["gsm8k"])
    (tree / "python" / "sglang" / "srt" / "kernels.py").write_text("raise ImportError('kernels moved')\n")
    sg.git(tree, "commit", "-qam", "Break the import (#7)")
    broken = sg.git(tree, "rev-parse", "HEAD")
    result = step(tree, broken, own((f"{PAGE1}.{DECODE}",)), tmp_path / "x")
    assert (result.exit_code, result.infra_reason) == (1, None)  # the commit's own test cannot even import: bad


def test_step_plan_prints_the_commits_own_test_before_and_after_a_flag_rename(shaped, tmp_path, cli):
    root, shas = shaped
    policy = tmp_path / "sglang.yaml"
    policy.write_text(POLICY.replace(f"python: {sys.executable}", "python: python3"))
    case = f"{PAGE1}.{DECODE}"
    for name, flag in (("base", sg.OLD_FLAG), ("gsm8k", sg.NEW_FLAG)):
        result = cli(
            "step-plan", "--policy", str(policy), "--test", "qwen3-next-models", "--repo", str(root),
            "--sha", shas[name][:10], "--case", case,
        )  # fmt: skip
        assert result.code == 0, result.stderr
        plan = json.loads(result.stdout)
        assert plan["sha"] == shas[name] and plan["untestable"] is None
        assert plan["command"] == ["python3", sg.FILE, "-v", case] and plan["cwd"] == "test"
        assert plan["env"]["SGLANG_IS_IN_CI"] == "true" and plan["env"]["PYTHONUNBUFFERED"] == "1"
        # the flags are the commit's file's, and the commit's server accepts every one of them
        test_file = sg.git(root, "show", f"{shas[name]}:test/{sg.FILE}")
        server = sg.git(root, "show", f"{shas[name]}:python/sglang/srt/server_args.py")
        used = set(re.findall(r'"(--[a-z-]+)"', test_file))
        assert flag in used and used <= set(re.findall(r'add_argument\("(--[a-z-]+)"', server)) | {"--model-path"}
    absent = cli(
        "step-plan", "--policy", str(policy), "--test", "qwen3-next-models", "--repo", str(root),
        "--sha", shas["base"], "--case", "TestNotYet.test_x",
    )  # fmt: skip
    assert json.loads(absent.stdout)["untestable"] == f"test/{sg.FILE} has no TestNotYet at this commit"
    wrong = cli("step-plan", "--policy", str(policy), "--test", "nope", "--repo", str(root))
    assert wrong.code == 2 and "no test 'nope'" in wrong.stderr and "Traceback" not in wrong.stderr
    unknown = cli(
        "step-plan", "--policy", str(policy), "--test", "qwen3-next-models", "--repo", str(root), "--sha", "zz"
    )
    assert unknown.code == 2 and "'zz' is not a commit" in unknown.stderr


PYTEST_FILE = """\
class TestKL:
    def test_decode(self):
        print("avg_kl_div=0.0065")
        assert 0.0065 < 0.002, "avg_kl_div=0.0065 > threshold=0.002 for m decode"

    def test_prefill(self):
        print("avg_kl_div=0.0001")


def test_gsm8k():
    print("accuracy=0.95")
"""


def test_a_pytest_file_is_narrowed_by_node_id_and_read_per_test(tmp_path):
    """pytest's own report: `-rA` prints each test's captured output under its name, and the node ids."""
    tree = tmp_path / "repo"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_kl.py").write_text(PYTEST_FILE)
    sg.git(tree.parent, "init", "-q", str(tree))
    sg.git(tree, "add", "-A")
    sg.git(tree, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "t")
    sha = sg.git(tree, "rev-parse", "HEAD")
    cases = ("TestKL::test_decode", "TestKL::test_prefill", "test_gsm8k")
    run = TestRun("pytest", "tests/test_kl.py", ".", sys.executable, ("-p", "no:cacheprovider"), (), cases)
    result = run_in_tree(StepSpec(1, sha, (), 120, METRIC, test=run), tree, tmp_path / "out", None, "r")
    assert {c.case: (c.outcome, c.metric) for c in result.cases} == {
        "TestKL::test_decode": ("bad", 0.0065),
        "TestKL::test_prefill": ("good", 0.0001),
        "test_gsm8k": ("good", None),
    }
    assert result.exit_code == 1 and result.metric == 0.0065
    # the red run's pytest log names the failed node ids: what a step runs
    log = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "tests/test_kl.py"],
        cwd=tree,
        capture_output=True,
        text=True,
    ).stdout
    (failure,) = failures(log)
    assert failure.case == "TestKL::test_decode" and "avg_kl_div=0.0065 > threshold=0.002" in failure.block
    missing = run_in_tree(
        StepSpec(2, sha, (), 120, METRIC, test=replace(run, cases=("TestNotYet::test_x",))),
        tree,
        tmp_path / "o2",
        None,
        "r",
    )
    assert missing.exit_code == 125


def test_a_step_of_several_tests_runs_each_in_turn_and_reports_each_by_its_id(tmp_path):
    """A group's step (bot.domain.bisect.group): each of the policy's tests it carries, as alone, one after the other
    in the same worktree; a result per test id, and the spec travels to an Actions runner intact."""
    from runners.spec import NamedRun
    from runners.step import Request

    tree = tmp_path / "repo"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_kl.py").write_text(PYTEST_FILE)
    sg.git(tree.parent, "init", "-q", str(tree))
    sg.git(tree, "add", "-A")
    sg.git(tree, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "t")
    sha = sg.git(tree, "rev-parse", "HEAD")
    args = ("-p", "no:cacheprovider")
    named = (
        NamedRun(
            "kl-decode", TestRun("pytest", "tests/test_kl.py", ".", sys.executable, args, (), ("TestKL::test_decode",))
        ),
        NamedRun("gsm8k", TestRun("pytest", "tests/test_kl.py", ".", sys.executable, args, (), ("test_gsm8k",))),
        NamedRun("not-yet", TestRun("pytest", "tests/test_later.py", ".", sys.executable, args)),
    )
    build = (sys.executable, "-c", "print('built')")  # the same build for each: run once per step
    named = tuple(replace(n, run=replace(n.run, build=build)) for n in named)
    spec = StepSpec(1, sha, (), 120, METRIC, tests=named)
    assert Request.from_json(Request("o/r", spec).to_json()).spec == spec
    result = run_in_tree(spec, tree, tmp_path / "out", None, "r")
    assert {c.case: (c.outcome, c.metric) for c in result.cases} == {
        "kl-decode": ("bad", 0.0065),
        "gsm8k": ("good", None),
        "not-yet": ("skip", None),  # the file is not in this commit: untestable for that test alone
    }
    assert result.exit_code == 1 and result.infra_reason is None
    log = (tmp_path / "out" / "test.log").read_text()
    assert log.index("revert-bisect: test kl-decode") < log.index("revert-bisect: test gsm8k")
    assert log.count("revert-bisect: building:") == 1, log
