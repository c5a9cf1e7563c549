"""The revert PR's A/B table is a view of the stored proof (bot.domain.outcome.AB) beside the runs of each side:
whether it passed and what stood for HEAD's runs come from the proof, what the runs read from the runs."""

from bot.domain.bisect.verdict import RawResult, Verdict
from bot.domain.outcome import AB as Proof
from bot.service.pr_body import AB

BAD, GOOD, SKIP = Verdict.BAD, Verdict.GOOD, Verdict.SKIP


def test_each_side_reads_its_runs_verdicts_and_values():
    ab = AB(
        Proof(passed=True, head_verdicts=["bad", "bad"], revert_verdicts=["good"]),
        "h" * 40,
        "r" * 40,
        head_runs=((BAD, RawResult(1, 0.0065)), (BAD, RawResult(1, 0.007))),
        revert_runs=((GOOD, RawResult(0, 0.0003)),),
    )
    assert (ab.head_verdicts, ab.head_values) == ("bad x2", "0.0065, 0.007")
    assert (ab.revert_verdicts, ab.revert_values) == ("good", "0.0003")
    assert ab.passed


def test_whether_it_passed_is_the_proofs_not_the_runs():
    runs = ((BAD, RawResult(1)),)
    assert not AB(Proof(), "h", "r", runs, ((GOOD, RawResult(0)),)).passed


def test_what_stood_for_heads_runs_is_named_with_the_verdicts_the_proof_counted():
    # a run that failed unlike CI's red run counted as a skip (bot.domain.bisect.confirmation): the proof says so
    proof = Proof(passed=False, head_verdicts=["bad", "skip"], head_from="BAD itself: 1 of its runs stand for it")
    ab = AB(proof, "h", "r", head_runs=((BAD, RawResult(1, 0.0065)), (BAD, RawResult(1, None))))
    assert ab.head_verdicts == "bad skip (BAD itself: 1 of its runs stand for it)"
    assert ab.head_values == "0.0065"  # the metric read where there is one


def test_without_a_metric_the_exit_codes_are_shown_and_no_run_shows_nothing():
    ab = AB(Proof(), "h", "r", head_runs=((BAD, RawResult(1)), (SKIP, RawResult(None))))
    assert (ab.head_verdicts, ab.head_values) == ("bad skip", "1, -")
    assert (ab.revert_verdicts, ab.revert_values) == ("", "")
