"""The end-to-end tests' one wait on the bot (tests/support/sandbox.wait_for): it fails as soon as what it
awaits can no longer come -- the bisection ended otherwise, a job failed for good, the bot exited, or
nothing is left to run -- with the bisection's status, its failing steps' reasons and the log's tail."""

from __future__ import annotations

import time

import pytest

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.adapters.store.store import NewStep, StepReport, Store
from bot.service import setup
from bot.service.config import BisectConfig
from tests.support.hand_rows import progress
from tests.support.sandbox import BotWatch, wait_for

ENV_ERROR = "cannot make this commit's environment: `uv pip` failed: torch was not found"


@pytest.fixture
def bot(tmp_path, synth):
    """A bot's store with one bisection (running) and its job (running), and a log with a last line."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = connect(url)
    repo = synth(12, 6)
    store = Store(engine)
    bisection = setup.create(
        store,
        GitRepo(repo.path),
        repo.good,
        repo.bad,
        BisectConfig(command=tuple(repo.command())),
        origin={"repo": "octo/kernels"},
    ).id
    Deliveries(engine).record(Incoming("d-1", "issue_comment", "created", "octo/kernels", "command", {}))
    jobs = Jobs(engine)
    job = jobs.claim()
    (tmp_path / "bot.log").write_text("starting\nbisection #1 of octo/kernels: the last line\n")
    state = {"alive": True}
    watch = BotWatch(url, lambda: state["alive"], [tmp_path / "bot.log"])
    return dict(store=store, bisection=bisection, repo=repo, jobs=jobs, job=job, state=state, watch=watch)


def _fails_at_once(bot, **kw) -> str:
    started = time.monotonic()
    with pytest.raises(AssertionError) as failure:
        wait_for(lambda: None, timeout=60, bot=bot["watch"], **kw)
    assert time.monotonic() - started < 5, "the wait ran on although its state could not come"
    return str(failure.value)


def test_a_bisection_that_ended_otherwise_fails_the_wait_with_its_status_reasons_and_log(bot):
    store, repo = bot["store"], bot["repo"]
    steps = store.add_steps(bot["bisection"], [NewStep(repo.good, "calibrate", 1), NewStep(repo.bad, "calibrate", 1)])
    for step in steps:
        store.finish_step(step, StepReport(None, None, ENV_ERROR, "skip", "local/wt-0", 1.5, "uv output"))
    progress(store, bot["bisection"], status="untestable", outcome={"message": "no commit could be tested"})
    message = _fails_at_once(bot)
    assert "bisection #1 ended untestable (awaited: found)" in message
    assert "status untestable" in message and "no commit could be tested" in message
    assert f"calibrate run of {repo.good[:12]}: skip: {ENV_ERROR}" in message
    assert "the last line" in message  # the log's tail


def test_an_awaited_status_keeps_the_wait_going_until_nothing_is_left_to_run(bot):
    progress(bot["store"], bot["bisection"], status="cancelled", outcome={"message": "cancelled on request"})
    with pytest.raises(AssertionError, match="timed out after 1 s"):
        wait_for(
            lambda: None, timeout=1, bot=bot["watch"], expect=("cancelled",)
        )  # its job still runs: it may still come
    bot["jobs"].finish(bot["job"].id)
    assert "every bisection has ended and the bot has no job left to run" in _fails_at_once(bot, expect=("cancelled",))


def test_a_job_failed_for_good_or_an_exited_bot_fails_the_wait(bot):
    bot["state"]["alive"] = False
    assert _fails_at_once(bot).startswith("the bot exited")
    bot["state"]["alive"] = True
    bot["jobs"].finish(bot["job"].id, "GithubException: 500", retry=False)
    message = _fails_at_once(bot)
    assert message.startswith("job 1 (command) failed for good: GithubException: 500")
    assert "job 1 (command): failed after 1 attempt(s)" in message


def test_the_wait_returns_what_came_and_times_out_by_its_timer_while_all_runs(bot):
    assert wait_for(lambda: ["the PR"], timeout=1, bot=bot["watch"]) == ["the PR"]
    started = time.monotonic()
    with pytest.raises(AssertionError, match="timed out after 1 s") as failure:
        wait_for(lambda: None, timeout=1, bot=bot["watch"])
    assert time.monotonic() - started >= 1
    assert "bisection #1: status unfinished" in str(failure.value)
