"""Webhook deliveries of `Actions`: signed `workflow_run` and `workflow_job` events, in order, on one
delivery thread, retried, recorded in `deliveries` -- mixed into `Actions`."""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import time
import uuid

from ..render import Renderer
from .model import Hook, Job, Run, _now
from .render import render_job, render_run, render_workflow


class OutboxMixin:
    """The webhook side of `Actions` (engine.py)."""

    def add_hook(
        self, url: str, secret: str, events: tuple[str, ...] | list[str] = ("workflow_run",), repo: str | None = None
    ) -> Hook:
        """Deliver `events` (`workflow_run`, `workflow_job`) of `repo` (None: every repository) to `url`."""
        hook = Hook(self.state.new_id(), url, secret, tuple(events), repo.lower() if repo else None)
        with self.lock:
            self.hooks.append(hook)
        return hook

    def _notify(self, run: Run, action: str, event: str = "workflow_run", job: Job | None = None) -> None:
        """Deliver a `workflow_run` event of the run (none for a re-run attempt unless `rerun_webhooks`: REALITY.md,
        a re-run's completion may never come as a webhook) or a `workflow_job` event of one job."""
        if event == "workflow_run" and run.attempt > 1 and not self.rerun_webhooks:
            return
        with self.lock:
            hooks = [h for h in self.hooks if event in h.events and h.repo in (None, run.repo)]
        if not hooks:
            return
        payload = self.event_payload(run, action) if job is None else self.job_payload(run, job, action)
        self._enqueue(hooks, event, payload)

    def deliver(self, repo: str, event: str, payload: dict) -> None:
        """Deliver another event of `repo` (a `pull_request` one, from the REST API) to the hooks that subscribe it."""
        with self.lock:
            hooks = [h for h in self.hooks if event in h.events and h.repo in (None, repo.lower())]
        if hooks:
            self._enqueue(hooks, event, payload)

    def _enqueue(self, hooks: list[Hook], event: str, payload: dict) -> None:
        for hook in hooks:
            self._outbox.put((hook, event, payload))
        with self.lock:
            if self._sender is None or not self._sender.is_alive():
                self._sender = threading.Thread(target=self._send_loop, name="actions-hooks", daemon=True)
                self._sender.start()

    def event_payload(self, run: Run, action: str) -> dict:
        repo = self.state.repo(run.repo)
        rr = Renderer(self.state, self.base_url or "http://127.0.0.1")
        wf = self.workflow_of(run)
        return {
            "action": action,
            "workflow_run": render_run(rr, wf, repo, run),
            "workflow": render_workflow(rr, repo, wf),
            "repository": hook_repository(rr, repo),
            "sender": rr.user(run.actor),
        }

    def job_payload(self, run: Run, job: Job, action: str) -> dict:
        """A `workflow_job` event (queued, in_progress, completed)."""
        repo = self.state.repo(run.repo)
        rr = Renderer(self.state, self.base_url or "http://127.0.0.1")
        return {
            "action": action,
            "workflow_job": render_job(rr, self.workflow_of(run), repo, run, job),
            "repository": hook_repository(rr, repo),
            "sender": rr.user(run.actor),
        }

    def _send_loop(self) -> None:
        import requests

        while True:
            try:
                hook, event, payload = self._outbox.get(timeout=30)
            except queue.Empty:
                with self.lock:
                    if self._outbox.empty():
                        self._sender = None
                        return
                continue

            body = json.dumps(payload).encode()
            delivery = {
                "guid": str(uuid.uuid4()),
                "hook_id": hook.id,
                "url": hook.url,
                "event": event,
                "action": payload.get("action"),
                "run_id": (payload.get("workflow_run") or {}).get("id")
                or (payload.get("workflow_job") or {}).get("run_id"),
                "status": None,
                "attempts": 0,
                "error": None,
                "delivered_at": None,
                "payload": payload,
            }
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "GitHub-Hookshot/sandbox",
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": delivery["guid"],
                "X-GitHub-Hook-ID": str(hook.id),
                "X-GitHub-Hook-Installation-Target-Type": "repository",
                "X-GitHub-Hook-Installation-Target-ID": str(payload["repository"]["id"]),
                "X-Hub-Signature-256": signature(hook.secret.encode(), body),
            }
            delivery["headers"] = headers
            for attempt, delay in enumerate((*self.retry_delays, None), start=1):
                delivery["attempts"] = attempt
                try:
                    resp = requests.post(hook.url, data=body, headers=headers, timeout=10)
                    delivery["status"], delivery["error"] = resp.status_code, None
                    break
                except requests.RequestException as exc:
                    delivery["error"] = f"{type(exc).__name__}: {exc}"
                    if delay is None:
                        break
                    time.sleep(delay)
            delivery["delivered_at"] = _now()
            with self.lock:
                self.deliveries.append(delivery)


def signature(secret: bytes, body: bytes) -> str:
    """GitHub's webhook signature header value: `sha256=` and the hex HMAC-SHA256 of the raw body, keyed by
    the hook's secret (GitHub docs, "Validating webhook deliveries")."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def hook_repository(rr: Renderer, repo) -> dict:
    """A webhook's `repository`: the REST repository, plus `custom_properties` (an object, `{}` for a repository
    without any), which GitHub's webhook payloads carry (octokit/webhooks examples)."""
    return {**rr.repo(repo, schema="repository"), "custom_properties": {}}
