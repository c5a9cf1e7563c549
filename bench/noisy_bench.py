"""Benchmark: a noisy benchmark metric bisected by revert-bisect against Pinpoint's design, on the same noise.

    python bench/noisy_bench.py              # 200 histories per cell (~10 minutes on 2 cores)
    python bench/noisy_bench.py --quick      # 40 histories per cell

Every run of a commit reads 100 plus Gaussian noise of sd 1; commits from the culprit on (drawn uniformly in
1..n) read `effect` standard deviations worse (lower: a throughput). With effect 0 there is no regression and
any culprit named is a false one. Both tools see the same kind of history (not the same draws: each samples
as it decides).

Pinpoint, as Chromium describes it (docs/benchmarks.md cites the sources): 10 attempts per change, 10 more
when a comparison is undecided (at most 20), two changes "different" when min(Kolmogorov-Smirnov,
Mann-Whitney U) p <= 0.01, "same" when p > 0.1, undecided between, binary search between GOOD and BAD
(each midpoint compared with the changes on both sides), the endpoints compared first. Its runs do not depend
on k (attempts run in parallel); revert-bisect's do, and are counted at k = 1 and 4.

Prints markdown tables (progress on stderr).
"""

from __future__ import annotations

import argparse
import math
import random
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.bisect.model import Settings, Status  # noqa: E402
from bot.domain.bisect.simulate import NoisyMetric, simulate  # noqa: E402
from bot.domain.bisect.verdict import MetricRule  # noqa: E402

COMMAND = "python " + shlex.join(["bench/noisy_bench.py", *sys.argv[1:]])
ATTEMPTS, MORE, MAX_ATTEMPTS = 10, 10, 20
DIFFERENT, SAME = 0.01, 0.1


def _ks_p(a: list[float], b: list[float]) -> float:
    """Two-sided two-sample Kolmogorov-Smirnov p-value (asymptotic, with Stephens' small-sample correction)."""
    xs = sorted(set(a) | set(b))
    sa, sb = sorted(a), sorted(b)
    d, ia, ib = 0.0, 0, 0
    for x in xs:
        while ia < len(sa) and sa[ia] <= x:
            ia += 1
        while ib < len(sb) and sb[ib] <= x:
            ib += 1
        d = max(d, abs(ia / len(sa) - ib / len(sb)))
    ne = len(a) * len(b) / (len(a) + len(b))
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    if lam < 0.2:
        return 1.0
    p = 2 * sum((-1) ** (j - 1) * math.exp(-2 * j * j * lam * lam) for j in range(1, 101))
    return max(0.0, min(1.0, p))


def _mwu_p(a: list[float], b: list[float]) -> float:
    """Two-sided Mann-Whitney U p-value (normal approximation with continuity correction; readings are continuous)."""
    ranked = sorted((v, i < len(a)) for i, v in enumerate(a + b))
    rank_a = sum(r + 1 for r, (_, in_a) in enumerate(ranked) if in_a)
    u = rank_a - len(a) * (len(a) + 1) / 2
    mean = len(a) * len(b) / 2
    sd = math.sqrt(len(a) * len(b) * (len(a) + len(b) + 1) / 12)
    z = (abs(u - mean) - 0.5) / sd
    return max(0.0, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))))


def _p(a: list[float], b: list[float]) -> float:
    return min(_ks_p(a, b), _mwu_p(a, b))


class Pinpoint:
    """Pinpoint's bisection over positions 0 (GOOD) .. n (BAD), counting attempts."""

    def __init__(self, test: NoisyMetric, n: int) -> None:
        self.test, self.n = test, n
        self.samples: dict[int, list[float]] = {}

    @property
    def runs(self) -> int:
        return sum(len(v) for v in self.samples.values())

    def _sample(self, pos: int, count: int) -> None:
        have = self.samples.setdefault(pos, [])
        have += [self.test.run(f"c{pos}").metric or 0.0 for _ in range(count)]

    def compare(self, x: int, y: int) -> bool | None:
        """True: different; False: same; None: still undecided with every attempt spent."""
        for pos in (x, y):
            if pos not in self.samples:
                self._sample(pos, ATTEMPTS)
        while True:
            p = _p(self.samples[x], self.samples[y])
            if p <= DIFFERENT:
                return True
            if p > SAME:
                return False
            short = [pos for pos in (x, y) if len(self.samples[pos]) < MAX_ATTEMPTS]
            if not short:
                return None
            for pos in short:
                self._sample(pos, MORE)

    def bisect(self) -> int | None:
        if not self.compare(0, self.n):
            return None
        lo, hi = 0, self.n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            left, right = self.compare(lo, mid), self.compare(mid, hi)
            if left and not right:
                hi = mid
            elif right and not left:
                lo = mid
            else:  # both or neither differ: follow the stronger difference, as its p-values say
                hi, lo = (
                    (mid, lo)
                    if _p(self.samples[lo], self.samples[mid]) <= _p(self.samples[mid], self.samples[hi])
                    else (hi, mid)
                )
        return hi


def cell(n: int, effect: float, k: int, seeds: int) -> tuple[dict[str, float], dict[str, float]]:
    settings = Settings(metric=MetricRule(None, higher_is_worse=False))
    ours_right = pin_right = 0
    ours_runs: list[int] = []
    pin_runs: list[int] = []
    for seed in range(seeds):
        rng = random.Random(seed)
        culprit = rng.randint(1, n) if effect else None
        result = simulate(n, NoisyMetric(culprit, -effect, 1.0, 100.0, random.Random(seed * 7 + 1)), k, settings)
        named = result.culprit_index() if result.outcome.status is Status.FOUND else None
        ours_right += named == culprit
        ours_runs.append(result.runs)
        if k == 1:
            pin = Pinpoint(NoisyMetric(culprit, -effect, 1.0, 100.0, random.Random(seed * 7 + 2)), n)
            pin_right += pin.bisect() == culprit
            pin_runs.append(pin.runs)
    ours = dict(right=ours_right / seeds, mean=statistics.fmean(ours_runs), median=statistics.median(ours_runs))
    pin = (
        dict(right=pin_right / seeds, mean=statistics.fmean(pin_runs), median=statistics.median(pin_runs))
        if pin_runs
        else {}
    )
    return ours, pin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="40 histories per cell")
    parser.add_argument("--sizes", default="64,512")
    parser.add_argument("--effects", default="1,2,3,0")
    args = parser.parse_args()
    seeds = 40 if args.quick else args.seeds
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        for effect in (float(x) for x in args.effects.split(",")):
            pin: dict[str, float] = {}
            for k in (1, 4):
                print(f"n={n} effect={effect:g} k={k} ...", file=sys.stderr, flush=True)
                ours, pin_k = cell(n, effect, k, seeds)
                pin = pin_k or pin
                what = "right" if effect else "no culprit named"
                rows.append(
                    [
                        str(n),
                        f"{effect:g} sd" if effect else "none",
                        str(k),
                        f"{100 * ours['right']:.1f}% {what}",
                        f"{ours['mean']:.1f} ({ours['median']:g})",
                        f"{100 * pin['right']:.1f}% {what}",
                        f"{pin['mean']:.1f} ({pin['median']:g})",
                        f"{ours['mean'] / pin['mean']:.2f}x",
                    ]
                )
    tables.table(
        f"A noisy benchmark: revert-bisect against Pinpoint's design ({seeds} histories per cell)",
        COMMAND,
        [
            "n",
            "regression",
            "k",
            "revert-bisect",
            "its runs, mean (median)",
            "Pinpoint",
            "Pinpoint's runs",
            "runs vs Pinpoint",
        ],
        rows,
        [
            "Noise: Gaussian, sd 1; the regression shifts every commit from the culprit on. Pinpoint's runs do not "
            "depend on k. `right`: the culprit named (found); with no regression, the share of histories where "
            "no culprit "
            "was named. revert-bisect runs at --confidence 0.99."
        ],
    )


if __name__ == "__main__":
    main()
