"""`revert-bisect bisect --junit`: every red test of a JUnit report in one search, through the real CLI on real git.

The history (scenarios.synthetic, 64 commits): commit 20 breaks two tests, commit 45 a third; a fourth test is
flaky (it failed on the red reading of BAD and passes whenever it runs again); a fifth is green. The same history
is bisected both ways: one `--junit` bisection of the report, and one bisection per test of the same script."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.support.cli import bisect_args

SCRIPT = """#!/usr/bin/env python3
import os, pathlib, sys
tree = pathlib.Path.cwd()
sha = os.environ.get("REVERT_BISECT_SHA", "")
with open(os.environ["RUN_LOG"], "a") as log:
    log.write(sha + "\\n")
state = pathlib.Path(os.environ["FLAKY_STATE"])
red_reading = sha == os.environ["BAD_SHA"] and not state.exists()  # the flaky test's one failure: the red run's
if sha == os.environ["BAD_SHA"]:
    state.touch()
broken_a = "BROKEN = True" in (tree / "service" / "config.py").read_text()
broken_c = (tree / "notes" / "change_45.txt").exists()
failed = {
    "tests.test_kl.TestTrackInterval8.test_decode_cache_hit": broken_a,
    "tests.test_kl.TestTrackInterval4.test_decode_cache_hit": broken_a,
    "tests.test_bench.TestLatency.test_p99": broken_c,
    "tests.test_misc.TestPorts.test_free_port": red_reading,
    "tests.test_misc.TestDocs.test_links": False,
}
if len(sys.argv) > 1:  # one test alone, by its exit code, as `git bisect run` would run it
    sys.exit(1 if failed[sys.argv[1]] else 0)
cases = []
for test, bad in failed.items():
    classname, name = test.rsplit(".", 1)
    body = '<failure message="assert failed">AssertionError</failure>' if bad else ""
    cases.append(f'<testcase classname="{classname}" name="{name}" time="0.01">{body}</testcase>')
pathlib.Path(os.environ["REVERT_BISECT_JUNIT"]).write_text(
    '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">' + "".join(cases)
    + "</testsuite></testsuites>"
)
sys.exit(1 if any(failed.values()) else 0)
"""

KL8 = "tests.test_kl.TestTrackInterval8.test_decode_cache_hit"
KL4 = "tests.test_kl.TestTrackInterval4.test_decode_cache_hit"
P99 = "tests.test_bench.TestLatency.test_p99"
FLAKY = "tests.test_misc.TestPorts.test_free_port"
GREEN = "tests.test_misc.TestDocs.test_links"


@pytest.fixture
def history(synth, tmp_path):
    repo = synth(64, 20)
    script = tmp_path / "junit_test.py"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    return repo, script


def env_for(tmp_path, repo, name: str) -> dict:
    return {
        "RUN_LOG": str(tmp_path / f"{name}.runs"),
        "FLAKY_STATE": str(tmp_path / f"{name}.flaky"),
        "BAD_SHA": repo.bad,
    }


def runs_logged(tmp_path, name: str) -> int:
    path = tmp_path / f"{name}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_every_red_test_in_one_search_each_culprit_right_for_at_most_0_6_times_the_runs(history, cli, tmp_path):
    repo, script = history
    c45 = repo.shas[44]
    narrow = {**env_for(tmp_path, repo, "together"), "COLUMNS": "40"}  # stdout's lines are a script's: never wrapped
    together = cli(*bisect_args(repo, "--junit", "report.xml", command=[str(script)]), env=narrow)
    assert together.code == 0, together.stderr
    assert "Traceback" not in together.stderr
    by_test = {t["test"]: t for t in together.json["tests"]}
    assert by_test[KL8]["culprit"] == by_test[KL4]["culprit"] == repo.culprit
    assert by_test[P99]["culprit"] == c45
    assert {by_test[t]["outcome"] for t in (KL8, KL4, P99)} == {"found"}
    # nothing is blamed on the flaky test or the green one; each says how it ended
    assert by_test[FLAKY]["culprit"] is None and by_test[FLAKY]["outcome"] in ("not_reproducible", "no_culprit")
    assert by_test[GREEN]["culprit"] is None and by_test[GREEN]["outcome"] == "not_reproducible"
    assert together.json["runs"] == runs_logged(tmp_path, "together")  # "runs": every run of the command
    # beside it, `git bisect run` once per test BAD's report failed (the flaky one too: it failed there; the green one
    # no one bisects), each on the range given: 4 x ceil(log2 64)
    assert together.json["git_bisect_run"]["ranges"] == [64] * 4 and together.json["git_bisect_run"]["runs"] == 24
    assert "; git bisect run once per red test, each on its own range (4 tests, 64 commits): ~24 runs, ~" in (
        together.stderr.replace("\n", " ")
    )
    assert all(t["runs"] >= 1 for t in together.json["tests"])
    # each culprit once on stdout, `<sha> <subject>` as for one test; a row per test on stderr, with its culprit
    lines = together.stdout.splitlines()
    assert sorted(lines) == sorted(
        f"{sha} Change {repo.shas.index(sha) + 1} (#{1001 + repo.shas.index(sha)})" for sha in (repo.culprit, c45)
    )
    rows = {line.split()[0]: line for line in together.stderr.splitlines() if line.startswith("  tests.")}
    assert set(rows) == {KL8, KL4, P99, FLAKY, GREEN}
    assert repo.culprit[:12] in rows[KL8] and repo.culprit[:12] in rows[KL4] and c45[:12] in rows[P99]

    alone = 0
    for test in (KL8, KL4, P99, FLAKY, GREEN):
        r = cli(*bisect_args(repo, command=[str(script), test]), env=env_for(tmp_path, repo, test))
        expected = {KL8: repo.culprit, KL4: repo.culprit, P99: c45}.get(test)
        assert r.json["culprit"] == expected if expected else r.json["status"] != "found", (test, r.stderr)
        alone += runs_logged(tmp_path, test)
    spent = runs_logged(tmp_path, "together")
    assert spent <= 0.6 * alone, (spent, alone)


def test_tests_picks_among_the_reports_tests(history, cli, tmp_path):
    repo, script = history
    r = cli(
        *bisect_args(repo, "--junit", "report.xml", "--tests", r"TestLatency", command=[str(script)]),
        env=env_for(tmp_path, repo, "picked"),
    )
    assert r.code == 0, r.stderr
    assert [t["test"] for t in r.json["tests"]] == [P99]
    assert r.json["culprit"] == repo.shas[44]


def test_a_report_never_written_is_an_infra_result_naming_it(synth, cli, tmp_path):
    repo = synth(8, 4)
    script = tmp_path / "no_report.sh"
    script.write_text("#!/bin/sh\nexit 1\n")
    script.chmod(0o755)
    r = cli(*bisect_args(repo, "--junit", "out/junit.xml", command=[str(script)]))
    assert r.code == 7, r.stderr
    assert "Traceback" not in r.stderr
    assert "the JUnit report out/junit.xml was not written" in r.stderr, r.stderr
    assert r.json["status"] == "untestable" and r.json["tests"] == []
    ran = [s for s in r.json["steps"] if s["state"] in ("done", "lost")]  # cancelled ones are listed too
    assert ran and all(s["verdict"] == "infra" for s in ran)


def test_a_malformed_report_is_an_infra_result_naming_it(synth, cli, tmp_path):
    repo = synth(8, 4)
    script = tmp_path / "bad_report.sh"
    script.write_text('#!/bin/sh\necho "<html>not junit</html>" > "$REVERT_BISECT_JUNIT"\nexit 1\n')
    script.chmod(0o755)
    r = cli(*bisect_args(repo, "--junit", "junit.xml", command=[str(script)]))
    assert r.code == 7, r.stderr
    assert "the JUnit report junit.xml is not JUnit XML: its root is <html>" in r.stderr, r.stderr


@pytest.mark.parametrize(
    "extra, words",
    [
        (["--tests", "kl"], "--tests picks among the tests of a JUnit report: add --junit PATH"),
        (["--junit", "/tmp/abs.xml"], "--junit /tmp/abs.xml must be a path inside the worktree"),
        (["--junit", "../up.xml"], "--junit ../up.xml must be a path inside the worktree"),
        (["--junit", "r.xml", "--tests", "("], "--tests '(' is not a valid regular expression"),
        (["--junit", "r.xml", "--metric-file"], "--junit judges each test by its report"),
    ],
)
def test_junit_options_that_cannot_work_are_one_line_errors(synth, cli, extra, words):
    repo = synth(6, 3)
    r = cli(*bisect_args(repo, *extra))
    assert r.code == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"revert-bisect: error: {r.stderr.strip().split('error: ', 1)[1]}"]
    assert words in r.stderr, r.stderr
    assert r.json is None


def test_the_junit_reader_names_each_case_and_keeps_a_reruns_last_word(tmp_path):
    from runners import junit

    report = tmp_path / "r.xml"
    report.write_text(
        "<testsuite><testcase classname='a.B' name='t1'><failure/></testcase>"
        "<testcase classname='a.B' name='t2'><skipped/></testcase>"
        "<testcase classname='' name='t3'><error message='boom'/></testcase>"
        "<testcase classname='a.B' name='t1'/></testsuite>"
    )
    cases = {c.case: c for c in junit.read(report, "r.xml")}
    assert {k: c.outcome for k, c in cases.items()} == {"a.B.t2": "skip", "t3": "bad", "a.B.t1": "good"}
    assert cases["t3"].why == "boom"
    ET.ElementTree(ET.Element("testsuites")).write(report)
    assert junit.read(report, "r.xml") == ()


@pytest.mark.parametrize("code, verdict", [(125, "skip"), (137, "infra"), (1, "cases")])
def test_exit_125_and_128_up_keep_their_meaning_for_every_test_of_a_report(synth, tmp_path, code, verdict):
    """A run that exits 125 (cannot be tested) or >= 128 (killed) says that of every test, whatever its report says;
    any other exit leaves each test to the report."""
    from runners.spec import StepSpec
    from runners.step import run_in_tree

    repo = synth(4, 2)
    script = tmp_path / "report_then_exit.sh"
    script.write_text(
        "#!/bin/sh\n"
        'echo \'<testsuite><testcase classname="a.B" name="t"><failure/></testcase></testsuite>\' '
        f'> "$REVERT_BISECT_JUNIT"\nexit {code}\n'
    )
    script.chmod(0o755)
    result = run_in_tree(StepSpec(1, repo.bad, (str(script),), 60, junit="r.xml"), repo.path, tmp_path / "o", None, "r")
    assert result.exit_code == code
    if verdict == "cases":
        assert [(c.case, c.outcome) for c in result.cases] == [("a.B.t", "bad")]
    else:  # the report is not read: each test of the group reads the step's skip or infra
        assert result.cases == ()
    from bot.domain.bisect.verdict import classify
    from bot.service.group_rows import raw_results

    read = {
        t: classify(raw, None, None).value for t, raw in raw_results(result, ["a.B.t", "a.B.u"], whole=False).items()
    }
    expected = {"skip": "skip", "infra": "infra"}.get(verdict)
    assert read == ({"a.B.t": "bad", "a.B.u": "skip"} if expected is None else {"a.B.t": expected, "a.B.u": expected})
