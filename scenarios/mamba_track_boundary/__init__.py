"""The miniature SGLang incident: a Mamba track-boundary mislabel under the overlap scheduler.

`build(dir, commits=60, seed=0, flake_rate=0.0, unbuildable=0)` writes `dir/repo`, a git repository
of a miniature serving engine (`mini_sglang/`, see `template/`) with a squash-merge history in
which exactly one commit records the wrong length for a decode-state checkpoint, and
`dir/scenario.json`, the scenario's metadata (PRs, the follow-up issue, the expected culprit,
the nightly's own KL test). See ../shared/DESIGN.md section 7.
"""

from .builder import (
    KL_CASE,
    METRIC,
    METRIC_REGEX,
    MODEL,
    THRESHOLD,
    TRACK_INTERVAL,
    Scenario,
    build,
)

__all__ = [
    "KL_CASE",
    "MODEL",
    "METRIC",
    "METRIC_REGEX",
    "THRESHOLD",
    "TRACK_INTERVAL",
    "Scenario",
    "build",
]
