"""The demo's watch over the bot's store: when no revert PR can come, it says why instead of waiting out its timeout."""

from __future__ import annotations

from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.cli.demo_watch import StoryWatch


def test_a_red_run_the_bot_started_nothing_for_ends_the_story_after_the_grace(tmp_path):
    """The bot read the red run and judged it nothing to bisect (say, its job died before the test summary): every
    job done, no bisection. The story ends once that has held for the grace, not at the demo's timeout."""
    db = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = connect(db)
    deliveries, jobs = Deliveries(engine), Jobs(engine)
    now = [0.0]
    watch = StoryWatch(db, lambda: True, publish_grace_s=30, clock=lambda: now[0])
    assert watch.ended() is None  # the webhook has not arrived yet
    deliveries.record(Incoming("d-1", "workflow_run", "completed", "acme/engine", "nightly_failure", {}))
    assert watch.ended() is None  # queued
    job = jobs.claim()
    now[0] = 100.0
    assert watch.ended() is None  # running: it may yet start a bisection
    jobs.finish(job.id)
    assert watch.ended() is None  # done: the grace starts now
    now[0] = 125.0
    assert watch.ended() is None
    deliveries.record(Incoming("d-2", "workflow_run", "completed", "acme/engine", "nightly_failure", {}))
    now[0] = 140.0
    assert watch.ended() is None  # a new delivery: not idle, the grace starts again once it is done
    jobs.finish(jobs.claim().id)
    assert watch.ended() is None
    now[0] = 171.0
    ended = watch.ended()
    assert ended is not None and "2 webhook job(s) and started no bisection" in ended.why, ended
