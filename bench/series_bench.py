"""Benchmark: the series page's change-point search (bot/web/series_views.py, `detail`) over a test's history --
what a request to /series/<owner>/<name>/<test>/<metric> or its API twin computes -- by the number of runs kept.

    python bench/series_bench.py                      # runs 30, 60, 100, 200, 400; 3 repeats
    python bench/series_bench.py --runs 30,100 --repeats 1
    python bench/series_bench.py --window 1000000     # every run searched: why the page has a window

A test of 8 metrics (SGLang's text-model perf test: two models, four batch sizes), each a throughput around its own
level with Gaussian noise of 2% of it, one of them 5% slower from 20 runs before the newest on (the middle run of a
history of 40 or fewer), one run in 15 without readings
(a crash). The page analyses the test's metrics together over its newest `WINDOW` runs (all of them below it) and
keeps the answer for the same series; `first` is a request for a series not seen yet (the search's cache cleared),
`again` the same page requested again. Medians over the repeats, seconds. The page's found change point is checked
against the planted one (`found`: within 2 runs).

Prints a markdown table (progress on stderr).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot.ports.store import SeriesPoint  # noqa: E402
from bot.web import series_views  # noqa: E402

METRICS = [f"{m}_bs{b}_output_throughput" for m in ("llama-3.1-8b", "qwen2-57b-a14b") for b in (1, 8, 16, 64)]
T0 = datetime(2026, 1, 1, 14, tzinfo=UTC)


def shift_at(runs: int) -> int:
    """The planted shift: 20 runs before the newest (the middle of a short history), inside any window searched."""
    return max(runs // 2, runs - 20)


def history(runs: int, seed: int) -> dict[str, list[SeriesPoint]]:
    rng = random.Random(seed)
    out: dict[str, list[SeriesPoint]] = {}
    for j, metric in enumerate(METRICS):
        level = 100.0 * (j + 1)
        points = []
        for k in range(runs):
            shifted = 0.95 if j == 3 and k >= shift_at(runs) else 1.0
            value = None if k % 15 == 7 else level * shifted * (1 + rng.gauss(0, 0.02))
            started = T0 + timedelta(days=2 * k)
            points.append(SeriesPoint("o/r", "perf", metric, 1000 + k, 1, f"{k:040x}", started, value))
        out[metric] = points
    return out


def timed(series: dict[str, list[SeriesPoint]]) -> tuple[float, series_views.SeriesDetail]:
    start = time.perf_counter()
    view = series_views.detail("o/r", "perf", METRICS[3], series, dict.fromkeys(METRICS), [])
    return time.perf_counter() - start, view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="30,60,100,200,400")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--window", type=int, help="runs searched (default: the page's WINDOW)")
    args = parser.parse_args()
    if args.window is not None:
        series_views.WINDOW = args.window
    print(f"Command: `{' '.join(['python bench/series_bench.py', *sys.argv[1:]])}`")
    print()
    print(f"The newest {series_views.WINDOW} runs searched")
    print()
    print("| runs kept | runs searched | first (s) | again (s) | found |")
    print("|---|---|---|---|---|")
    for runs in (int(r) for r in args.runs.split(",")):
        firsts, agains, found = [], [], 0
        searched = 0
        for seed in range(args.repeats):
            series = history(runs, seed)
            series_views._changes.cache_clear()
            first, view = timed(series)
            again, _ = timed(series)
            firsts.append(first)
            agains.append(again)
            searched = len(view.points) - view.searched_from
            found += any(abs(c.index - shift_at(runs)) <= 2 for c in view.changes)
            print(f"runs {runs} seed {seed}: {first:.2f}s, again {again:.3f}s", file=sys.stderr)
        print(
            f"| {runs} | {searched} | {statistics.median(firsts):.2f} | {statistics.median(agains):.3f} | "
            f"{found}/{args.repeats} |"
        )


if __name__ == "__main__":
    main()
