"""The metric along the range as an inline SVG (pure: data in, markup out; no JavaScript)."""

from __future__ import annotations

from markupsafe import Markup, escape

from bot.web.models import ChartData

WIDTH, HEIGHT = 720, 220  # short enough that the answer, the chart and the timeline's start share a screen
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 40
VERDICT_CLASS = {"good": "v-good", "bad": "v-bad", "skip": "v-skip", "infra": "v-infra"}


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def render_svg(chart: ChartData, labels: dict[int, str] | None = None) -> Markup:
    """Points coloured by verdict (with <title> tooltips), the threshold and the calibrated boundary as dashed lines."""
    values = [p.metric for p in chart.points] + [v for v in (chart.threshold, chart.boundary) if v is not None]
    if not values:
        return Markup("")
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or (abs(hi) * 0.1 or 1.0)
    lo, hi = lo - pad, hi + pad
    positions = max(chart.positions, 2)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(position: float) -> float:
        return LEFT + plot_w * position / (positions - 1)

    def y(value: float) -> float:
        return TOP + plot_h * (hi - value) / (hi - lo)

    n_points = len(chart.points)
    desc = (
        f"{n_points} metric reading{'s' if n_points != 1 else ''} over {chart.positions} commits, oldest on the left"
        + (f"; threshold {_fmt(chart.threshold)}" if chart.threshold is not None else "")
        + (f"; calibrated boundary {_fmt(chart.boundary)}" if chart.boundary is not None else "")
    )
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" '
        f'xmlns="http://www.w3.org/2000/svg" preserveAspectRatio="xMidYMid meet">',
        '<title id="chart-title">Metric by commit</title>',
        f'<desc id="chart-desc">{escape(desc)}</desc>',
    ]
    # axes and ticks
    out.append(f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>')
    out.append(f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>')
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        out.append(
            f'<text class="tick" x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.3g}</text>'
        )  # fits LEFT
    out.append(f'<text class="tick" x="{LEFT}" y="{HEIGHT - 8}" text-anchor="start">GOOD</text>')
    out.append(f'<text class="tick" x="{LEFT + plot_w}" y="{HEIGHT - 8}" text-anchor="end">BAD</text>')
    for name, value, cls in (
        ("threshold", chart.threshold, "threshold"),
        ("calibrated boundary", chart.boundary, "boundary"),
    ):
        if value is None:
            continue
        yy = y(value)
        out.append(
            f'<line class="{cls}" data-line="{cls}" x1="{LEFT}" y1="{yy:.1f}" x2="{LEFT + plot_w}" y2="{yy:.1f}" '
            f'stroke-dasharray="6 4" aria-label="{name} {_fmt(value)}"><title>{name}: {_fmt(value)}</title></line>'
        )
        out.append(
            f'<text class="line-label {cls}-label" x="{LEFT + plot_w - 4}" y="{yy - 4:.1f}" '
            f'text-anchor="end">{name} {_fmt(value)}</text>'
        )
    out += _bands(chart, x, y, plot_w)
    if (
        chart.culprit is not None
    ):  # where the answer is: the first bad commit, between the last good and the first bad point
        xx = x(chart.culprit)
        out.append(
            f'<line class="culprit" data-line="culprit" x1="{xx:.1f}" y1="{TOP}" x2="{xx:.1f}" y2="{TOP + plot_h}" '
            f'stroke-dasharray="3 3"><title>culprit</title></line>'
        )
    # readings on one commit are spread a little so repeats stay visible
    seen: dict[int, int] = {}
    for p in chart.points:
        k = seen.get(p.position, 0)
        seen[p.position] = k + 1
        cx = x(p.position) + (k % 5 - 2) * 3 * (k > 0)
        label = f"{(labels or {}).get(p.position, p.sha[:12])}: {p.kind} run, {_fmt(p.metric)}, {p.verdict}"
        out.append(
            f'<circle class="point {VERDICT_CLASS.get(p.verdict, "v-other")}" '
            f'cx="{cx:.1f}" cy="{y(p.metric):.1f}" r="5" '
            f'tabindex="0" role="img" aria-label="{escape(label)}"><title>{escape(label)}</title></circle>'
        )
    out += _medians(chart, x, y)
    out.append("</svg>")
    return Markup("".join(out))


def _by_position(chart: ChartData) -> dict[int, list[float]]:
    readings: dict[int, list[float]] = {}
    for p in chart.points:
        readings.setdefault(p.position, []).append(p.metric)
    return readings


def _bands(chart: ChartData, x, y, plot_w: float) -> list[str]:
    """A sampled metric's GOOD and BAD bands: the range of each endpoint's readings across the plot, so every
    commit's strip reads as like one or the other (drawn once an endpoint has been read more than once)."""
    readings = _by_position(chart)
    out = []
    for name, pos, cls in (("GOOD", 0, "band-good"), ("BAD", chart.positions - 1, "band-bad")):
        values = readings.get(pos, [])
        if len(values) < 2:
            continue
        top, bottom = y(max(values)), y(min(values))
        label = f"{name}'s readings: {_fmt(min(values))} to {_fmt(max(values))} ({len(values)} runs)"
        out.append(
            f'<rect class="band {cls}" data-band="{name.lower()}" x="{LEFT}" y="{top:.1f}" width="{plot_w}" '
            f'height="{max(bottom - top, 1.0):.1f}" aria-label="{escape(label)}"><title>{escape(label)}</title></rect>'
        )
    return out


def _medians(chart: ChartData, x, y) -> list[str]:
    """A tick at the median of every commit read three times or more (the strip's centre)."""
    out = []
    for pos, values in sorted(_by_position(chart).items()):
        if len(values) < 3:
            continue
        ordered = sorted(values)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        xx, yy = x(pos), y(median)
        out.append(
            f'<line class="median" data-median="{pos}" x1="{xx - 9:.1f}" y1="{yy:.1f}" x2="{xx + 9:.1f}" y2="{yy:.1f}">'
            f"<title>median {_fmt(median)} of {len(values)} runs</title></line>"
        )
    return out
