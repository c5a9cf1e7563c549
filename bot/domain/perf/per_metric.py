"""A test's series analysed together, each metric with its own smallest effect worth acting on. Pure.

bot.domain.perf.changes takes one `min_effect` for every metric of a night; a policy sets one per metric
(`tests[].metrics[].min_effect`, else the default). The metrics are tested together (each at
`false_alarm_rate / metrics`, so the rate holds for the night), with no effect floor, and each change point is then
kept when its effect's interval reaches its own metric's floor (`effect.reaches`): the same change points as one
call per floor would give, since the floor only drops a change point, never moves one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.domain.perf.changes import Change, ChangeSettings, Direction, find_changes
from bot.domain.perf.effect import reaches


def changes(
    shas: Sequence[str],
    metrics: Mapping[str, Sequence[float | None]],
    directions: Mapping[str, Direction],
    min_effects: Mapping[str, float | None],
    settings: ChangeSettings | None = None,
) -> list[Change]:
    """The change points of the test's metrics (`metrics[name][i]`: run i's reading, None when missing), each at
    least its metric's `min_effects` (None or absent: `settings.min_effect`) in size."""
    settings = settings or ChangeSettings()
    found = find_changes(shas, metrics, directions, replace(settings, min_effect=0.0))
    floor = {name: settings.min_effect if min_effects.get(name) is None else min_effects[name] for name in metrics}
    return [c for c in found if reaches(c.low, c.high, floor[c.metric] or 0.0)]
