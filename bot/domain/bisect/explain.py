"""What the engine made of a bisection's runs, for the dashboard to show rather than re-derive: each run's
verdict (Evidence's classification, against the boundary calibrated on the endpoints), the commits in range
order and the posterior over them (Posterior, with the flake rate the engine used).

The order is the range's first-parent commits as recorded when the bisection started (migration 0009); for
bisections stored before that, the tested commits placed by replaying the search: every new probe lies
between the highest commit known good and the lowest known bad above it when its round started, and a
round's probes are recorded in position order (exact for searches in synchronous rounds).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bot.domain.bisect.evidence import Evidence, effective_flake
from bot.domain.bisect.intermittent import search_posterior
from bot.domain.bisect.model import Kind, Problem, Run, Settings
from bot.domain.bisect.posterior import Contradiction, Tally
from bot.domain.bisect.readings import Reading, Readings
from bot.domain.bisect.sampled import sampled
from bot.domain.bisect.verdict import RawResult, Verdict

AB_KIND_VALUES = {Kind.AB_HEAD.value, Kind.AB_REVERT.value}


class Step(Protocol):
    """A stored run as the explanation reads it (bot.adapters.store.models.StepRow has it)."""

    id: int
    sha: str
    kind: str
    round: int
    state: str
    verdict: str | None
    exit_code: int | None
    metric: float | None
    infra_reason: str | None


@dataclass(frozen=True)
class Masses:
    """The posterior over `order[1:]`, or why there is none (`note`)."""

    by_position: dict[int, float] = field(default_factory=dict)
    no_culprit: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class Explanation:
    verdicts: dict[int, str]  # step id -> verdict
    order: list[str]  # GOOD, then the commits oldest first
    recorded: bool  # the order is the recorded range (else reconstructed from the search)
    posterior: Masses


def explain(
    good: str, bad: str, settings: Settings, steps: Sequence[Step], recorded: Sequence[str], flake_rate: float | None
) -> Explanation:
    """`steps` in id order; `recorded` the range's first-parent commits (may be empty); `flake_rate` the
    engine's last (None: estimate it from the results, as the engine does)."""
    verdict_of = verdicts(good, bad, settings, steps)
    range_steps = [s for s in steps if s.kind not in AB_KIND_VALUES]
    searched = order_commits(good, bad, range_steps, verdict_of)
    order = [good, *recorded] if recorded else searched
    placed = set(order)
    order += [sha for sha in searched if sha not in placed]  # a commit a merge was descended into
    by_sha: dict[str, list[str]] = defaultdict(list)
    for s in range_steps:
        if s.id in verdict_of and s.state in ("done", "lost"):
            by_sha[s.sha].append(verdict_of[s.id])
    masses = _sampled(order, range_steps, verdict_of, settings) or posterior(order, by_sha, settings, flake_rate)
    return Explanation(verdict_of, order, bool(recorded), masses)


def _sampled(order: list[str], steps: Sequence[Step], verdict_of: dict[int, str], settings: Settings) -> Masses | None:
    """A sampled metric's posterior, from the readings themselves as the engine has it (bot.domain.bisect.readings),
    not from the good/bad words the boundary gives each run; None when the metric is not sampled."""
    finished = [s for s in steps if s.state in ("done", "lost") and verdict_of.get(s.id) in ("good", "bad")]
    runs = [Run(s.sha, Kind(s.kind), RawResult(s.exit_code, s.metric, s.infra_reason), s.round) for s in finished]
    rule = settings.metric
    if rule is None or not sampled(rule, runs) or len(order) < 2:
        return None
    position = {sha: i for i, sha in enumerate(order)}
    points = [
        Reading(position[s.sha], s.metric, float(s.round))
        for s in finished
        if s.sha in position and s.metric is not None
    ]
    if not points:
        return Masses(note="no readings yet")
    readings = Readings(tuple(points), rule.higher_is_worse)
    post = readings.posterior(len(order) - 1)
    return Masses({i: post.mass(i) for i in range(1, len(order))}, post.no_culprit)


def verdicts(good: str, bad: str, settings: Settings, steps: Iterable[Step]) -> dict[int, str]:
    """Each finished step's verdict as report.py/--json give it: metric runs re-classified against the
    boundary calibrated on the endpoints (stored verdicts used the boundary known at the time)."""
    steps = list(steps)
    out = {s.id: s.verdict for s in steps if s.verdict}
    finished = [s for s in steps if s.state in ("done", "lost")]
    try:
        runs = [Run(s.sha, Kind(s.kind), RawResult(s.exit_code, s.metric, s.infra_reason), s.round) for s in finished]
        evidence = Evidence.of(Problem({}, good, bad, settings), runs)
    except (ValueError, TypeError):  # a kind this version does not know: keep the stored verdicts
        return out
    for step, (_, verdict) in zip(finished, evidence.verdicts):
        out[step.id] = verdict.value
    return out


def _known(verdict_list: Iterable[str]) -> str | None:
    """What the search knew of a commit: a pass makes it good (a bad commit never passes), else a fail bad."""
    vs = set(verdict_list)
    if Verdict.GOOD.value in vs:
        return "good"
    if Verdict.BAD.value in vs:
        return "bad"
    return None


def order_commits(good: str, bad: str, steps: Sequence, verdict_of: dict[int, str]) -> list[str]:
    """The range's tested commits, oldest first, reconstructed by replaying the search round by round: exact when the
    search takes a pass as proof (--flake-rate 0); under auto a commit below a pass may be probed (a culprit may fail
    only some of the time, bot.domain.bisect.intermittent), and its place is then a guess."""
    order = [good, bad]
    by_round: dict[int, list] = defaultdict(list)
    for s in steps:
        if s.kind not in AB_KIND_VALUES:
            by_round[s.round].append(s)
    known: dict[str, list[str]] = defaultdict(list)
    for rnd in sorted(by_round):
        batch = sorted(by_round[rnd], key=lambda s: s.id)
        new = list(dict.fromkeys(s.sha for s in batch if s.sha not in order))
        if new:
            lo = max((i for i, sha in enumerate(order) if i == 0 or _known(known[sha]) == "good"), default=0)
            lo = min(lo, len(order) - 2)
            hi = next((i for i in range(lo + 1, len(order)) if _known(known[order[i]]) == "bad"), len(order) - 1)
            order[hi:hi] = new
        for s in batch:
            if s.id in verdict_of:
                known[s.sha].append(verdict_of[s.id])
    return order


def posterior(order: list[str], by_sha: dict[str, list[str]], settings: Settings, flake_rate: float | None) -> Masses:
    """The engine's posterior over `order` (position 0 is GOOD) from the good/bad verdicts of each commit."""
    tallies: dict[int, Tally] = {}
    for position, sha in enumerate(order):
        for v in by_sha.get(sha, []):
            if v in (Verdict.GOOD.value, Verdict.BAD.value):
                tallies[position] = tallies.get(position, Tally()).add(v == Verdict.GOOD.value)
    if not tallies:
        return Masses(note="no results yet")
    flake = flake_rate if flake_rate is not None else effective_flake(settings, tallies)
    if flake is None:
        return Masses(note="results contradict a flake rate of 0: no posterior")
    try:
        post = search_posterior(len(order) - 1, tallies, settings, flake)
    except (Contradiction, ValueError) as exc:
        return Masses(note=f"no hypothesis explains the results ({exc})")
    return Masses({i: post.mass(i) for i in range(1, len(order))}, post.no_culprit)
