"""Benchmark: change points in simulated nightly series -- the wrapper (bot/domain/perf/changes.py) against the
libraries used bare: Apache Otava's `compute_change_points` with its defaults ("otava bare", max_pvalue 0.001) and
at the wrapper's false alarms ("otava matched": the max_pvalue whose false alarms on flat series match the
wrapper's, `--only calibrate`), and MongoDB's signal-processing-algorithms' `e_divisive` with its defaults when
`--spa-path` points at it.

    python bench/changepoint_bench.py                                   # full (~55 minutes on a busy 2-core machine)
    python bench/changepoint_bench.py --series 20 --series-30 10 --flat-series 30 --flat-nights-30 4   # quick
    python bench/changepoint_bench.py --spa-path DIR    # also signal-processing-algorithms, from DIR
    python bench/changepoint_bench.py --rate 0.05 --only nightly    # the wrapper at another rate, one table
    python bench/changepoint_bench.py --min-effect 0 --only shifted    # the wrapper with no smallest effect
    python bench/changepoint_bench.py --only calibrate    # Otava's max_pvalue at the wrapper's false alarms
    python bench/changepoint_bench.py --otava-pvalue 1e-4 --only shifted    # the matched Otava at another one

signal-processing-algorithms cannot be installed beside this project (it pins setuptools<71, torch 2.13 needs
>=77.0.3); `pip install --no-deps --target DIR signal-processing-algorithms==2.1.6 'more-itertools<9'
'structlog<25'` puts it where --spa-path finds it.

A series is 60 nightly runs of a throughput (lower is worse) around 1000 with Gaussian noise of sd `noise` x level;
from run `at` on (uniform in 10..50) the level is `shift` lower. Variants: clean; outliers (3 runs read 5 sd off,
either way); missing (6 of the 60 nights have no reading: None). "Found" means a change point within 2 runs of `at`
(the wrapper's must also be marked a regression; the bare libraries' may be any). The wrapper runs at its defaults:
false-alarm rate 0.01 per night (`--rate`), min effect 2% (`--min-effect`: a change is kept when its interval
reaches it). With 30 metrics per night it tests each metric at rate/30: the shifted metric is analysed alone at
that level (the same computation as within the 30-metric call, each metric being analysed on its own), while the
flat nights run the real 30-metric call. The bare libraries have no notion of a night's metrics: each metric is
analysed as if alone, so 30 metrics change nothing for them per metric, and a night's false alarms are those of 30
independent flat series (grouped from the 1-metric runs).

Nightly: the detector runs every night on the history so far (from 10 runs on); a change point is a new alarm when
no change point of that metric within 2 runs of it was reported on an earlier night. False alarms per 100 runs
per metric = 100 x new alarms on flat series / (nights x metrics).

Calibration: Otava's `compute_change_points` at each max_pvalue of a grid, nightly on flat series (the flat
table's five rows, other seeds than its), beside the wrapper on the same series; the matched Otava runs at the
max_pvalue whose false alarms per 100 runs per metric, pooled over the five rows, come closest to the wrapper's.
The flat table then shows both on its own series: the match checked out of sample.

Prints markdown tables (progress on stderr).
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.perf.changes import ChangeSettings, find_changes  # noqa: E402

COMMAND = "python " + shlex.join(["bench/changepoint_bench.py", *sys.argv[1:]])
RUNS, LEVEL, FIRST_NIGHT, NEAR = 60, 1000.0, 10, 2
RATE, MIN_EFFECT = 0.01, 0.02  # the wrapper's defaults (ChangeSettings), --rate and --min-effect
NOISES, SHIFTS = (0.01, 0.02, 0.04), (0.02, 0.03, 0.05, 0.10)
VARIANTS = ("clean", "outliers", "missing")
SHAS = [f"r{i}" for i in range(RUNS)]
TABLES = ("calibrate", "shifted", "flat", "nightly")
# Otava bare at the wrapper's false alarms: the max_pvalue (its default 0.001) whose false alarms on flat series,
# nightly, per 100 runs per metric and pooled over the flat table's five rows, come closest to the wrapper's, on
# series other than the flat table's (`--only calibrate` measures the grid; `--otava-pvalue` sets another).
OTAVA_MATCHED = 1e-4
MATCHED = "otava matched"
OTAVA_GRID = (1e-3, 3e-4, 2e-4, 1e-4, 5e-5, 3e-5, 1e-5, 3e-6)
CALIBRATION_SEEDS = 100_000  # the calibration's flat series: seeds from here, none shared with the flat table's
FLAT_ROWS = [(n, "clean") for n in NOISES] + [(0.02, v) for v in VARIANTS[1:]]

Detect = Callable[[list, int], list[tuple[int, bool]]]  # values, seed -> [(index, is a regression)]


def simulate(rng: np.random.Generator, noise: float, shift: float, at: int, variant: str) -> list[float | None]:
    step = np.where(np.arange(RUNS) >= at, 1 - shift, 1.0)
    values: list[float | None] = list(LEVEL * step * (1 + rng.normal(0, noise, RUNS)))
    if variant == "outliers":
        for i in rng.choice(RUNS, 3, replace=False):
            values[i] = LEVEL * step[i] * (1 + rng.choice([-1, 1]) * 5 * noise)
    if variant == "missing":
        for i in rng.choice(RUNS, 6, replace=False):
            values[i] = None
    return values


def wrapper(rate: float | None = None) -> Detect:
    def detect(values: list, seed: int) -> list[tuple[int, bool]]:
        settings = ChangeSettings(false_alarm_rate=RATE if rate is None else rate, min_effect=MIN_EFFECT, seed=seed)
        return [(c.index, c.regression) for c in find_changes(SHAS, {"m": values}, {"m": "lower"}, settings)]

    return detect


def otava(max_pvalue: float | None = None) -> Detect:
    """Otava's `compute_change_points` used bare: at its defaults (None), or at another `max_pvalue`."""

    def detect(values: list, seed: int) -> list[tuple[int, bool]]:
        from otava.analysis import compute_change_points, fill_missing

        filled = list(values)
        fill_missing(filled)  # Otava's own handling of a missing reading
        given = {} if max_pvalue is None else {"max_pvalue": max_pvalue}
        points, _ = compute_change_points(filled, **given)
        return [(int(p.index), True) for p in points]

    return detect


otava_bare = otava()


def spa_bare(values: list, seed: int) -> list[tuple[int, bool]]:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    runs = [i for i, v in enumerate(values) if v is not None]
    np.random.seed(seed % 2**32)  # e_divisive shuffles with numpy's global generator
    return [(runs[int(i)], True) for i in e_divisive(np.array([values[i] for i in runs]))]


def detectors(spa: bool) -> dict[str, Detect]:
    found: dict[str, Detect] = {"wrapper": wrapper(), "otava bare": otava_bare, MATCHED: otava(OTAVA_MATCHED)}
    if spa:
        found["spa bare"] = spa_bare
    return found


def _found(points: list[tuple[int, bool]], at: int) -> bool:
    return any(abs(i - at) <= NEAR and regression for i, regression in points)


def retro_task(args: tuple) -> dict:
    """One shifted series, analysed once whole by each detector: found within 2 runs, and the other change points."""
    noise, shift, variant, metrics, seed, spa = args
    rng = np.random.default_rng([seed, int(noise * 1000), int(shift * 1000), VARIANTS.index(variant)])
    at = int(rng.integers(10, 51))
    values = simulate(rng, noise, shift, at, variant)
    result = {}
    chosen = detectors(spa)
    if metrics == 30:
        chosen = {"wrapper": wrapper(RATE / 30)} | {k: v for k, v in chosen.items() if k != "wrapper"}
    for name, detect in chosen.items():
        points = detect(values, seed)
        result[name] = (_found(points, at), sum(abs(i - at) > NEAR for i, _ in points))
    return result


def _nightly(values: list, detect: Detect, seed: int) -> list[int]:
    """The nights (as runs analysed) on which the detector raised a new alarm, counted once each."""
    seen: list[int] = []
    alarms = []
    for night in range(FIRST_NIGHT, RUNS + 1):
        for index, _ in detect(values[:night], seed):
            if all(abs(index - s) > NEAR for s in seen):
                seen.append(index)
                alarms.append(night)
    return alarms


def flat_task(args: tuple) -> dict:
    """One flat series: any change point in one whole-series analysis, and the alarms of a nightly analysis."""
    noise, variant, seed, spa = args
    rng = np.random.default_rng([seed, int(noise * 1000), VARIANTS.index(variant), 7])
    values = simulate(rng, noise, 0.0, RUNS, variant)
    return {
        name: (bool(detect(values, seed)), _nightly(values, detect, seed)) for name, detect in detectors(spa).items()
    }


def calibration_task(args: tuple) -> dict:
    """One flat series, not one of the flat table's: the nightly alarms of the wrapper and of Otava at each
    max_pvalue of the grid."""
    noise, variant, seed = args
    rng = np.random.default_rng([CALIBRATION_SEEDS + seed, int(noise * 1000), VARIANTS.index(variant), 7])
    values = simulate(rng, noise, 0.0, RUNS, variant)
    found: dict = {"wrapper": len(_nightly(values, wrapper(), seed))}
    for p in OTAVA_GRID:
        found[p] = len(_nightly(values, otava(p), seed))
    return found


def flat30_task(args: tuple) -> tuple[int, int]:
    """One 30-metric history, flat: the wrapper's real 30-metric call every night. (new alarms, nights with any)"""
    noise, variant, seed = args
    rng = np.random.default_rng([seed, int(noise * 1000), VARIANTS.index(variant), 30])
    metrics = {f"m{k}": simulate(rng, noise, 0.0, RUNS, variant) for k in range(30)}
    seen: dict[str, list[int]] = {name: [] for name in metrics}
    alarms = alarm_nights = 0
    settings = ChangeSettings(false_alarm_rate=RATE, min_effect=MIN_EFFECT, seed=seed)
    for night in range(FIRST_NIGHT, RUNS + 1):
        new = 0
        for c in find_changes(SHAS[:night], {k: v[:night] for k, v in metrics.items()}, settings=settings):
            if all(abs(c.index - s) > NEAR for s in seen[c.metric]):
                seen[c.metric].append(c.index)
                new += 1
        alarms += new
        alarm_nights += new > 0
    return alarms, alarm_nights


def latency_task(args: tuple) -> dict:
    """One shifted series at 2% noise, analysed night after night from 2 runs after the shift: runs until found."""
    shift, rate, seed, spa = args
    rng = np.random.default_rng([seed, int(shift * 1000), 99])
    at = int(rng.integers(20, 41))
    values = simulate(rng, 0.02, shift, at, "clean")
    chosen = {"wrapper": wrapper(rate)} | {k: v for k, v in detectors(spa).items() if k != "wrapper"}
    result = {}
    for name, detect in chosen.items():
        result[name] = next(
            (night - at for night in range(at + 2, RUNS + 1) if _found(detect(values[:night], seed), at)), None
        )
    return result


def _pct(xs: list[bool]) -> str:
    return f"{100 * sum(xs) / len(xs):.1f}%" if xs else "-"


def _per100(events: float, units: float) -> float:
    """Events per 100 units; nan (printed "nan") when nothing was measured, e.g. `--flat-nights-30 0`."""
    return 100 * events / units if units else float("nan")


def _run(pool, task, jobs: list, label: str) -> list:
    start = time.perf_counter()
    done = pool.map(task, jobs, chunksize=max(1, len(jobs) // 64))
    print(f"{label}: {len(jobs)} series in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    return done


def _shifted(pool, args: argparse.Namespace, spa: bool, names: list[str]) -> None:
    """Found within 2 runs of a shift, one analysis of each shifted series."""
    cells = [(n, s, "clean") for n in NOISES for s in SHIFTS] + [(0.02, s, v) for v in VARIANTS[1:] for s in SHIFTS]
    rows = []
    for metrics, count in ((1, args.series), (30, args.series_30)):
        if count == 0:  # --series 0 or --series-30 0: that half of the table left out
            continue
        for noise, shift, variant in cells:
            done = _run(
                pool,
                retro_task,
                [(noise, shift, variant, metrics, seed, spa) for seed in range(count)],
                f"shift {shift:.0%} noise {noise:.0%} {variant} x{metrics}",
            )
            row = [f"{noise:.0%}", f"{shift:.0%}", variant, str(metrics)]
            for name in names:
                row.append(_pct([d[name][0] for d in done]))
                row.append(f"{100 * sum(d[name][1] for d in done) / (count * RUNS):.2f}")
            rows.append(row)
    header = ["noise", "shift", "series", "metrics/night"]
    for name in names:
        header += [f"{name}: found within 2 runs", f"{name}: other change points /100 runs"]
    tables.table(
        "Shifted series: found within 2 runs of the shift (one analysis of the 60 runs)",
        COMMAND,
        header,
        rows,
        [f"{args.series} series per row with 1 metric per night, {args.series_30} with 30."],
    )


def _calibrate(pool, args: argparse.Namespace, spa: bool, names: list[str]) -> None:
    """Otava's max_pvalue at the wrapper's false alarms: each of the grid's on the same flat series as the wrapper."""
    nights = RUNS - FIRST_NIGHT + 1
    rates: dict = {}  # detector -> [per 100 runs per metric, one per flat row]
    for noise, variant in FLAT_ROWS:
        done = _run(
            pool,
            calibration_task,
            [(noise, variant, seed) for seed in range(args.calibration_series)],
            f"calibration noise {noise:.0%} {variant}",
        )
        for key in ["wrapper", *OTAVA_GRID]:
            rates.setdefault(key, []).append(_per100(sum(d[key] for d in done), len(done) * nights))
    pooled = {key: statistics.mean(r) for key, r in rates.items()}
    closest = min(OTAVA_GRID, key=lambda p: abs(np.log((pooled[p] + 1e-3) / (pooled["wrapper"] + 1e-3))))
    rows = []
    for key in ["wrapper", *OTAVA_GRID]:
        label = f"wrapper (false-alarm rate {RATE:g} a night)" if key == "wrapper" else f"otava, max_pvalue {key:g}"
        if key == OTAVA_MATCHED:
            label += " (the matched Otava)"
        rows.append([label, *(f"{r:.3f}" for r in rates[key]), f"{pooled[key]:.3f}"])
    header = ["detector", *(f"{n:.0%} {v}" for n, v in FLAT_ROWS), "pooled (mean of the rows)"]
    tables.table(
        "Calibration: Otava's max_pvalue at the wrapper's false alarms (flat series, nightly, /100 runs /metric)",
        COMMAND,
        header,
        rows,
        [
            f"{args.calibration_series} flat series of 60 runs per row, analysed nightly from run {FIRST_NIGHT} on, "
            "other series than the flat table's (seeds from "
            f"{CALIBRATION_SEEDS}). Closest to the wrapper's pooled rate: max_pvalue {closest:g}; the matched Otava "
            f"of the other tables runs at {OTAVA_MATCHED:g} (`--otava-pvalue`)."
        ],
    )


def _flat(pool, args: argparse.Namespace, spa: bool, names: list[str]) -> None:
    """False alarms on flat series: one analysis whole, nightly, and 30 metrics a night."""
    rows = []
    for noise, variant in FLAT_ROWS:
        done = _run(
            pool,
            flat_task,
            [(noise, variant, seed, spa) for seed in range(args.flat_series)],
            f"flat noise {noise:.0%} {variant}",
        )
        nights = RUNS - FIRST_NIGHT + 1
        row = [f"{noise:.0%}", variant, "1"]
        for name in names:
            row.append(_pct([d[name][0] for d in done]))
            row.append(f"{_per100(sum(len(d[name][1]) for d in done), len(done) * nights):.2f}")
            row.append(f"{_per100(sum(len(set(d[name][1])) for d in done), len(done) * nights):.2f}")
        rows.append(row)
        groups = [done[k : k + 30] for k in range(0, len(done) - 29, 30)]
        row30 = [f"{noise:.0%}", variant, "30"]
        flat30 = _run(
            pool,
            flat30_task,
            [(noise, variant, seed) for seed in range(args.flat_nights_30)],
            f"flat x30 noise {noise:.0%} {variant}",
        )
        for name in names:
            if name == "wrapper":
                per_metric = _per100(sum(a for a, _ in flat30), len(flat30) * nights * 30)
                per_night = _per100(sum(n for _, n in flat30), len(flat30) * nights)
            else:  # independent metrics: a night of 30 is 30 of the 1-metric series side by side
                per_metric = _per100(sum(len(d[name][1]) for d in done), len(done) * nights)
                nights_hit = sum(len({night for d in group for night in d[name][1]}) for group in groups)
                per_night = _per100(nights_hit, len(groups) * nights)
            row30 += ["-", f"{per_metric:.3f}", f"{per_night:.2f}"]
        rows.append(row30)
    header = ["noise", "series", "metrics/night"]
    for name in names:
        header += [
            f"{name}: any change point in 60 runs",
            f"{name}: false alarms /100 runs /metric",
            f"{name}: nights with a false alarm /100 nights",
        ]
    tables.table(
        "Flat series: false alarms",
        COMMAND,
        header,
        rows,
        [
            f"1 metric per night: {args.flat_series} series of 60 runs per row, analysed once whole (any change "
            f"point) and nightly from run {FIRST_NIGHT} on (the alarm columns). 30 metrics per night: the "
            f"wrapper's {args.flat_nights_30} histories of 30 flat metrics each, through its real 30-metric "
            "call every night; the bare libraries' 1-metric series taken 30 at a time (they analyse each "
            "metric alone)."
        ],
    )


def _nightly_table(pool, args: argparse.Namespace, spa: bool, names: list[str]) -> None:
    """Nightly: runs after a shift until it is found."""
    rows = []
    for shift in SHIFTS:
        for label, rate in (("1", RATE), ("30", RATE / 30)):
            done = _run(
                pool,
                latency_task,
                [(shift, rate, seed, spa) for seed in range(args.latency_series)],
                f"latency shift {shift:.0%} x{label}",
            )
            row = [f"{shift:.0%}", label]
            for name in names:
                runs = [d[name] for d in done]
                got = [r for r in runs if r is not None]
                row.append(_pct([r is not None and r <= 2 for r in runs]))
                row.append(_pct([r is not None and r <= 5 for r in runs]))
                row.append(f"{statistics.median(got):.0f}" if got else "-")
            rows.append(row)
    header = ["shift", "metrics/night"]
    for name in names:
        header += [f"{name}: by 2 runs after", f"{name}: by 5 runs after", f"{name}: median runs until found"]
    tables.table(
        "Nightly: runs after the shift until it is found (2% noise)",
        COMMAND,
        header,
        rows,
        [
            f"{args.latency_series} series per row, the shift at a run uniform in 20..40, analysed every night "
            "from 2 runs after it; found = a change point within 2 runs of the shift (the wrapper's a "
            "regression). The bare libraries do not depend on the metrics per night."
        ],
    )


def main() -> None:
    global RATE, MIN_EFFECT, OTAVA_MATCHED
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=200, help="shifted series per cell, 1 metric per night")
    parser.add_argument("--series-30", type=int, default=100, help="shifted series per cell, 30 metrics per night")
    parser.add_argument("--flat-series", type=int, default=300, help="flat series per variant (nightly, 1 metric)")
    parser.add_argument("--flat-nights-30", type=int, default=40, help="flat 30-metric histories per variant")
    parser.add_argument("--latency-series", type=int, default=100, help="shifted series per shift, nightly")
    parser.add_argument("--calibration-series", type=int, default=200, help="flat series per row, calibration")
    parser.add_argument("--otava-pvalue", type=float, default=OTAVA_MATCHED, help="the matched Otava's max_pvalue")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--spa-path", type=Path, help="a directory holding signal-processing-algorithms")
    parser.add_argument("--rate", type=float, default=RATE, help="the wrapper's false-alarm rate per night")
    parser.add_argument("--min-effect", type=float, default=MIN_EFFECT, help="the wrapper's smallest effect")
    parser.add_argument("--only", choices=TABLES, action="append", help="these tables alone (repeatable)")
    args = parser.parse_args()
    RATE, MIN_EFFECT, OTAVA_MATCHED = args.rate, args.min_effect, args.otava_pvalue  # read by the forked workers
    only = set(args.only or TABLES)
    spa = False
    if args.spa_path is not None:
        sys.path.insert(0, str(args.spa_path))
        import signal_processing_algorithms  # noqa: F401  (fails here, not in a worker)

        spa = True
    names = list(detectors(spa))
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        for name, table in (
            ("calibrate", _calibrate),
            ("shifted", _shifted),
            ("flat", _flat),
            ("nightly", _nightly_table),
        ):
            if name in only:
                table(pool, args, spa, names)


if __name__ == "__main__":
    main()
