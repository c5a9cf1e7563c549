"""Bisect steps as GitHub Actions runs of the step workflow, on the repository's self-hosted runners.

Each step is one `workflow_dispatch` of `revert-bisect-step.yml` with a unique correlation id in
its inputs, which the workflow's run-name carries: the run is known at once when GitHub returns
run details, and found by that id otherwise (a 204 answer, or an error after the request went
out). Runs are polled with conditional requests (a 304 costs nothing against the rate limit), every
`poll_s` while they change and less often, up to 8 x `poll_s`, while they do not (a queued run, a
long test); a `workflow_run` or `workflow_job` webhook about one of them cuts its wait short
(`wake_for`), and one about any other run wakes nothing. Every way a run can end without a usable result is an
infra verdict with its reason, never evidence about the commit: cancelled, timed out, never picked
up by a runner with the labels, no artifact or one that cannot be downloaded, a result.json that fails validation.
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from bot.ports import RunEvent, StepWorkflow
from runners import result as result_json
from runners.result import ResultError
from runners.spec import StepResult, StepSpec, new_ref

ARTIFACT = "revert-bisect-step-{step}"


class Dispatched(Exception):
    """A dispatch that may or may not have created a run (an error after the request was sent)."""


class ArtifactUnreadable(Exception):
    """A run's artifact that is there but could not be downloaded, after a bounded number of tries (the reason)."""


@dataclass(frozen=True)
class Limits:
    poll_s: float = 15.0
    queue_timeout_s: float = 3600.0  # queued this long with no runner: given up (infra), the run cancelled
    find_timeout_s: float = 120.0  # a run dispatched without details must show up by its run-name within this
    redispatch: int = 2  # dispatches that may have failed are tried again this many times
    idle_poll_s: float | None = None  # an unchanged run is polled ever less often, up to this (None: 8 x poll_s)

    @property
    def idle_cap_s(self) -> float:
        return self.idle_poll_s if self.idle_poll_s is not None else 8 * self.poll_s


@dataclass
class Flight:
    spec: StepSpec
    correlation: str
    submitted: datetime
    submitted_mono: float
    run_id: int | None = None
    url: str | None = None
    dispatches: int = 1
    queued_since: float | None = None
    status: str = "dispatched"
    seen: object = None  # the run's state at the last poll
    interval: float = 0.0  # until the next poll
    due: float = 0.0  # the next poll, on the backend's clock

    def concerns(self, event: RunEvent) -> bool:
        if self.run_id is not None:
            return event.run_id == self.run_id
        return f"[{self.correlation}]" in event.title


_LIVE: weakref.WeakSet = weakref.WeakSet()


def wake_for(event: RunEvent) -> int:
    """A webhook about a run arrived: the backend waiting on that run polls it now; how many were woken."""
    woken = 0
    for backend in list(_LIVE):
        woken += backend.wake(event)
    return woken


def _now() -> datetime:
    return datetime.now(UTC)


class GitHubActionsBackend:
    name = "github_actions"  # the steps' `backend` column

    def __init__(
        self,
        actions: StepWorkflow,
        ref: str,
        inputs_for: Callable[[StepSpec, str], dict[str, str]],
        parallelism: int,
        labels: list[str],
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.monotonic,
    ):
        self.actions = actions
        self.ref = ref
        self.inputs_for = inputs_for
        self.parallelism = parallelism
        self.labels = labels
        self.limits = limits
        self.clock = clock
        self._flights: dict[int, Flight] = {}
        self._done: list[StepResult] = []
        self._wake = threading.Event()
        _LIVE.add(self)

    @property
    def free(self) -> int:
        return max(0, self.parallelism - len(self._flights))

    def waiting(self) -> dict[int, str]:
        out = {}
        for step_id, f in self._flights.items():
            if f.queued_since is not None:
                minutes = (self.clock() - f.queued_since) / 60
                out[step_id] = f"queued {minutes:.0f} min for a runner labelled {', '.join(self.labels)}"
            elif f.run_id is None:
                out[step_id] = "dispatched; waiting for GitHub to create the run"
        return out

    def wake(self, event: RunEvent | None = None) -> bool:
        """A webhook about one of our runs (any, without `event`) arrived: poll it now, not at its next interval."""
        now = self.clock()
        hit = False
        for flight in list(self._flights.values()):
            if event is None or flight.concerns(event):
                flight.due, flight.interval, hit = now, self.limits.poll_s, True
        if hit:
            self._wake.set()
        return hit

    def submit(self, spec: StepSpec) -> None:
        flight = Flight(spec, spec.ref or new_ref(), _now(), self.clock())
        self._flights[spec.step_id] = flight
        self._dispatch(flight)

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        """A run dispatched before a restart keeps going on its runner: find it by its ref and wait for it
        (dispatched again if it never appeared: the process may have died before dispatching)."""
        if not spec.ref:
            return False
        since = since if since.tzinfo else since.replace(tzinfo=UTC)  # SQLite hands back naive UTC
        self._flights[spec.step_id] = Flight(spec, spec.ref, since, self.clock())
        return True

    def _dispatch(self, flight: Flight) -> None:
        try:
            run_id = self.actions.dispatch(self.ref, self.inputs_for(flight.spec, flight.correlation))
        except Dispatched:
            return  # a run may exist: found by its run-name, or dispatched again after find_timeout_s
        except Exception as exc:  # noqa: BLE001 -- refused (422: the workflow is not installed, bad inputs): say why
            self._fail(flight, f"dispatch of the step workflow refused: {_reason(exc)}")
            return
        flight.run_id = run_id

    def wait(self, timeout: float | None) -> list[StepResult]:
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            self._poll()
            if self._done or not self._flights:
                out, self._done = self._done, []
                return out
            now = self.clock()
            left = min(f.due for f in self._flights.values()) - now
            if deadline is not None:
                if deadline <= now:
                    return []
                left = min(left, deadline - now)
            if left > 0:
                self._wake.wait(left)
            self._wake.clear()

    def cancel(self, step_ids: list[int]) -> None:
        for step_id in step_ids:
            flight = self._flights.pop(step_id, None)
            if flight is not None:
                self._cancel_runs(flight)

    def close(self) -> None:
        """Runs still in flight are cancelled: nobody will read their results (a thread in wait() returns)."""
        self.cancel(list(self._flights))
        self._wake.set()

    # -- polling --

    def _poll(self) -> None:
        now = self.clock()
        for flight in list(self._flights.values()):
            if flight.due > now:
                continue
            try:
                self._check(flight)
            except Exception as exc:  # noqa: BLE001 -- GitHub hiccup: look again at the next poll
                flight.status = f"cannot read the run: {_reason(exc)}"
                flight.seen = None
            self._schedule(flight, now)

    def _schedule(self, flight: Flight, now: float) -> None:
        """Poll again after poll_s when the run moved, else after twice the last wait (up to idle_poll_s)."""
        seen = (flight.run_id, flight.status)
        if seen != flight.seen or flight.run_id is None:
            flight.interval = self.limits.poll_s
        else:
            flight.interval = min(max(flight.interval, self.limits.poll_s) * 2, self.limits.idle_cap_s)
        flight.seen, flight.due = seen, now + flight.interval

    def _check(self, flight: Flight) -> None:
        if flight.run_id is None:
            self._find(flight)
            return
        state = self.actions.state(flight.run_id)
        flight.url = state.html_url
        flight.status = state.status
        if state.status in ("queued", "pending", "waiting", "requested"):
            if flight.queued_since is None:
                flight.queued_since = self.clock()
            if self.clock() - flight.queued_since > self.limits.queue_timeout_s:
                self.actions.cancel(flight.run_id)
                self._fail(
                    flight,
                    f"no runner labelled {', '.join(self.labels)} started run {flight.run_id} within "
                    f"{self.limits.queue_timeout_s / 60:g} min ({state.html_url})",
                )
            return
        flight.queued_since = None
        if state.status != "completed":
            return
        if state.conclusion in ("success", "failure"):
            self._read_result(flight, state.conclusion)
        elif state.conclusion == "timed_out":
            self._fail(flight, f"run {flight.run_id} timed out on {state.runner or 'its runner'} ({state.html_url})")
        elif state.conclusion == "cancelled":
            self._fail(
                flight,
                f"run {flight.run_id} was cancelled on GitHub (by hand, or its runner went away) ({state.html_url})",
            )
        else:
            self._fail(flight, f"run {flight.run_id} concluded {state.conclusion} ({state.html_url})")

    def _find(self, flight: Flight) -> None:
        found = self.actions.find_runs(f"[{flight.correlation}]", flight.submitted)
        if found:
            flight.run_id = found[0]
            for extra in found[1:]:  # a retried dispatch that created a second run: stop it
                self.actions.cancel(extra)
            return
        if self.clock() - flight.submitted_mono < self.limits.find_timeout_s:
            return
        if flight.dispatches > self.limits.redispatch:
            self._fail(flight, f"the step workflow was dispatched {flight.dispatches} times and no run appeared")
            return
        flight.dispatches += 1
        flight.submitted, flight.submitted_mono = _now(), self.clock()
        self._dispatch(flight)

    def _read_result(self, flight: Flight, conclusion: str) -> None:
        spec = flight.spec
        name = ARTIFACT.format(step=spec.step_id)
        try:
            data = self.actions.artifact_file(flight.run_id, name, "result.json")
        except ArtifactUnreadable as exc:  # tried a bounded number of times already: infra, not another poll
            self._fail(flight, f"run {flight.run_id} concluded {conclusion}; its artifact {name}: {exc} ({flight.url})")
            return
        if data is None:
            self._fail(
                flight,
                f"run {flight.run_id} concluded {conclusion} without the artifact {name}/result.json ({flight.url})",
            )
            return
        try:
            got = result_json.from_json(json.loads(data), spec.step_id, spec.sha)
        except (ResultError, ValueError) as exc:
            self._fail(flight, f"run {flight.run_id}: invalid result.json: {exc} ({flight.url})")
            return
        self._flights.pop(spec.step_id, None)
        runner = f"{got.runner} ({flight.url})" if flight.url else got.runner
        self._done.append(replace(got, sha=spec.sha, runner=runner))

    def _fail(self, flight: Flight, reason: str) -> None:
        self._flights.pop(flight.spec.step_id, None)
        now = _now()
        self._done.append(
            StepResult(
                flight.spec.step_id,
                flight.spec.sha,
                None,
                None,
                reason,
                "github-actions",
                (now - flight.submitted).total_seconds(),
                "",
                flight.submitted,
                now,
            )
        )

    def _cancel_runs(self, flight: Flight) -> None:
        ids = [flight.run_id] if flight.run_id else []
        if not ids:
            try:
                ids = self.actions.find_runs(f"[{flight.correlation}]", flight.submitted)
            except Exception:  # noqa: BLE001 -- best effort: an unfound run finishes and is ignored
                ids = []
        for run_id in ids:
            try:
                self.actions.cancel(run_id)
            except Exception:  # noqa: BLE001 -- already gone or GitHub down: its result is ignored anyway
                pass


def _reason(exc: Exception) -> str:
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and data.get("message"):
        return f"{getattr(exc, 'status', '')} {data['message']}".strip()
    return str(exc) or type(exc).__name__
