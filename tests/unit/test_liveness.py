"""The liveness verdict over the worker loops' heartbeats (bot.domain.liveness)."""

from bot.domain.liveness import LoopBeat, troubles


def test_loops_that_beat_within_the_bound_are_alive():
    assert troubles([LoopBeat("w-0", 100.0), LoopBeat("w-1", 40.0)], now=100.0, bound_s=60) == []


def test_a_loop_past_the_bound_is_stuck_and_a_loop_that_ended_is_dead_whatever_its_last_beat():
    loops = [LoopBeat("w-0", 10.0), LoopBeat("w-1", 99.0, ended="Killed: out of memory"), LoopBeat("w-2", 99.0)]
    assert troubles(loops, now=100.0, bound_s=60) == [
        "worker loop w-0 stuck: no heartbeat for 90s (bound 60s)",
        "worker loop w-1 died: Killed: out of memory",
    ]
