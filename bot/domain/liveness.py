"""Whether the worker's loops are alive: each beats at every turn (and during a job's long waits); a loop that
ended or has not beaten within the bound is what /healthz reports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LoopBeat:
    name: str
    last_beat: float  # monotonic seconds
    ended: str | None = None  # why the loop ended (the exception that escaped it); None while it runs


def troubles(loops: Sequence[LoopBeat], now: float, bound_s: float) -> list[str]:
    """One reason per loop that died or is stuck past `bound_s`; [] when every loop is alive."""
    out = []
    for loop in loops:
        if loop.ended is not None:
            out.append(f"worker loop {loop.name} died: {loop.ended}")
        elif now - loop.last_beat > bound_s:
            out.append(
                f"worker loop {loop.name} stuck: no heartbeat for {now - loop.last_beat:.0f}s (bound {bound_s:g}s)"
            )
    return out
