"""Which commits to test next: asynchronous k-section of the posterior mass."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

from bot.domain.bisect.posterior import Posterior, Tally

USEFUL = 1e-9


def _allocate(intervals: list[tuple[float, float]], k: int) -> list[int]:
    """Give k new dividers to the intervals so the largest resulting piece is as small as possible."""
    counts = [0] * len(intervals)
    for _ in range(k):
        j = max(range(len(intervals)), key=lambda i: (intervals[i][1] - intervals[i][0]) / (counts[i] + 1))
        counts[j] += 1
    return counts


def _nearest_testable(post: Posterior, p: int, target: float, untestable: Collection[int]) -> int | None:
    if p not in untestable:
        return p
    below, above = p - 1, p + 1
    while below >= 1 and below in untestable:
        below -= 1
    while above <= post.n and above in untestable:
        above += 1
    options = [q for q in (below, above) if 1 <= q <= post.n]
    if not options:
        return None
    return min(options, key=lambda q: abs(post.cdf(q) - target))


def choose_probes(
    post: Posterior,
    free: int,
    in_flight: Iterable[int] = (),
    untestable: Collection[int] = frozenset(),
) -> list[int]:
    """Up to `free` positions that, with the runs in flight as fixed dividers, split the mass evenly.

    A position is worth testing only while its outcome is uncertain (0 < cdf < 1); positions
    in flight or untestable are never chosen. With nothing in flight and a deterministic test
    this is exact (k+1)-ary search: every piece holds at most ceil(m/(k+1)) hypotheses.
    """
    if free <= 0:
        return []
    busy = set(in_flight)
    edges = sorted({0.0, 1.0} | {post.cdf(q) for q in busy})
    intervals = list(zip(edges, edges[1:]))
    chosen: list[int] = []
    for (lo, hi), count in zip(intervals, _allocate(intervals, free)):
        for step in range(1, count + 1):
            target = lo + (hi - lo) * step / (count + 1)
            q = min(post.quantile(target), post.n)
            # the quantile's commit, or its parent when the quantile's own result is settled (a commit that
            # failed, with every hypothesis above it ruled out, while its parent's pass is not yet proof)
            for p in (
                _nearest_testable(post, q, target, untestable),
                _nearest_testable(post, q - 1, target, untestable),
            ):
                if p is not None and p >= 1 and USEFUL < post.cdf(p) < 1 - USEFUL:
                    if p not in busy and p not in chosen:
                        chosen.append(p)
                    break
    return sorted(chosen)


def rounds_to_resolve(hypotheses: int, per_round: int) -> int:
    """Rounds of `per_round` runs a deterministic search needs to single out one of `hypotheses`."""
    rounds, reach = 0, 1
    while reach < hypotheses:
        reach *= per_round + 1
        rounds += 1
    return rounds


def runs_worth_starting(post: Posterior, runners: int, searching: int) -> int:
    """How many new search runs a deterministic test's round should start, `searching` being under way already.

    Every run of a round splits the hypotheses left one way more, so k runners need R = ceil(log_(k+1) m) rounds for
    m hypotheses, and so does any j < k with (j+1)^R >= m: the fewest such j, spread evenly over the rounds, spend
    fewer runs in as many rounds (240 hypotheses with one of 3 runners calibrating BAD: 5 rounds of 2 runs each,
    10 runs, where 2 + 3 + 3 + 3 + 1 spend 12 in the same 5 rounds). A run not started is never cancelled either."""
    m = post.support()
    if runners <= 1 or m <= 1:
        return max(0, runners - searching)
    rounds = rounds_to_resolve(m, runners)
    return max(0, next(j for j in range(1, runners + 1) if (j + 1) ** rounds >= m) - searching)


@dataclass(frozen=True)
class Block:
    """The top hypothesis, widened over untestable commits it cannot be told apart from."""

    first: int  # first hypothesis position of the block
    last: int  # its one testable commit (n+1: "no culprit")
    parent: int  # the testable position just below the block
    mass: float


def top_block(post: Posterior, untestable_pos: set[int]) -> Block:
    i = post.median()
    if i > post.n:
        return Block(i, i, post.n, post.no_culprit)
    last = i
    while last in untestable_pos and last < post.n:
        last += 1
    parent = i - 1
    while parent in untestable_pos and parent > 0:
        parent -= 1
    return Block(parent + 1, last, parent, post.cdf(last) - post.cdf(parent))


def sampled_probes(
    post: Posterior, free: int, in_flight: Iterable[int] = (), untestable: Collection[int] = frozenset()
) -> list[int]:
    """Up to `free` positions for a noisy metric: the (k+1)-quantiles of the mass, counting the runs in flight.

    Unlike `choose_probes`, a position may be sampled again, and by several runners at once: a noisy reading
    settles nothing alone, and once the mass gathers on two neighbours every runner is best spent on them. Each
    quantile goes to whichever side of it splits the mass nearest that quantile (the culprit or its parent)."""
    busy = list(in_flight)
    want = free + len(busy)
    picks: list[int] = []
    for i in range(1, want + 1):
        target = i / (want + 1)
        q = min(post.quantile(target), post.n)
        options = [p for p in (q - 1, q) if p >= 1]
        best = min(options, key=lambda p: abs(post.cdf(p) - target))
        p = _nearest_testable(post, best, target, untestable)
        if p is not None and USEFUL < post.cdf(p) < 1 - USEFUL:
            picks.append(p)
    for p in busy:
        if p in picks:
            picks.remove(p)
    return sorted(picks[:free])


def settle_probes(
    block: Block,
    mass_if: Callable[[Mapping[int, Tally]], float],
    free: int,
    enough: float,
    in_flight: Iterable[int] = (),
) -> list[int]:
    """Once one commit holds most of the mass, what is left to tell is whether it or its parent is the first bad
    one. A culprit need not fail every time (bot.domain.bisect.intermittent), so the parent's passes weigh only as
    much as the culprit's failures say its failure rate is high: each runner goes to whichever of the two would
    raise the block's mass more with its likelier result (the parent passing, the culprit failing), given the
    runs already placed this round (`mass_if`: the block's mass with those results added). No more runs than bring
    the mass to `enough` (the confidence) if they read as expected, counting those `in_flight` there as already read
    so: a round of many runners starts only those, and a runner freed early adds none while enough are under way."""
    expected = {block.parent: True, block.last: False}
    extra: dict[int, Tally] = {}
    for pos in in_flight:
        if pos in expected:
            extra[pos] = extra.get(pos, Tally()).add(expected[pos])
    picks: list[int] = []
    while len(picks) < free and mass_if(extra) < enough:
        pos, passed = max(expected.items(), key=lambda o: mass_if({**extra, o[0]: extra.get(o[0], Tally()).add(o[1])}))
        extra[pos] = extra.get(pos, Tally()).add(passed)
        picks.append(pos)
    return sorted(picks)
