"""The endpoints of a sampled bisection (bot.domain.bisect.sampled `_endpoints`, issue 33 item 1): a benchmark whose
BAD reads like GOOD ends "not reproducible", no culprit, within Pinpoint's 20 runs for both endpoints; a real
regression still starts the search and is found. Measured on the engine's simulator; the gate's likelihood ratio
against scipy's noncentral t."""

import math
import random
import statistics

from scipy.stats import nct
from scipy.stats import t as student

from bot.domain.bisect.model import Kind, Settings, Status
from bot.domain.bisect.sampled import ENDPOINT_MOST
from bot.domain.bisect.simulate import NoisyMetric, simulate
from bot.domain.bisect.stats import Contrast
from bot.domain.bisect.verdict import MetricRule

BENCHMARK = Settings(metric=MetricRule(None, higher_is_worse=False))  # a throughput: lower is worse, no threshold


def test_the_likelihood_ratio_is_the_noncentral_t_density_over_the_central():
    rng = random.Random(1)
    for _ in range(300):
        df, n_eff = rng.randint(1, 80), rng.uniform(0.5, 30.0)
        effect = rng.choice([1.5, 2.0, 4.0, rng.uniform(0.05, 6.0)])
        t = rng.choice([rng.gauss(0, 2), rng.uniform(-15, 15), rng.gauss(effect * math.sqrt(n_eff), 1)])
        contrast = Contrast(t / math.sqrt(n_eff), n_eff, float(df), df)  # spread 1: the shift's t is t
        expected = nct.logpdf(t, df, effect * math.sqrt(n_eff)) - student.logpdf(t, df)
        assert math.isclose(contrast.log_likelihood_ratio(effect), expected, abs_tol=1e-6), (df, n_eff, effect, t)
    assert Contrast(0.0, 0.0, 0.0, 0).log_likelihood_ratio(2.0) == 0.0  # nothing read: no evidence either way


def _bisect(seed: int, regression: float, n: int = 64, k: int = 2) -> tuple[int | None, object]:
    """One history of the issue's benchmark in spreads of its noise (2% noise: a 4% drop is 2 spreads)."""
    culprit = random.Random(seed).randint(1, n) if regression else None
    metric = NoisyMetric(culprit, -regression, 1.0, 100.0, random.Random(50_000 + seed))
    return culprit, simulate(n, metric, k, BENCHMARK)


def test_endpoints_that_do_not_differ_end_not_reproducible_within_pinpoints_20_runs():
    # 1,000 seeds (a few seconds: each ends at the endpoints). Before this gate, 2.6% ended inconclusive after the
    # run budget's 120 runs (bench/endpoint_gate_bench.py)
    results = [_bisect(seed, 0.0)[1] for seed in range(1000)]
    endings = [r.outcome.status for r in results]
    named = sum(r.outcome.culprit is not None for r in results)
    inconclusive = endings.count(Status.INCONCLUSIVE)
    assert named <= 10 and inconclusive <= 10, (named, inconclusive)  # <= 1% each
    assert endings.count(Status.NOT_REPRODUCIBLE) >= 990, endings
    endpoint_runs = [r.runs_by_kind.get(Kind.CALIBRATE, 0) for r in results]
    assert statistics.fmean(endpoint_runs) <= 20, statistics.fmean(endpoint_runs)
    assert max(endpoint_runs) <= 2 * ENDPOINT_MOST  # the cap holds on every history


def test_a_two_spread_drop_passes_the_gate_and_is_found():
    """The issue's positive case (a 4% drop at 2% noise, 64 commits, 2 workers): right on 199 of 200 seeds, the other
    (seed 83: the culprit is BAD itself, GOOD read high by chance in its 4 readings) inconclusive at the run budget.
    The search starts on trial at odds 10, one runner reading the endpoints on beside it until the gate's 100, and
    the endgame reads the favourite and its parent in pairs: 41.9 runs on average, 14.8 of them at the endpoints
    (42.6 with the endgame's runners by the readings' counts; 45.5 and 15.6 when the search waited for the gate;
    43.4 and 12.7 before the gate, on 400 seeds). The issue's 40 runs is not met (bench/endpoint_gate_bench.py,
    docs/benchmarks.md)."""
    endings, runs, endpoint_runs = [], [], []
    for seed in range(200):
        culprit, result = _bisect(seed, 2.0)
        right = result.outcome.status is Status.FOUND and result.culprit_index() == culprit
        endings.append("right" if right else result.outcome.status.value)
        runs.append(result.runs)
        endpoint_runs.append(result.runs_by_kind.get(Kind.CALIBRATE, 0))
    assert endings.count("right") >= 199 and "not_reproducible" not in endings, endings
    assert statistics.fmean(endpoint_runs) <= 15, statistics.fmean(endpoint_runs)
    assert statistics.fmean(runs) <= 42, statistics.fmean(runs)
