"""Several policies for one repository: SGLang's accuracy policy and its performance policy load side by side; a red
run goes to the policy that watches its workflow, a test to the policy that declares it; what would make the pair
ambiguous (a test id twice, a workflow watched twice, different `commands`) is refused at its file and line, naming
the other file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.policy_files import PolicyError, check_files, load_dir, parse
from bot.domain.command_plan import Comment, plan
from bot.domain.commands import Start
from bot.domain.repo_policies import RepoPolicies, conflicts
from bot.domain.scope import RunInfo
from tests.support.policies import MINIMAL

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
SGLANG = "sgl-project/sglang"

# a second policy for acme/engine beside MINIMAL: another workflow, another test
PERF = """\
repository: acme/engine
watch:
  - workflow: .github/workflows/perf.yml
tests:
  - id: throughput
    match: test_perf
    probe: {name: command, command: [./perf.sh]}
"""


def _run(path: str, name: str = "", event: str = "schedule", repo: str = SGLANG) -> RunInfo:
    return RunInfo(7, name, path, "main", "a" * 40, event, "failure", head_repository=repo)


def test_sglangs_accuracy_and_performance_policies_load_together():
    sglang = load_dir(POLICIES)[SGLANG]
    assert [Path(s).name for s in sglang.sources] == ["sglang-perf.yaml", "sglang.yaml"]
    accuracy, perf = sglang.for_test("qwen3-next-models"), sglang.for_test("text-models-perf")
    assert accuracy is not None and perf is not None and accuracy is not perf
    assert Path(sglang.source(accuracy)).name == "sglang.yaml" and Path(sglang.source(perf)).name == "sglang-perf.yaml"
    assert {t.id for t in sglang.tests} == {"qwen3-next-models", "text-models-perf"}
    # each policy reads its own runs with its own results: the KL regex for one, the perf table's for the other
    assert "avg_kl_div" in (accuracy.results.log.metric or "") and "Llama" in (perf.results.log.metric or "")


def test_a_red_run_goes_to_the_policy_that_watches_its_workflow():
    sglang = load_dir(POLICIES)[SGLANG]
    (pr_test,) = sglang.watching(_run(".github/workflows/pr-test.yml"))
    (nightly,) = sglang.watching(_run(".github/workflows/nightly-test-nvidia.yml"))
    assert pr_test[0].test("qwen3-next-models") is not None and pr_test[0].test("text-models-perf") is None
    assert nightly[0].test("text-models-perf") is not None and nightly[1].workflow.endswith("nightly-test-nvidia.yml")
    assert sglang.watching(_run(".github/workflows/release.yml")) == []
    assert sglang.watching(_run(".github/workflows/pr-test.yml", repo="someone/sglang")) == []  # a fork's


def test_a_command_names_a_test_of_either_policy_and_an_unknown_one_lists_both():
    sglang = load_dir(POLICIES)[SGLANG]
    said = plan(Comment("alice", "/revert-bisect text-models-perf good=abcdef1 bad=1234567"), "write", sglang)
    assert said.start == Start("text-models-perf", good="abcdef1", bad="1234567")
    assert plan(Comment("alice", "/revert-bisect qwen3-next-models good=abcdef1"), "write", sglang).start is not None
    reply = plan(Comment("alice", "/revert-bisect nope"), "write", sglang).reply or ""
    assert "revert-bisect policies" in reply and "`qwen3-next-models`" in reply and "`text-models-perf`" in reply


def test_a_test_id_in_two_policies_of_one_repository_names_both_files_and_lines(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(MINIMAL)
    second.write_text(PERF.replace("id: throughput", "id: kl"))
    loaded, problems = check_files([first, second])
    assert list(loaded) == [first]  # the first stands; the one that clashes with it does not load
    assert problems == [
        f"{second}:5: tests[0].id: test id kl is declared by two policies of acme/engine: a test id names one test "
        f"in its repository (also {first}:5)"
    ]
    with pytest.raises(PolicyError, match=r"b\.yaml:5: tests\[0\]\.id: test id kl .*\(also .*a\.yaml:5\)"):
        load_dir(tmp_path)


def test_two_policies_of_one_repository_load_when_they_do_not_clash(tmp_path):
    (tmp_path / "a.yaml").write_text(MINIMAL)
    (tmp_path / "b.yaml").write_text(PERF)
    (tmp_path / "c.yaml").write_text(MINIMAL.replace("acme/engine", "acme/other"))  # another repository's kl
    engine = load_dir(tmp_path)["acme/engine"]
    assert [t.id for t in engine.tests] == ["kl", "throughput"]
    assert engine.for_test("throughput") is engine.policies[1] and engine.for_test("nope") is None
    (run,) = engine.watching(_run(".github/workflows/perf.yml", repo="acme/engine"))
    assert run[0] is engine.policies[1]


@pytest.mark.parametrize(
    "watch, clash",
    [
        ("Nightly", True),  # the same workflow, event and branch
        ("Nightly\n    events: [schedule, workflow_dispatch]", True),  # events that overlap
        ("Nightly\n    events: [workflow_dispatch]", False),  # another event of it
        ("Nightly\n    branch: release", False),  # another branch
    ],
)
def test_one_workflow_is_watched_by_one_policy(tmp_path, watch, clash):
    """Two policies reading one run would read it with two `results` and could bisect one failed file twice; which of
    their tests overlap is a question about regexes: the watch itself is not shared."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(MINIMAL)
    second.write_text(PERF.replace("workflow: .github/workflows/perf.yml", f"workflow: {watch}"))
    _, problems = check_files([first, second])
    if not clash:
        assert problems == []
        return
    (problem,) = problems
    assert problem.startswith(f"{second}:3: watch[0].workflow: Nightly (schedule on main) is watched by two policies")
    assert problem.endswith(f"(also {first}:3)")


def test_a_workflow_by_path_and_by_file_name_is_one_workflow(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(PERF)
    second.write_text(MINIMAL.replace("workflow: Nightly", "workflow: perf.yml"))
    (problem,) = check_files([first, second])[1]
    assert f"{second}:3: watch[0].workflow: perf.yml" in problem and f"(also {first}:3)" in problem


def test_a_run_watched_by_two_policies_only_by_name_and_path_is_ambiguous():
    """A workflow named by its path in one policy and by its name in another cannot be told apart when loading: the
    run is watched by both, and the caller reads it with neither (bot.ingress.jobs.nightly)."""
    by_path = parse(PERF, "a.yaml")
    by_name = parse(MINIMAL.replace("workflow: Nightly", "workflow: Perf"), "b.yaml")
    both = RepoPolicies((by_path, by_name), ("a.yaml", "b.yaml"))
    run = RunInfo(7, "Perf", ".github/workflows/perf.yml", "main", "a" * 40, "schedule", "failure", "acme/engine")
    assert [both.source(p) for p, _ in both.watching(run)] == ["a.yaml", "b.yaml"]


def test_who_may_command_the_bot_is_one_answer_per_repository(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text(MINIMAL)
    second.write_text(PERF + "commands:\n  allow_roles: [admin]\n")
    (problem,) = check_files([first, second])[1]
    assert problem.startswith(f"{second}:8: commands: `commands` differs between two policies of acme/engine")
    assert problem.endswith(f"(also {first}:1)")  # the first says nothing: its defaults, from its top


def test_check_policy_reports_a_broken_second_file_at_its_line_and_the_first_as_ok(cli, tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "sglang.yaml").write_text((POLICIES / "sglang.yaml").read_text())
    broken = (
        (POLICIES / "sglang-perf.yaml")
        .read_text()
        .replace("      - name: llama-3.1-8b_bs8", "      - nme: x\n        name: llama-3.1-8b_bs8")
    )
    (policies / "sglang-perf.yaml").write_text(broken)
    line = broken.splitlines().index("      - nme: x") + 1
    r = cli("check-policy", str(policies))
    assert r.code == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [f"{policies / 'sglang-perf.yaml'}:{line}: tests[0].metrics[1].nme: unknown key"]
    assert r.stdout.splitlines() == [f"{policies / 'sglang.yaml'}: ok: {SGLANG}, 1 test(s), mode shadow"]
    # the same two files given one by one are checked together too: a clash across them is found
    (policies / "sglang-perf.yaml").write_text(
        (POLICIES / "sglang-perf.yaml").read_text().replace("id: text-models-perf", "id: qwen3-next-models")
    )
    r = cli("check-policy", str(policies / "sglang.yaml"), str(policies / "sglang-perf.yaml"))
    assert r.code == 2
    (problem,) = r.stderr.splitlines()
    assert problem.startswith(f"{policies / 'sglang-perf.yaml'}:") and f"(also {policies / 'sglang.yaml'}:" in problem
    assert cli("check-policy", str(POLICIES)).code == 0


def test_the_domain_refuses_ambiguous_policies_built_in_code():
    kl = parse(MINIMAL, "a.yaml")
    assert [c.why.split(":")[0] for c in conflicts([kl, kl])] == [
        "test id kl is declared by two policies of acme/engine",
        "Nightly (schedule on main) is watched by two policies of acme/engine",
    ]
    with pytest.raises(ValueError, match="test id kl is declared by two policies"):
        RepoPolicies((kl, kl))
    with pytest.raises(ValueError, match="several repositories"):
        RepoPolicies((kl, parse(PERF.replace("acme/engine", "acme/other"), "b.yaml")))
