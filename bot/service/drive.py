"""Driving an admitted bisection to its end: its steps on the backend its policy names (bot.ports.BackendFor), the
persisted state machine (bot.service.driver) run, and its status comment edited as it goes."""

from __future__ import annotations

import time

from bot.ports import BackendFor, Forge
from bot.ports.store import BisectionStore
from bot.service.driver import Driver, Snapshot
from bot.service.intake import Admitted
from bot.service.status import render_status
from bot.service.workspace import Workspace

STATUS_EVERY_S = 5.0


class StatusComment:
    """The bisection's status comment in the thread it was asked in (none for a red run), edited only when its text
    changes (GitHub's rate limit)."""

    def __init__(self, forge: Forge, thread: int | None, bisection_id: int):
        self.forge = forge
        self.thread = thread
        self.key = f"status-{bisection_id}"
        self.shown: str | None = None

    def say(self, text: str) -> None:
        if self.thread and text != self.shown:
            self.forge.comment_once(self.thread, self.key, text)
            self.shown = text


def drive(
    forge: Forge,
    admitted: Admitted,
    status: StatusComment,
    store: BisectionStore,
    backends: BackendFor,
    workspace: Workspace,
) -> None:
    """Runs the bisection unless it has ended already (a retried job), saying how it goes every STATUS_EVERY_S."""
    work, loaded = admitted.work, admitted.loaded
    status.say(render_status(work.test, loaded.problem, None, None, started=work.started))
    last = [0.0]

    def observe(snap: Snapshot) -> None:
        if time.monotonic() - last[0] >= STATUS_EVERY_S:
            last[0] = time.monotonic()
            status.say(render_status(work.test, loaded.problem, snap, None, started=work.started))

    if loaded.row.status:
        return
    backend = backends(
        admitted.test,
        loaded.config.workers,
        admitted.repo,
        work.repo,
        workspace.clone_url(work.repo),
        admitted.policy.default_branch,
        loaded.id,
    )
    Driver(
        store,
        loaded.id,
        loaded.problem,
        loaded.config,
        backend,
        observe,
        workspace.clones.reverter(admitted.repo),
        cancelled=lambda: store.cancel_requested(loaded.id),
    ).run()
