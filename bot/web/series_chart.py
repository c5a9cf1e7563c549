"""A benchmark's series as an inline SVG (pure: data in, markup out; no JavaScript): one point per run that reported
the metric, oldest on the left; a run that reported none is a mark on the axis; each change point a dashed line
between its last run before and first run after, with each side's mean as a line and its interval as a band."""

from __future__ import annotations

from markupsafe import Markup, escape

from bot.web.series_views import Band, ChangeView, SeriesDetail

WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 16, 44


def _fmt(value: float) -> str:
    return f"{value:.5g}"


def render_series_svg(d: SeriesDetail) -> Markup:
    """The chart of `d`, or nothing when no run reported the metric."""
    values = [p.value for p in d.points if p.value is not None]
    if not values:
        return Markup("")
    bounds = values + [v for c in d.changes for b in (c.before, c.after) for v in (b.low, b.high)]
    lo, hi = min(bounds), max(bounds)
    pad = (hi - lo) * 0.1 or (abs(hi) * 0.1 or 1.0)
    lo, hi = lo - pad, hi + pad
    n = max(len(d.points), 2)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(position: float) -> float:
        return LEFT + plot_w * position / (n - 1)

    def y(value: float) -> float:
        return TOP + plot_h * (hi - value) / (hi - lo)

    missing = len(d.points) - len(values)
    desc = (
        f"{d.metric} over {len(d.points)} runs, oldest on the left: {len(values)} readings"
        + (f", {missing} runs without one (marked on the axis)" if missing else "")
        + f"; {len(d.changes)} change point{'s' if len(d.changes) != 1 else ''}"
        + "".join(
            f"; between runs {c.run_before} and {c.run_after}: {c.effect_text}, mean {_fmt(c.before.mean)} "
            f"before, {_fmt(c.after.mean)} after"
            for c in d.changes
        )
    )
    out = [
        f'<svg class="chart series-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        'aria-labelledby="series-chart-title series-chart-desc" xmlns="http://www.w3.org/2000/svg" '
        'preserveAspectRatio="xMidYMid meet">',
        f'<title id="series-chart-title">{escape(d.metric)} by run</title>',
        f'<desc id="series-chart-desc">{escape(desc)}</desc>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
        f'<line class="axis" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>',
    ]
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.4g}</text>')
    first, last = d.points[0], d.points[-1]
    out.append(f'<text class="tick" x="{LEFT}" y="{HEIGHT - 8}" text-anchor="start">{first.started_at:%Y-%m-%d}</text>')
    out.append(
        f'<text class="tick" x="{LEFT + plot_w}" y="{HEIGHT - 8}" text-anchor="end">{last.started_at:%Y-%m-%d}</text>'
    )
    drawn: set[tuple[int, int]] = set()
    for change in d.changes:
        for name, band in (("before", change.before), ("after", change.after)):
            if (band.first, band.last) not in drawn:
                drawn.add((band.first, band.last))
                out += _band(band, name, x, y)
        out += _change(change, x, plot_h)
    for k, p in enumerate(d.points):
        when = f"{p.started_at:%Y-%m-%d}"
        if p.value is None:
            label = f"run {p.run_id} ({p.sha[:12]}, {when}): no reading"
            xx, yy = x(k), TOP + plot_h
            out.append(
                f'<path class="gap" data-gap="{p.run_id}" d="M{xx - 4:.1f},{yy - 4:.1f} l8,8 m0,-8 l-8,8">'
                f"<title>{escape(label)}</title></path>"
            )
            continue
        label = f"run {p.run_id} ({p.sha[:12]}, {when}): {_fmt(p.value)}"
        out.append(
            f'<circle class="point series-point" data-run="{p.run_id}" cx="{x(k):.1f}" cy="{y(p.value):.1f}" r="4">'
            f"<title>{escape(label)}</title></circle>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _band(band: Band, name: str, x, y) -> list[str]:
    """A side's interval of the mean as a band over its runs, and its mean as a line."""
    x0, x1 = x(band.first), x(band.last)
    if x1 - x0 < 4:
        x0, x1 = x0 - 2, x1 + 2
    top, bottom = y(band.high), y(band.low)
    label = (
        f"mean {_fmt(band.mean)} ({_fmt(band.low)} to {_fmt(band.high)}) over {band.runs} runs, "
        f"{band.first_run} to {band.last_run}"
    )
    return [
        f'<rect class="band side-band" data-band="{band.first}-{band.last}" x="{x0:.1f}" y="{top:.1f}" '
        f'width="{x1 - x0:.1f}" height="{max(bottom - top, 1.0):.1f}"><title>{escape(label)}</title></rect>',
        f'<line class="side-mean" data-mean="{band.first}-{band.last}" x1="{x0:.1f}" y1="{y(band.mean):.1f}" '
        f'x2="{x1:.1f}" y2="{y(band.mean):.1f}"><title>{escape(label)}</title></line>',
    ]


def _change(change: ChangeView, x, plot_h: float) -> list[str]:
    xx = (x(change.before.last) + x(change.index)) / 2  # between the last run before and the first after
    label = f"change between runs {change.run_before} and {change.run_after}: {change.effect_text}"
    cls = "change regression" if change.regression else "change"
    return [
        f'<line class="{cls}" data-change="{change.index}" x1="{xx:.1f}" y1="{TOP}" x2="{xx:.1f}" '
        f'y2="{TOP + plot_h}" stroke-dasharray="5 4"><title>{escape(label)}</title></line>'
    ]
