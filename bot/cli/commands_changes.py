"""`revert-bisect changes`: where a benchmark's own series shifted, from a CSV of runs (no repository needed)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bot.cli.consoles import err, out
from bot.cli.series_csv import Series, SeriesError, read_series

if TYPE_CHECKING:  # the module itself is imported when the command runs: numpy, scipy and Otava take a second
    from bot.domain.perf.changes import Change, Direction

DEFAULT_DIRECTION = "higher"  # as `bisect` takes a metric (--higher-is-worse): a time, a latency
FLAGS = {"lower": "--lower-is-worse", "higher": "--higher-is-worse"}
WORDS = {"lower": "lower is worse", "higher": "higher is worse"}


def _fail(message: str) -> typer.Exit:
    err.print(f"revert-bisect: error: {message}", highlight=False, markup=False, soft_wrap=True)
    return typer.Exit(2)


def _directions(given: list[str], metrics: list[str]) -> dict[str, Direction]:
    directions: dict[str, Direction] = {}
    for item in given:
        name, sep, way = item.rpartition("=")
        if not sep or not name or way not in FLAGS:
            raise _fail(f"--direction {item!r}: use METRIC=lower (lower is worse) or METRIC=higher")
        if name not in metrics:
            raise _fail(f"--direction {item!r}: no metric {name!r} in the series (it has: {', '.join(metrics)})")
        directions[name] = "lower" if way == "lower" else "higher"
    return directions


def _percent(x: float) -> str:
    return f"{x * 100:+.1f}%"


def _run(series: Series, i: int) -> str:
    return f"row {i} (sha {series.shas[i]}{', ' + series.times[i] if series.times[i] else ''})"


def _bisect_command(change: Change, metric: str) -> str:
    """The bisection of this change: a regression as the metric's worse way; an improvement the other way round,
    so that the search finds the commit that moved it."""
    way = change.direction if change.regression else ("higher" if change.direction == "lower" else "lower")
    regex = re.escape(metric) + r"\D*?(?P<value>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
    chosen = ["--good", change.sha_before, "--bad", change.sha_after, FLAGS[way], "--metric-regex", regex]
    return f"revert-bisect bisect --repo <your clone> {shlex.join(chosen)} -- <your benchmark, printing {metric}>"


def changes(
    series_file: Annotated[
        Path,
        typer.Option(
            "--series",
            metavar="FILE",
            help="A CSV file: columns sha, time and one per metric, one row per run, oldest first. "
            "An empty cell (or nan, NA) is a missing reading: skipped.",
        ),
    ],
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json",
            metavar="FILE",
            help='Write {"changes": [{"metric", "index", "sha_before", "sha_after", "effect", "low", "high"}]} here '
            "(index: the first row after the shift, 0-based; effect, low, high: relative, -0.041 for -4.1%).",
        ),
    ] = None,
    direction: Annotated[
        list[str] | None,
        typer.Option(
            "--direction",
            metavar="METRIC=lower|higher",
            help="Which way METRIC gets worse: lower (a throughput) or higher (a latency); repeat per metric. "
            f"A metric not named is taken as {DEFAULT_DIRECTION}-is-worse, as bisect takes one.",
        ),
    ] = None,
    min_effect: Annotated[
        float,
        typer.Option(
            "--min-effect",
            min=0.0,
            metavar="FRACTION",
            help="The smallest relative change reported (0.02: 2%), either way: a change whose 95% interval "
            "shows it smaller is not.",
        ),
    ] = 0.02,
    false_alarm_rate: Annotated[
        float,
        typer.Option(
            "--false-alarm-rate",
            min=1e-6,
            max=0.5,
            metavar="P",
            help="When no metric shifted, the chance that this report names any change point, all metrics "
            "together (each metric is tested at P divided by the number of metrics).",
        ),
    ] = 0.01,
) -> None:
    """Print where each metric of a series shifted: the rows either side, the shas, the effect and its
    95% interval, and the `bisect` command that would find the commit."""
    from bot.domain.perf.changes import ChangeSettings, find_changes

    try:
        series = read_series(series_file)
    except SeriesError as exc:
        raise _fail(str(exc)) from None
    metrics = list(series.metrics)
    directions = _directions(direction or [], metrics)
    settings = ChangeSettings(false_alarm_rate=false_alarm_rate, min_effect=min_effect)
    found = find_changes(series.shas, series.metrics, directions, settings)

    defaulted = [m for m in metrics if m not in directions]
    out.print(
        f"{len(series.shas)} runs, {len(metrics)} metric(s); false-alarm rate {false_alarm_rate:g} for all metrics "
        f"together ({false_alarm_rate / len(metrics):.2g} each), smallest effect {min_effect * 100:g}%",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if defaulted:
        out.print(
            f"taken as {DEFAULT_DIRECTION}-is-worse (no --direction): {', '.join(defaulted)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if not found:
        out.print("no change point", highlight=False, markup=False)
    for change in found:
        half = (change.high - change.low) / 2
        kind = "a regression" if change.regression else "an improvement"
        out.print(
            f"\n{change.metric} ({WORDS[change.direction]}): {_percent(change.effect)} +/- {half * 100:.1f}% "
            f"(95% interval {_percent(change.low)} to {_percent(change.high)}), {kind}\n"
            f"  last run before: {_run(series, change.before)}\n"
            f"  first run after: {_run(series, change.index)}\n"
            f"  mean {change.mean_before:.6g} over {change.runs_before} runs -> {change.mean_after:.6g} over "
            f"{change.runs_after} runs; permutation p = {change.p_value:.2g} (level {change.level:.2g})\n"
            f"  bisect it: {_bisect_command(change, change.metric)}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    if json_out is not None:
        document = {
            "runs": len(series.shas),
            "false_alarm_rate": false_alarm_rate,
            "min_effect": min_effect,
            "changes": [
                {
                    "metric": c.metric,
                    "index": c.index,
                    "before": c.before,
                    "sha_before": c.sha_before,
                    "sha_after": c.sha_after,
                    "effect": c.effect,
                    "low": c.low,
                    "high": c.high,
                    "mean_before": c.mean_before,
                    "mean_after": c.mean_after,
                    "direction": c.direction,
                    "regression": c.regression,
                    "p_value": c.p_value,
                }
                for c in found
            ],
        }
        try:
            json_out.write_text(json.dumps(document, indent=2) + "\n")
        except OSError as exc:
            raise _fail(f"--json {json_out}: cannot be written ({exc.strerror or exc})") from None
