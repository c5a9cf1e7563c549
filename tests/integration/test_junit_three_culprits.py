"""Issue 33's suite through the real CLI: `revert-bisect bisect --junit ... --workers 3` on a JUnit report of six
tests -- two broken together at one commit, one each at two other commits, one flaky (it fails about 30% of the time
everywhere, GOOD included, and its red reading at BAD was such a failure), one green. Every culprit is named and
nothing is blamed on the flaky or the green test.

The flaky test's results come from a fixed pseudo-random stream per commit (the n-th run of a commit always reads the
same). Which commits it runs depends on the order three workers finish in, so how it ends does too: dismissed as no
regression once its odds reach 99:1 (bot.domain.bisect.regression), or at its run budget, inconclusive, when they do
not -- about half of such histories each (bench/group_bench.py --three-culprits; the runs against one bisection per
test are measured there, over 400 histories). Either way it names no culprit."""

from __future__ import annotations

import pytest

from tests.support.cli import bisect_args, no_traceback

SCRIPT = """#!/usr/bin/env python3
import hashlib, os, pathlib, sys
tree = pathlib.Path.cwd()
sha = os.environ.get("REVERT_BISECT_SHA", "")
with open(os.environ["RUN_LOG"], "a") as log:
    log.write(sha + "\\n")
state = pathlib.Path(os.environ["FLAKY_STATE"])
state.mkdir(exist_ok=True)
nth = 0
while True:  # this run's number at this commit, claimed atomically: workers run side by side
    try:
        os.close(os.open(state / f"{sha}.{nth}", os.O_CREAT | os.O_EXCL))
        break
    except FileExistsError:
        nth += 1
roll = int(hashlib.sha256(f"{sha}:{nth}".encode()).hexdigest()[:8], 16) / 16**8
red_reading = sha == os.environ["BAD_SHA"] and nth == 0  # the red run: the flaky test failed there, by chance
broken_a = "BROKEN = True" in (tree / "service" / "config.py").read_text()
failed = {
    "tests.test_kl.TestTrackInterval8.test_decode_cache_hit": broken_a,
    "tests.test_kl.TestTrackInterval4.test_decode_cache_hit": broken_a,
    "tests.test_bench.TestLatency.test_p99": (tree / "notes" / "change_45.txt").exists(),
    "tests.test_sched.TestBatch.test_prefill_order": (tree / "notes" / "change_9.txt").exists(),
    "tests.test_misc.TestPorts.test_free_port": red_reading or roll < 0.3,
    "tests.test_misc.TestDocs.test_links": False,
}
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
PREFILL = "tests.test_sched.TestBatch.test_prefill_order"
FLAKY = "tests.test_misc.TestPorts.test_free_port"
GREEN = "tests.test_misc.TestDocs.test_links"


@pytest.mark.timeout(900)
def test_three_culprits_a_flaky_and_a_green_test_each_culprit_right_and_nothing_blamed_on_the_others(
    synth, cli, tmp_path
):
    repo = synth(64, 20)
    script = tmp_path / "junit_test.py"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    c9, c45 = repo.shas[8], repo.shas[44]
    env = {"RUN_LOG": str(tmp_path / "runs"), "FLAKY_STATE": str(tmp_path / "flaky"), "BAD_SHA": repo.bad}
    r = cli(*bisect_args(repo, "--junit", "report.xml", "--workers", "3", command=[str(script)]), env=env, timeout=600)
    no_traceback(r)
    by_test = {t["test"]: t for t in r.json["tests"]}
    assert set(by_test) == {KL8, KL4, P99, PREFILL, FLAKY, GREEN}
    assert by_test[KL8]["culprit"] == by_test[KL4]["culprit"] == repo.culprit
    assert by_test[P99]["culprit"] == c45 and by_test[PREFILL]["culprit"] == c9
    assert {by_test[t]["outcome"] for t in (KL8, KL4, P99, PREFILL)} == {"found"}
    # each culprit once on stdout, as for one test
    assert sorted(r.stdout.splitlines()) == sorted(
        f"{sha} Change {repo.shas.index(sha) + 1} (#{1001 + repo.shas.index(sha)})" for sha in (c9, repo.culprit, c45)
    )
    # nothing is blamed on the flaky test or the green one; each says how it ended
    flaky = by_test[FLAKY]
    assert flaky["culprit"] is None and flaky["outcome"] in ("no_culprit", "inconclusive"), flaky
    if flaky["outcome"] == "no_culprit":
        assert "its failures are flakes, not a regression" in flaky["message"], flaky
        assert f"the test fails at GOOD {repo.good[:12]} (" in flaky["message"], flaky
    assert by_test[GREEN]["culprit"] is None and by_test[GREEN]["outcome"] == "not_reproducible"
    # the bisection's status is its least settled test's: found once the flaky test is dismissed
    assert r.code == (0 if flaky["outcome"] == "no_culprit" else 8), r.stderr
    assert r.json["runs"] == len((tmp_path / "runs").read_text().splitlines())
