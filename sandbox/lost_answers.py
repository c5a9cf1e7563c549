"""A fault GitHub has and the status faults cannot show: the request is done, and its answer is lost.

GitHub processes a POST, then the connection drops (a timeout, a proxy, a reset) before the client reads the
answer: the comment, issue, PR or workflow run exists, and the client does not know it. This middleware runs the
request to its end through the whole app, swallows the answer, and aborts the connection, so the client sees
"Remote end closed connection without response" -- for the requests that match a rule (method + path regex), as
many times as the rule says.

Rules are set from a test (`lost_answers(state).drop("POST", r"/issues/\\d+/comments$", times=1)`) or over HTTP
by a sandbox run apart (`POST /_sandbox/lost-answers {"method", "path", "times"}`; `GET` lists what was dropped,
`DELETE` clears). The admin path is the sandbox's own, not GitHub's, and takes no credentials: the sandbox serves
a test on this machine.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

ADMIN = "/_sandbox/lost-answers"


@dataclass
class Rule:
    method: str
    path: re.Pattern
    times: int


@dataclass
class LostAnswers:
    rules: list[Rule] = field(default_factory=list)
    dropped: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, the status it would have had)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def drop(self, method: str, path: str, times: int = 1) -> None:
        """Lose the answer of the next `times` requests of `method` whose path matches the regex `path`."""
        if times < 1:
            raise ValueError("times must be at least 1")
        with self._lock:
            self.rules.append(Rule(method.upper(), re.compile(path), times))

    def clear(self) -> None:
        with self._lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> bool:
        """Whether this request's answer is to be lost (counts the rule down)."""
        with self._lock:
            for rule in self.rules:
                if rule.method == method and rule.path.search(path):
                    rule.times -= 1
                    if rule.times <= 0:
                        self.rules.remove(rule)
                    return True
        return False


_BY_STATE: weakref.WeakKeyDictionary[Any, LostAnswers] = weakref.WeakKeyDictionary()


def lost_answers(state: Any) -> LostAnswers:
    """The lost-answer rules of one sandbox (its SandboxState)."""
    found = _BY_STATE.get(state)
    if found is None:
        found = _BY_STATE[state] = LostAnswers()
    return found


class DropAnswers:
    """ASGI middleware, outermost (outside Starlette's error middleware, so `send` is the server's own)."""

    def __init__(self, app, answers: LostAnswers) -> None:
        self.app, self.answers = app, answers

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        method, path = scope["method"], scope["path"]
        if path == ADMIN:
            return await self._admin(method, receive, send)
        if not self.answers.take(method, path):
            return await self.app(scope, receive, send)
        status = [0]

        async def swallow(message) -> None:  # the request is done in full; its answer goes nowhere
            if message["type"] == "http.response.start":
                status[0] = message["status"]

        await self.app(scope, receive, swallow)
        with self.answers._lock:
            self.answers.dropped.append((method, path, status[0]))
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        if transport is None:  # not uvicorn's h11 cycle: raising after no answer is the nearest thing
            raise ConnectionAbortedError(f"sandbox: the answer to {method} {path} is lost")
        transport.abort()  # the connection drops without a status line: the client cannot tell what happened
        for _ in range(3):  # let the server see the connection lost, so it sends no 500 of its own
            await asyncio.sleep(0)

    async def _admin(self, method: str, receive, send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, out = 200, {}
        try:
            if method == "POST":
                rule = json.loads(body or b"{}")
                self.answers.drop(str(rule["method"]), str(rule["path"]), int(rule.get("times", 1)))
                status = 201
            elif method == "DELETE":
                self.answers.clear()
            elif method != "GET":
                status, out = 405, {"message": "GET, POST or DELETE"}
        except (ValueError, KeyError, TypeError, re.error) as exc:
            status, out = 400, {"message": f'a rule is {{"method", "path" (a regex), "times"}}: {exc}'}
        if status < 400:
            out = {"dropped": [list(d) for d in self.answers.dropped], "rules": len(self.answers.rules)}
        data = json.dumps(out).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


def install(app, state: Any) -> None:
    """Wrap `app` (a Starlette/FastAPI app) outermost with the lost-answer middleware of `state`."""
    build = app.build_middleware_stack
    app.build_middleware_stack = lambda: DropAnswers(build(), lost_answers(state))
