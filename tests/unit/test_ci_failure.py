"""What counts as CI's failure reproduced on the bisect runner (bot.domain.bisect.ci_failure, runners.failure)."""

from __future__ import annotations

from dataclasses import replace

from bot.domain.bisect.ci_failure import RUNNER_ERROR, Failure, as_ci_reads, ci_failure, runner_outcome
from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Kind, Outcome, Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import linear_graph
from bot.domain.bisect.verdict import MetricRule, RawResult, Verdict
from bot.domain.reasons import Reason
from runners import failure

KL = MetricRule(threshold=0.002)


def test_how_ci_failed_is_read_from_its_metric_or_its_assertion_line():
    assert ci_failure(0.0065, "", KL) is Failure.METRIC
    assert ci_failure(0.0004, "AssertionError: cache hits 3 of 32", KL) is Failure.ASSERTION
    assert ci_failure(None, "avg_kl_div=0.0065 > threshold=0.002 for Qwen", None) is Failure.ASSERTION
    assert ci_failure(None, "", None) is None  # CI's log said neither: no kind is compared


def test_a_runner_error_is_infra_naming_the_runner_only_where_ci_failed_its_check():
    oom = "torch.OutOfMemoryError: CUDA out of memory"
    read = as_ci_reads(RawResult(1), "error", oom, "gpu-h100-07", Failure.METRIC)
    assert read.exit_code is None and read.infra_reason.startswith(f"{RUNNER_ERROR}gpu-h100-07: {oom}")
    assert as_ci_reads(RawResult(1), "assertion", None, "gpu-h100-07", Failure.METRIC) == RawResult(1)
    assert as_ci_reads(RawResult(1), "error", oom, "gpu-h100-07", None) == RawResult(1)  # CI's kind unknown


def test_the_runners_own_word_on_how_a_case_failed():
    assert failure.of_text("E   torch.OutOfMemoryError: CUDA out of memory") == failure.ERROR
    assert failure.of_text("FileNotFoundError: [Errno 2] model.bin") == failure.ERROR
    assert failure.of_text("AssertionError: avg_kl_div=0.0065 > threshold=0.002") == failure.ASSERTION
    assert failure.of_text("assert 0.0065 <= 0.002") == failure.ASSERTION
    assert failure.of_cases(["error", "assertion"]) == failure.ASSERTION and failure.of_cases([None]) is None


def test_an_endpoint_untestable_because_the_runner_errored_names_the_runner():
    sha = "c" * 40
    found = Outcome(Status.UNTESTABLE, "x", reason=Reason.ENDPOINT_UNTESTABLE, facts=dict(endpoint="BAD", sha=sha))
    errored = RawResult(None, None, f"{RUNNER_ERROR}gpu-7: OSError: no model, where CI's red run failed an assertion")
    told = runner_outcome(found, [Run(sha, Kind.CALIBRATE, errored)] * 3)
    assert told.reason is Reason.RUNNER_ERROR and told.facts["runner"] == "gpu-7" and "gpu-7" in told.message
    lost = Run(sha, Kind.CALIBRATE, RawResult(None, None, "lost: the runner went away"))
    assert runner_outcome(found, [Run(sha, Kind.CALIBRATE, errored), lost]) == found  # not the runner's error alone


def _drive(problem, outcome_of, given):
    state, runs = State(), list(given)
    for _ in range(200):
        d = decide(problem, state, runs, (), 2)
        state = replace(d.state, revert="REVERT") if d.wants_revert else d.state
        if d.outcome:
            return d, runs
        runs += [Run(p.sha, p.kind, outcome_of(p.sha, p.kind), p.round) for p in d.probes]
    raise AssertionError("did not finish")


def _errored_head(head):
    broken = RawResult(None, None, f"{RUNNER_ERROR}gpu-7: OSError: no model, where CI's red run failed an assertion")
    return lambda sha, kind: broken if sha == head else RawResult(0 if sha == "REVERT" or int(sha[1:]) < 9 else 1)


def test_cis_reading_is_never_heads_only_side():
    """The nightly path (CI's red reading of BAD reproduced, BAD taken as read): HEAD's side needs a failure on the
    bisect runner. HEAD is BAD and every run of it there errors (made infra): no revert is proven; the bisection ends
    at BAD, which the runner cannot run, naming the runner."""
    graph, good, bad = linear_graph(20)
    ci = [Run(good, Kind.CI, RawResult(0)), Run(bad, Kind.CI, RawResult(1))]
    d, runs = _drive(Problem(graph, good, bad, Settings(trust_endpoints=True), head=bad), _errored_head(bad), ci)
    assert d.outcome.ab is None or not d.outcome.ab.passed
    told = runner_outcome(d.outcome, runs)
    assert told.status is Status.UNTESTABLE and told.reason is Reason.RUNNER_ERROR and "gpu-7" in told.message


def test_a_head_the_runner_cannot_run_proves_nothing_and_says_why():
    graph, good, bad = linear_graph(20)
    ci = [Run(good, Kind.CI, RawResult(0)), Run(bad, Kind.CI, RawResult(1))]
    d, runs = _drive(Problem(graph, good, bad, Settings(trust_endpoints=True), head="c25"), _errored_head("c25"), ci)
    assert d.outcome.culprit == "c9" and not d.outcome.ab.passed and d.outcome.ab.head_verdicts == (), d.outcome
    assert "HEAD's failure was not reproduced on the bisect runner (errored on the bisect runner gpu-7" in (
        d.outcome.message
    )


def test_heads_failure_counts_only_as_ci_read_it():
    """CI read the KL metric over its threshold. A HEAD that crashes on the runner before printing it is no
    reproduction of CI's failure; BAD's runs that read it over the threshold stand for HEAD (BAD is HEAD)."""
    graph, good, bad = linear_graph(20)
    rule = Settings(metric=KL)
    ci = [Run(good, Kind.CI, RawResult(0, 0.0004)), Run(bad, Kind.CI, RawResult(1, 0.0065))]
    reads = lambda sha, kind: RawResult(0, 0.0004) if sha == "REVERT" or int(sha[1:]) < 9 else RawResult(1, 0.0065)  # noqa: E731
    crashes = lambda sha, kind: RawResult(1, None) if sha == "c25" else reads(sha, kind)  # noqa: E731
    d, runs = _drive(Problem(graph, good, bad, rule, head="c25"), crashes, ci)
    assert d.outcome.culprit == "c9" and not d.outcome.ab.passed, d.outcome
    assert Verdict.SKIP in d.outcome.ab.head_verdicts and "without the metric CI read" in d.outcome.message
    d, runs = _drive(Problem(graph, good, bad, rule, head=bad), reads, ci)
    assert d.outcome.ab.passed and d.outcome.ab.head_from.startswith("BAD itself"), d.outcome
