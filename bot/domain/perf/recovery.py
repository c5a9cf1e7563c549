"""A slowdown recovered: a later change point of the same metric that brought it back. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from bot.domain.perf.changes import Change


def recovery(slowdown: Change, same_metric: Iterable[Change], floor: float) -> Change | None:
    """The first later change point of the metric, the better way, to a level within `floor` (a relative effect, the
    metric's `min_effect`) of the level before `slowdown` or past it, if one did; None for a standing slowdown."""
    start = slowdown.mean_before
    for later in sorted(same_metric, key=lambda c: c.index):
        if later.index <= slowdown.index or later.regression:
            continue
        level = later.mean_after
        worse_by = (start - level) / start if slowdown.direction == "lower" else (level - start) / start
        if worse_by < floor:
            return later
    return None
