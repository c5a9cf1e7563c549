"""Running requested bisections for repositories on the forge, along their data path: intake (what to bisect and
whether, bot.service.intake), drive (the steps and the status comment, bot.service.drive), conclude (an earlier
revert, the guards' decision, the revert published and recorded: bot.service.conclude).

The repository is cloned (then fetched) from the forge with the token in a per-command header
(bot.service.workspace); the bisection is stored with where it was asked for, and its steps run where its policy
says (the local pool or the step workflow on self-hosted runners).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bot.domain.repo_policies import RepoPolicies
from bot.domain.requests import StartRequest
from bot.domain.scope import Scoped
from bot.observability.logs import bind
from bot.ports import BackendFor, Clones, Forge
from bot.ports.store import BisectionStore, HoldLog
from bot.service.conclude import Conclusions
from bot.service.drive import StatusComment, drive
from bot.service.intake import Intake, nightly_group_request, nightly_request
from bot.service.status import render_status
from bot.service.workspace import Workspace

log = logging.getLogger("revert_bisect.bisections")


class Bisections:
    """Every bisection of this deployment, whichever backend runs its steps (the local pool, the step workflow)."""

    def __init__(
        self,
        store: BisectionStore,
        holds: HoldLog,
        backends: BackendFor,
        clones: Clones,
        workspace: Path,
        policies: Mapping[str, RepoPolicies],
        clone_url: Callable[[str], str],
        token: Callable[[str], str],
    ):
        self.store = store
        self.backends = backends
        self.workspace = Workspace(clones, workspace, clone_url, token)
        self.intake = Intake(store, holds, self.workspace, policies)
        self.conclusions = Conclusions(store, holds, self.workspace)

    def start(self, request: StartRequest, forge: Forge) -> None:
        """A `/revert-bisect` request: reported in its thread (status comment, reactions)."""
        if not request.good:
            forge.comment_once(
                request.thread,
                f"need-good-{request.comment_id}",
                f"To bisect `{request.test}` from here I need the last good commit: "
                f"`/revert-bisect {request.test} good=<sha>`.",
            )
            return
        self._run(forge, request)

    def start_nightly(self, repo_slug: str, scoped: Scoped, forge: Forge) -> None:
        """A red scheduled run: one bisection per (test, range), never two for the same range; the test's readings
        in CI's scheduled runs from GOOD to BAD go with it as free evidence."""
        self._run(forge, nightly_request(repo_slug, scoped, forge.site))

    def start_nightly_group(self, repo_slug: str, group: Sequence[Scoped], forge: Forge) -> None:
        """Several red tests of one scheduled run, bisected together over the union of their ranges (each test's
        own GOOD known-good for it): one search, one revert per culprit."""
        self._run(forge, nightly_group_request(repo_slug, group, forge.site))

    def _run(self, forge: Forge, work: StartRequest) -> None:
        admitted = self.intake.admit(forge, work)
        if admitted is None:
            return
        with bind(bisection_id=admitted.loaded.id):  # every log line of this bisection carries its id
            status = StatusComment(forge, work.thread, admitted.loaded.id)
            drive(forge, admitted, status, self.store, self.backends, self.workspace)
            row, link = self.conclusions.conclude(forge, admitted)
            status.say(render_status(work.test, admitted.loaded.problem, None, row, link, started=work.started))
            log.info("bisection #%s of %s: %s %s", row.id, work.repo, row.status, link or "")
            # rocket: the revert PR is open; confused: the bisection ended without one (the status comment says why).
            if work.comment_id and not work.dry_run:
                forge.react(work.thread, work.comment_id, "rocket" if link and link.startswith("#") else "confused")

    def status(self, repo: str, thread: int) -> str:
        rows = self.store.from_thread(repo, thread)
        if not rows:
            return "No bisection was started from this thread."
        return "\n".join(
            f"- #{r.id} `{(r.origin or {}).get('test')}` {r.good[:12]}..{r.bad[:12]}: {r.status or r.phase}"
            for r in rows
        )

    def cancel(self, repo: str, thread: int, by: str) -> str:
        """Flag every unfinished bisection of the thread; the process driving each stops within a second."""
        stopped = [
            r.id for r in self.store.from_thread(repo, thread) if not r.status and self.store.request_cancel(r.id, by)
        ]
        if not stopped:
            return "Nothing is running from this thread."
        return (
            "Cancelling "
            + ", ".join(f"#{i}" for i in stopped)
            + ": runs in flight are stopped and no revert will be opened."
        )
