"""Several red tests, one search: a posterior per test over shared runs (pure, like `engine.decide`).

Each test keeps its own `State`, flake rate and posterior, decided by `engine.decide` over the results
of that test alone; what is shared is the runner. A step is one run at one commit that runs every test
it carries and reports a result per test, so the unit of cost is the step, not the test:

- every test still undecided asks for its probes as if it had every free runner;
- the steps are chosen among those asks: a commit several tests want first, then the one that splits
  the most remaining mass over all tests (a confirmation or calibration run before a search run);
- each chosen step also carries every other test still searching whose result there is uncertain (a
  rider costs no runner), so tests with one culprit converge together and tests with different
  culprits part where their posteriors do;
- a test whose BAD passed on a re-run may fail by a flake anywhere: while no regression is at least as likely as
  one of a stated size (bot.domain.bisect.regression), its own runs go to the endpoints, after every other ask,
  and it ends `no_culprit` once the odds rule such a regression out;
- a test that ends (its culprit confirmed, or no culprit: its BAD passes on re-runs, it contradicts a
  deterministic reading, it fails at GOOD, its failures are flakes) rides no further step.

Each test's confirmation and A/B proof follow the rules of a bisection of one; a culprit shared by
several tests is reverted once (`wants_revert` names each culprit once).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Decision, Guess, Kind, Outcome, Phase, Probe, Problem, Run, State, Status
from bot.domain.bisect.regression import Regression, endpoint_runs, regression
from bot.domain.bisect.verdict import Verdict, classify

# A group's test reads its BAD this many times (the red reading included) before its search goes on alone: a red run
# of several tests often holds one that failed by a flake, and a step at BAD carries every such test at once.
BAD_READINGS = 3
# A group's trusted test re-runs its culprit twice, not once: each test rides more steps than it would alone, so a
# commit below the culprit failing twice by a flake is likelier; a third failure is what it takes (each culprit's
# re-runs are one step for all the tests it broke).
TRUSTED_RERUNS = 2
Step = tuple[Probe, ...]  # one run at one commit: a probe per test it carries, all of one sha


@dataclass(frozen=True)
class Group:
    """The tests bisected together: one problem each, over one graph and BAD (each test's GOOD its own). `one_run`:
    every member is read from the step's one run (a slowdown's metrics, each its own regex over one benchmark's
    output), so a member aboard costs nothing at all, not even the run's time."""

    problems: Mapping[str, Problem]
    one_run: bool = False

    def __post_init__(self) -> None:
        if not self.problems:
            raise ValueError("a group needs at least one test")
        if len({(p.bad, p.head) for p in self.problems.values()}) != 1:
            raise ValueError("the tests of a group share BAD and the branch head")
        if len(self.problems) > 1:
            object.__setattr__(
                self,
                "problems",
                {
                    t: replace(
                        p, settings=replace(p.settings, trusted_reruns=max(TRUSTED_RERUNS, p.settings.trusted_reruns))
                    )
                    for t, p in self.problems.items()
                },
            )

    @property
    def tests(self) -> tuple[str, ...]:
        return tuple(self.problems)


@dataclass(frozen=True)
class GroupDecision:
    states: Mapping[str, State]
    decisions: Mapping[str, Decision]  # each undecided test's own, this time
    steps: tuple[Step, ...] = ()  # to dispatch now, one run each
    obsolete: tuple[Probe, ...] = ()  # probes in flight whose result no longer matters to their test
    wants_revert: tuple[str, ...] = ()  # culprits to revert on the head before deciding again, once each

    @property
    def outcomes(self) -> dict[str, Outcome]:
        """Every test's outcome, once it has one."""
        return {t: d.outcome for t, d in self.decisions.items() if d.outcome is not None}

    @property
    def done(self) -> bool:
        return all(s.phase is Phase.DONE for s in self.states.values())


def decide_group(
    group: Group,
    states: Mapping[str, State],
    runs: Sequence[Run],
    in_flight: Sequence[Probe] = (),
    free: int = 1,
) -> GroupDecision:
    """Each undecided test's decision, and the steps that serve them best on `free` runners."""
    rnd = 1 + max([r.round for r in runs] + [p.round for p in in_flight] + [0])
    decisions: dict[str, Decision] = {}
    new_states = dict(states)
    for test, problem in group.problems.items():
        if states[test].phase is Phase.DONE:
            continue
        mine = [r for r in runs if r.test == test]
        flying = [p for p in in_flight if p.test == test]
        # asked as if a runner were free even when none is: a test with nothing in flight of its own must not read
        # "no runner" as "nothing left to test" (the steps chosen below never exceed `free`)
        decision = decide(problem, states[test], mine, flying, max(free, 1), next_round=rnd)
        decisions[test] = decision
        new_states[test] = decision.state
    doubts: dict[str, Regression] = {}
    if len(group.problems) > 1:
        for test, decision in list(decisions.items()):
            told = _doubt(group.problems[test], decision, [r for r in runs if r.test == test])
            if told is not None and told.ruled_out:
                decisions[test] = _no_regression(group.problems[test], decision, told)
                new_states[test] = decisions[test].state
            elif told is not None:
                doubts[test] = told
    live = {t for t, d in decisions.items() if d.outcome is None}
    # A run in flight for a test that has ended, or that its test calls settled, is obsolete for that test.
    obsolete = tuple(
        p for p in in_flight if p.test in decisions and (p.test not in live or p in decisions[p.test].obsolete)
    )
    wants = tuple(dict.fromkeys(d.wants_revert for d in decisions.values() if d.wants_revert))
    if wants:  # the reverts first: the confirmation rounds wait for them, as in a bisection of one
        return GroupDecision(new_states, decisions, (), obsolete, wants)
    busy = [p for p in in_flight if p not in obsolete]
    asks = {t: [replace(p, test=t, round=rnd) for p in decisions[t].probes] for t in sorted(live)}
    checks: set[str] = set()  # tests whose asks are the endpoints' runs for their odds: after every other ask
    if len(group.problems) > 1:
        for t in live:
            mine = [r for r in runs if r.test == t]
            if _unreproduced(group.problems[t], decisions[t], mine, busy, t):
                asks[t].append(Probe(group.problems[t].bad, Kind.CALIBRATE, rnd, t))
            elif t in doubts and doubts[t].doubtful:
                asks[t] = _endpoints(group.problems[t], mine, busy, t, rnd, max(1, len(asks[t])))
                checks.add(t)
    steps = _choose(group, asks, decisions, busy, free, checks)
    return GroupDecision(new_states, decisions, steps, obsolete)


def _doubt(problem: Problem, decision: Decision, runs: Sequence[Run]) -> Regression | None:
    """What a searching test of a group says of a regression at all, once its BAD has passed on the runner (a flaky
    test's red reading may have been its flake: bot.domain.bisect.regression); None for a test whose BAD failed
    every time, one declared deterministic, one judged by a metric or one searching a merge's commits."""
    s = problem.settings
    if (
        decision.outcome is not None
        or decision.state.phase is not Phase.SEARCHING
        or decision.state.merges
        or s.metric is not None
        or s.flake_rate == 0
    ):
        return None
    passed = any(
        r.sha == problem.bad and r.kind is not Kind.CI and classify(r.raw, None, None) is Verdict.GOOD for r in runs
    )
    return regression(problem, runs) if passed else None


def _no_regression(problem: Problem, decision: Decision, told: Regression) -> Decision:
    """The test ends with no culprit: no regression of the stated size is there (nothing to bisect, nothing to
    revert)."""
    outcome = Outcome(Status.NO_CULPRIT, told.message(problem), confidence=told.probability)
    done = replace(decision.state, phase=Phase.DONE)
    return replace(decision, state=done, probes=(), obsolete=(), outcome=outcome, guess=Guess(None, told.probability))


def _endpoints(
    problem: Problem, runs: Sequence[Run], busy: Sequence[Probe], test: str, rnd: int, count: int
) -> list[Probe]:
    """`count` runs of the endpoints for a test that more likely has no regression than one: they tell "no
    regression" from every culprit at once, GOOD lying below each and BAD above (bot.domain.bisect.regression)."""
    flying = [p.sha for p in busy if p.test == test]
    return [Probe(sha, Kind.CALIBRATE, rnd, test) for sha in endpoint_runs(problem, runs, flying, count)]


def _unreproduced(problem: Problem, decision: Decision, runs: Sequence[Run], busy: Sequence[Probe], test: str) -> bool:
    """A searching test of a group whose BAD has failed only once: in a red run of several tests, one may have
    failed by a flake, so each test's BAD is read a second time (one step for every such test at once) before its
    search goes further than the others'. A test of one keeps the engine's calibration."""
    if decision.state.phase is not Phase.SEARCHING or any(p.test == test and p.sha == problem.bad for p in busy):
        return False
    rule = problem.settings.metric
    read = [r for r in runs if r.sha == problem.bad and classify(r.raw, rule, decision.boundary).is_evidence]
    return len(read) < BAD_READINGS


def _choose(
    group: Group,
    asks: Mapping[str, list[Probe]],
    decisions: Mapping[str, Decision],
    busy: Sequence[Probe],
    free: int,
    checks: Collection[str] = (),
) -> tuple[Step, ...]:
    """Up to `free` steps: each a commit some test asked for, with every test asking for it there aboard; the
    endpoint runs of tests that likely have no regression (`checks`) after every other ask."""
    pending: dict[str, dict[str, list[Probe]]] = defaultdict(lambda: defaultdict(list))  # sha -> test -> its asks
    for test, probes in asks.items():
        for p in probes:
            pending[p.sha][test].append(p)
    aboard: dict[str, set[str]] = defaultdict(set)  # sha -> tests already running there (in flight or chosen)
    for p in busy:
        aboard[p.sha].add(p.test)
    steps: list[Step] = []
    while len(steps) < free and pending:
        sha = max(
            pending,
            key=lambda s: (bool(set(pending[s]) - set(checks)), *_worth(group, decisions, pending[s], s, aboard[s])),
        )
        wanted = pending[sha]
        step = [wanted[t].pop(0) for t in sorted(wanted)]
        for t in [t for t in wanted if not wanted[t]]:
            del wanted[t]
        if not wanted:
            del pending[sha]
        carried = {p.test for p in step}
        riders = [
            Probe(sha, _ride_kind(group, decisions, t, sha), step[0].round, t)
            for t in sorted(decisions)
            if t not in carried and t not in aboard[sha] and _rides(group, decisions, t, step)
        ]
        aboard[sha] |= carried | {p.test for p in riders}
        steps.append(tuple(step + riders))
    return tuple(steps)


def _worth(
    group: Group, decisions: Mapping[str, Decision], wanted: Mapping[str, list[Probe]], sha: str, aboard: set[str]
) -> tuple[int, int, float]:
    """A commit's claim on a runner: asked for beyond search (calibration, confirmation, the A/B proof) first,
    then by how many tests ask for it, then by the uncertainty it settles over every test not yet aboard."""
    beyond_search = sum(1 for probes in wanted.values() if probes[0].kind is not Kind.SEARCH)
    settles = sum(_split(group, decisions, t, sha) for t in decisions if t not in aboard)
    return beyond_search, len(wanted), settles


def _split(group: Group, decisions: Mapping[str, Decision], test: str, sha: str) -> float:
    """The smaller side of the test's posterior mass that a result at `sha` separates (0: it settles nothing)."""
    decision = decisions[test]
    post = decision.posterior
    if post is None:
        return 0.0
    pos = group.problems[test].scope(decision.state.merges).position(sha)
    if pos is None:
        return 0.0
    cdf = post.cdf(pos)
    return min(cdf, 1 - cdf)


# A test rides a step where a result there could move at least this much of its posterior. A pass is evidence, not
# proof (bot.domain.bisect.intermittent), so a test's mass below its passes is never exactly 0: riding wherever any is
# left would put every test aboard every step, each for a sliver of its mass.
RIDE = 0.01


def _rides(group: Group, decisions: Mapping[str, Decision], test: str, step: list[Probe]) -> bool:
    """Whether a test not asking for the step rides it: where its result could move its posterior; in a group read
    from one run, wherever the step's commit is in its range and the step is no A/B run (HEAD and HEAD + revert are
    each culprit's own proof), since its reading there costs nothing -- a member still calibrating reads the range's
    commits for its search to come, and one searching reads the endpoint another member calibrates at."""
    sha = step[0].sha
    if not group.one_run:
        return _uncertain(group, decisions, test, sha)
    decision = decisions[test]
    return (
        decision.outcome is None
        and decision.state.phase is not Phase.DONE
        and not any(p.kind in (Kind.AB_HEAD, Kind.AB_REVERT) for p in step)
        and group.problems[test].scope(decision.state.merges).position(sha) is not None
    )


def _ride_kind(group: Group, decisions: Mapping[str, Decision], test: str, sha: str) -> Kind:
    """A rider's kind of run: a calibration run at an endpoint of a test still calibrating, else a search run."""
    problem = group.problems[test]
    calibrating = decisions[test].state.phase is Phase.CALIBRATING
    return Kind.CALIBRATE if calibrating and sha in (problem.good, problem.bad) else Kind.SEARCH


def _uncertain(group: Group, decisions: Mapping[str, Decision], test: str, sha: str) -> bool:
    return (
        decisions[test].outcome is None
        and decisions[test].state.phase is Phase.SEARCHING
        and _split(group, decisions, test, sha) > RIDE
    )
