"""A slowdown's metrics as one group search (bot.domain.bisect.group): a member per metric, each judged by its own
sampled rule (no threshold), every step one run of the benchmark read for each metric it carries (runners.metric);
and how such a bisection is asked for and stored (bot.domain.requests, bot.service.config), old ones of one judged
metric still read as before."""

from __future__ import annotations

import random
from dataclasses import replace

from bot.domain.bisect.group import Group, decide_group
from bot.domain.bisect.model import Kind, Outcome, Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import linear_graph
from bot.domain.bisect.verdict import MetricRule, RawResult
from bot.domain.requests import CiReading, JudgedMetric, StartRequest
from bot.service.config import BisectConfig, measured_by
from runners.metric import metric_cases
from runners.spec import NamedMetric, StepSpec
from runners.step import Request

N = 32
THROUGHPUT = Settings(metric=MetricRule(None, higher_is_worse=False))


def bisected(culprits: dict[str, int], seed: int) -> tuple[dict[str, Outcome], int]:
    """The metrics (name -> the commit that slows it 4%, 1% noise) bisected together, HEAD the range's last commit;
    each step one run that reads every metric it carries, and every member still searching or calibrating aboard every
    step in its range but the A/B's. Each metric's outcome, and the steps run."""
    graph, good, bad = linear_graph(N)
    graph["head"] = (bad,)
    rng = random.Random(seed)
    group = Group({m: Problem(graph, good, bad, THROUGHPUT, "head") for m in culprits}, one_run=True)
    states, runs, outcomes, steps = {m: State() for m in culprits}, [], {}, 0

    def slowed(sha: str) -> set[int]:
        """The culprits a tree holds: HEAD every one, HEAD + revert all but the reverted one."""
        if sha == "head" or sha.startswith("revert-"):
            return set(culprits.values()) - ({int(sha.removeprefix("revert-c"))} if sha != "head" else set())
        return {c for c in culprits.values() if c <= int(sha[1:])}

    while not (decision := decide_group(group, states, runs, (), 2)).done:
        states = dict(decision.states)
        outcomes.update(decision.outcomes)
        if decision.wants_revert:
            states = {
                m: replace(s, revert=f"revert-{s.confirming}") if s.confirming in decision.wants_revert else s
                for m, s in states.items()
            }
            continue
        assert decision.steps, "the group neither ran a step nor ended"
        for step in decision.steps:
            steps += 1
            if step[0].kind not in (Kind.AB_HEAD, Kind.AB_REVERT):
                live = {m for m, d in decision.decisions.items() if d.outcome is None}
                assert {p.test for p in step} >= live, step  # a reading costs nothing: every member still on reads it
            held = slowed(step[0].sha)
            reading = {
                m: 100.0 * (0.96 if c in held else 1.0) * (1 + 0.01 * rng.gauss(0, 1)) for m, c in culprits.items()
            }
            runs += [Run(p.sha, p.kind, RawResult(0, reading[p.test]), p.round, p.test) for p in step]
    outcomes.update(decision.outcomes)
    return outcomes, steps


def test_two_metrics_slowed_by_two_commits_of_one_range_each_find_their_own_for_fewer_runs_than_apart():
    together = apart = 0
    for seed in range(6):
        outcomes, steps = bisected({"bs1": 9, "bs64": 23}, seed)
        for metric, culprit in (("bs1", "c9"), ("bs64", "c23")):
            told = outcomes[metric]
            assert told.status is Status.FOUND and told.culprit == culprit, (seed, metric, told.message)
            assert told.ab is not None and told.ab.passed and told.effect is not None
        together += steps
        apart += bisected({"bs1": 9}, seed)[1] + bisected({"bs64": 23}, 100 + seed)[1]
    assert together < apart, (together, apart)


def test_two_metrics_slowed_by_one_commit_name_it_and_revert_it_once():
    outcomes, _ = bisected({"bs1": 14, "bs64": 14}, 3)
    assert {o.culprit for o in outcomes.values()} == {"c14"}
    assert all(o.ab is not None and o.ab.passed for o in outcomes.values())


# -- a run read for several metrics (runners.metric.metric_cases) --------------------------------------------------

TABLE = "| batch size | tput |\n|---|---|\n| 1 | 950.5 |\n| 64 | 19000 |\n"
BS1 = NamedMetric("bs1", r"(?m)^\| 1 \| (?P<value>[0-9.]+) \|")
BS64 = NamedMetric("bs64", r"(?m)^\| 64 \| (?P<value>[0-9.]+) \|")
BS8 = NamedMetric("bs8", r"(?m)^\| 8 \| (?P<value>[0-9.]+) \|")


def test_each_metric_is_a_case_of_the_one_run_and_a_missing_reading_a_skip_saying_why():
    cases = {c.case: c for c in metric_cases((BS1, BS64, BS8), TABLE, 0, None)}
    assert (cases["bs1"].outcome, cases["bs1"].metric) == ("good", 950.5)
    assert (cases["bs64"].outcome, cases["bs64"].metric) == ("good", 19000.0)
    assert cases["bs8"].outcome == "skip" and cases["bs8"].metric is None and "matched nothing" in cases["bs8"].why


def test_a_crashed_run_is_bad_for_each_metric_and_one_that_said_nothing_has_no_case():
    assert [(c.case, c.outcome, c.metric) for c in metric_cases((BS1, BS8), TABLE, 1, None)] == [
        ("bs1", "bad", 950.5),
        ("bs8", "bad", None),
    ]
    assert metric_cases((BS1,), TABLE, 125, None) == ()  # untestable: the exit code speaks for every metric
    assert metric_cases((BS1,), TABLE, None, "timed out") == ()


def test_the_step_spec_carries_its_metrics_to_the_runner():
    spec = StepSpec(3, "a" * 40, ("./bench",), metrics=(BS1, BS64))
    assert Request.from_json(Request("repo", spec).to_json()).spec.metrics == (BS1, BS64)


# -- asked for and stored -------------------------------------------------------------------------------------------

CI = (CiReading("g" * 40, True, 1000.0, "u1"), CiReading("b" * 40, False, 950.0, "u2"))
METRICS = (JudgedMetric("bs64", BS64.regex, False, CI), JudgedMetric("bs1", BS1.regex, False))


def request(*metrics: JudgedMetric) -> StartRequest:
    return StartRequest("o/r", None, None, None, "bench", "g" * 40, "b" * 40, None, False, run=7, metrics=metrics)


def test_a_slowdown_is_a_member_per_metric_each_with_its_own_ci_readings():
    work = request(*METRICS)
    assert [(m.test, m.good, m.ci) for m in work.group] == [("bs64", "g" * 40, CI), ("bs1", "g" * 40, ())]
    assert work.key == f"o/r@bench/bs64+bs1:{'g' * 40}..{'b' * 40}"
    assert work.origin()["metric"] == "bs64" and work.origin()["metrics"] == ["bs64", "bs1"]


def test_one_metric_keeps_the_key_a_bisection_judging_it_alone_was_stored_under():
    """A delivery that assesses a slowdown already bisected before groups of metrics resumes that bisection."""
    assert request(METRICS[0]).key == f"o/r@bench/bs64:{'g' * 40}..{'b' * 40}"


def test_each_member_metric_is_sampled_by_its_own_rule_and_a_step_reads_those_it_carries():
    config = measured_by(
        BisectConfig(command=("./bench",)), (JudgedMetric("lat", r"lat=(?P<value>\S+)", True), *METRICS)
    )
    assert not config.whole_step
    assert config.settings_for("lat").metric == MetricRule(None, higher_is_worse=True)
    assert config.settings_for("bs1").metric == MetricRule(None, higher_is_worse=False)
    assert config.named_metrics(["bs64", "bs1"]) == (BS1, BS64)
    assert BisectConfig.from_json(config.to_json()) == config


def test_a_bisection_stored_judging_one_metric_reads_as_before():
    """Stored before groups of metrics: the judged metric's regex as the config's own, no `metrics`; its one test is
    the whole step, judged by that regex without a threshold."""
    old = {"command": ["./bench"], "metric_regex": BS1.regex, "threshold": None, "higher_is_worse": False}
    config = BisectConfig.from_json(old)
    assert config.metrics is None and config.whole_step
    assert config.settings_for("bench").metric == MetricRule(None, higher_is_worse=False)
    assert config.named_metrics(["bench"]) == ()
