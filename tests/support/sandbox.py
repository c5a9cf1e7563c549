"""Contract checking for the GitHub sandbox: every HTTP exchange made with `requests` (PyGithub's
transport) is recorded and validated against GitHub's OpenAPI description with openapi-core. And the
end-to-end tests' shared reads of the sandbox and their one wait on the bot (`wait_for`, `BotWatch`)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

import httpx
import requests
import sqlalchemy
from openapi_core import OpenAPI
from openapi_core.contrib.requests import (
    RequestsOpenAPIRequest,
    RequestsOpenAPIResponse,
)
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_schema_validator import OAS30Validator
from sqlalchemy.pool import NullPool

from bot.cli.demo_watch import failing_steps
from sandbox.schema import SPEC_PATH
from tests.support import deadline as test_deadline

SPEC = SPEC_PATH  # GitHub's description, cut to what the bot calls: the one copy, packaged with the sandbox
SERVED_PREFIXES_EXCLUDED = (
    "/repos/{owner}/{repo}/actions/",
    "/app/installations/",
    "/repos/{owner}/{repo}/installation",
)


def load_spec() -> dict:
    return add_operations_beyond_the_subset(json.loads(SPEC.read_text()))


def add_operations_beyond_the_subset(spec: dict) -> dict:
    """Operations the bot calls that the subset lacks, described as in GitHub's full description:
    issues/get-comment (PyGithub's `Repository.get_issue_comment`, used by the forge before reacting) and
    issues/list-for-repo (the forge's lookup of an issue it may have just opened: search lags behind) and
    pulls/list-files (the follow-up finder reads a candidate PR's changed files)."""
    path = spec["paths"].setdefault("/repos/{owner}/{repo}/issues/comments/{comment_id}", {})
    if "get" not in path:
        params = [
            {"$ref": "#/components/parameters/owner"},
            {"$ref": "#/components/parameters/repo"},
            {"$ref": "#/components/parameters/comment-id"},
        ]
        path["get"] = {
            "operationId": "issues/get-comment",
            "parameters": params,
            "responses": {
                "200": {
                    "description": "Response",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/issue-comment"}}},
                },
                "404": {"$ref": "#/components/responses/not_found"},
            },
        }
    listing = spec["paths"].setdefault("/repos/{owner}/{repo}/issues", {})
    if "get" not in listing:  # issues/list-for-repo: the forge reads the newest open issues for its marker
        choice = lambda name, values, default: {  # noqa: E731
            "in": "query",
            "name": name,
            "required": False,
            "schema": {"default": default, "enum": values, "type": "string"},
        }
        listing["get"] = {
            "operationId": "issues/list-for-repo",
            "parameters": [
                {"$ref": "#/components/parameters/owner"},
                {"$ref": "#/components/parameters/repo"},
                choice("state", ["open", "closed", "all"], "open"),
                choice("sort", ["created", "updated", "comments"], "created"),
                {"$ref": "#/components/parameters/direction"},
                {"$ref": "#/components/parameters/per-page"},
                {"$ref": "#/components/parameters/page"},
            ],
            "responses": {"200": _list_of("issue"), "404": {"$ref": "#/components/responses/not_found"}},
        }
    files = spec["paths"].setdefault("/repos/{owner}/{repo}/pulls/{pull_number}/files", {})
    if "get" not in files:  # pulls/list-files: 30 a page by default, at most 100, at most 3000 files
        files["get"] = {
            "operationId": "pulls/list-files",
            "parameters": [
                {"$ref": "#/components/parameters/owner"},
                {"$ref": "#/components/parameters/repo"},
                {"$ref": "#/components/parameters/pull-number"},
                {"$ref": "#/components/parameters/per-page"},
                {"$ref": "#/components/parameters/page"},
            ],
            "responses": {
                "200": _list_of("diff-entry"),
                "422": {"$ref": "#/components/responses/validation_failed"},
                "500": {"$ref": "#/components/responses/internal_error"},
                "503": {"$ref": "#/components/responses/service_unavailable"},
            },
        }
    return spec


def _list_of(schema: str) -> dict:
    """A 200 answer that is an array of the component `schema`."""
    items = {"$ref": f"#/components/schemas/{schema}"}
    return {"description": "Response", "content": {"application/json": {"schema": {"type": "array", "items": items}}}}


def allow_documented_nulls(node):
    """GitHub's description marks fields `nullable: true` that GitHub does send as null, but in two
    forms OpenAPI 3.0.3 validators do not read as allowing null: an `enum` without null in it
    (check-run `conclusion`) and `nullable` beside `oneOf`/`anyOf` (commit `author`). Make null explicit
    there -- and nowhere else, so every other field is checked as described."""
    if isinstance(node, dict):
        if node.get("nullable") is True:
            if "enum" in node and None not in node["enum"]:
                node["enum"] = [*node["enum"], None]
            for key in ("oneOf", "anyOf"):
                if key in node and not any(alt.get("enum") == [None] for alt in node[key]):
                    node[key] = [*node[key], {"nullable": True, "enum": [None]}]
        for value in node.values():
            allow_documented_nulls(value)
    elif isinstance(node, list):
        for value in node:
            allow_documented_nulls(value)
    return node


@dataclass
class Operation:
    id: str
    method: str
    template: str
    regex: re.Pattern
    params: list[str]
    statuses: set[str]


def operations(spec: dict, excluded: tuple[str, ...] = SERVED_PREFIXES_EXCLUDED) -> list[Operation]:
    ops = []
    for template, item in spec["paths"].items():
        if template.startswith(excluded):
            continue
        params = re.findall(r"{(\w+)}", template)
        pattern = re.escape(template)
        for i, name in enumerate(params):
            # the last parameter of a ref/basehead/sha path may hold slashes (heads/main, a...b)
            greedy = i == len(params) - 1 and name in ("ref", "basehead")
            pattern = pattern.replace(re.escape(f"{{{name}}}"), "(?P<{}>{})".format(name, ".+" if greedy else "[^/]+"))
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                ops.append(
                    Operation(
                        op["operationId"],
                        method.upper(),
                        template,
                        re.compile(f"^{pattern}$"),
                        params,
                        set(op["responses"]),
                    )
                )
    # specific templates first: /commits/{sha}/pulls before /commits/{ref}
    ops.sort(key=lambda o: (-o.template.count("/"), o.template))
    return ops


@dataclass
class Exchange:
    method: str
    url: str
    status: int
    operation: str | None
    error: str | None = None  # None: valid


@dataclass
class ContractChecker:
    base_url: str
    spec: dict = field(default_factory=load_spec)
    exchanges: list[Exchange] = field(default_factory=list)
    excluded: tuple[str, ...] = SERVED_PREFIXES_EXCLUDED  # operations other tests check

    def __post_init__(self) -> None:
        self.spec = allow_documented_nulls(dict(self.spec, servers=[{"url": self.base_url}]))
        self.api = OpenAPI.from_dict(self.spec)
        self.ops = operations(self.spec, self.excluded)
        schemas = self.spec["components"]["schemas"]
        self.error_validators = {
            "basic": OAS30Validator(schemas["basic-error"]),
            "validation": OAS30Validator(schemas["validation-error"]),
        }

    def match(self, method: str, path: str) -> tuple[Operation, dict] | None:
        for op in self.ops:
            m = op.regex.match(path)
            if op.method == method and m:
                return op, m.groupdict()
        return None

    def check(self, request: requests.PreparedRequest, response: requests.Response) -> Exchange:
        parts = urlsplit(request.url)
        path = parts.path
        found = self.match(request.method, path)
        ex = Exchange(request.method, request.url, response.status_code, found[0].id if found else None)
        if found is None:
            ex.error = f"no operation of the OpenAPI subset matches {request.method} {path}"
        else:
            op, values = found
            canonical = op.template
            for name, value in values.items():
                canonical = canonical.replace(f"{{{name}}}", quote(value, safe=""))
            url = self.base_url + canonical + (f"?{parts.query}" if parts.query else "")
            prepared = requests.Request(request.method, url, headers=dict(request.headers), data=request.body).prepare()
            try:
                self.api.validate_response(RequestsOpenAPIRequest(prepared), RequestsOpenAPIResponse(response))
            except ResponseNotFound:
                ex.error = self.check_undeclared_error(response)
            except Exception as exc:  # noqa: BLE001 -- any validation failure is reported
                ex.error = describe(exc)
            if ex.error is None and response.content:
                foreign = sorted(foreign_urls(response.json(), self.base_url))
                if foreign:
                    ex.error = f"URLs not built from the sandbox's base URL: {foreign[:5]}"
        self.exchanges.append(ex)
        return ex

    def check_undeclared_error(self, response: requests.Response) -> str | None:
        """A status the operation does not declare: it must still be one of GitHub's error shapes."""
        if response.status_code < 400:
            return f"undeclared success status {response.status_code}"
        try:
            body = response.json()
        except ValueError:
            return "error response without a JSON body"
        kind = "validation" if response.status_code == 422 else "basic"
        errors = [e.message for e in self.error_validators[kind].iter_errors(body)]
        return "; ".join(errors) or None

    def failures(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.error]

    def covered(self) -> dict[str, set[int]]:
        out: dict[str, set[int]] = {}
        for e in self.exchanges:
            if e.operation and not e.error:
                out.setdefault(e.operation, set()).add(e.status)
        return out


USER_TEXT = {"body", "title", "message", "patch", "target_url", "details_url", "documentation_url", "summary", "text"}


def foreign_urls(node, base: str, key: str = "") -> set[str]:
    """http(s) URLs in a response body that do not start with the sandbox's own base URL (user-written
    text and GitHub's documentation links aside)."""
    if isinstance(node, dict):
        return set().union(*(foreign_urls(v, base, k) for k, v in node.items())) if node else set()
    if isinstance(node, list):
        return set().union(*(foreign_urls(v, base, key) for v in node)) if node else set()
    if isinstance(node, str) and node.startswith(("http://", "https://")) and key not in USER_TEXT:
        return set() if node.startswith(base + "/") or node == base else {f"{key}={node}"}
    return set()


def describe(exc: BaseException) -> str:
    """A short account of a validation failure: each schema error with its JSON path."""
    errors = []
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for err in getattr(exc, "schema_errors", None) or []:
            for leaf in _leaves(err):
                where = "/".join(str(p) for p in leaf.absolute_path)
                errors.append(f"at {where or '.'}: {leaf.message[:300]}")
        exc = exc.__cause__ or exc.__context__
    return "; ".join(errors[:10]) or "invalid"


def _leaves(err):
    if err.context:
        for sub in err.context:
            yield from _leaves(sub)
    else:
        yield err


def install_recorder(monkeypatch, checker: ContractChecker) -> None:
    """Route every `requests` exchange with the sandbox through `checker`."""
    original = requests.Session.send

    def send(self, request, **kwargs):
        response = original(self, request, **kwargs)
        if request.url.startswith(checker.base_url):
            response.content  # noqa: B018 -- read the body before validating it
            checker.check(request, response)
        return response

    monkeypatch.setattr(requests.Session, "send", send)


# -- reading the sandbox, waiting on the bot -------------------------------------------------------

# The tests' own reads of the sandbox and the bot go through one client: httpx.get builds a client per call, and with
# it an SSL context loading the CA bundle (about 20 ms of CPU), and a story's waits poll hundreds of times (a tenth
# of a story's own CPU went there). No keep-alive: a server stopped and started again on its port is met afresh.
HTTP = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))

# What GitHub (and the sandbox's injected faults) answer when a client should try again.
TRANSIENT = {429, 502, 503}


def github_get(base: str, token: str, path: str, **params):
    """GET one sandbox resource and return its JSON. A transient answer (5xx, 429, a secondary rate
    limit) is tried again a few times, as any GitHub client does; any other non-200 raises, so a check
    that "nothing was opened" cannot pass because the endpoint failed."""
    for _ in range(8):
        answer = HTTP.get(base + path, params=params, headers={"Authorization": f"token {token}"}, timeout=10)
        transient = answer.status_code in TRANSIENT or (answer.status_code == 403 and "rate limit" in answer.text)
        if not transient:
            break
        time.sleep(0.2)
    assert answer.status_code == 200, f"GET {path}: {answer.status_code} {answer.text[:300]}"
    return answer.json()


@dataclass
class BotWatch:
    """What a wait on the bot looks at besides its own condition: the bot's store, whether the bot still
    runs, and its log; so a wait fails as soon as what it awaits can no longer come, and says why."""

    db: str  # the bot's store
    alive: Callable[[], bool]  # the bot (every replica) still runs
    logs: Sequence[Path] = ()

    def __post_init__(self) -> None:
        self.engine = sqlalchemy.create_engine(self.db, poolclass=NullPool)  # holds no connection between polls

    def _rows(self, sql: str, **params) -> list:
        with self.engine.connect() as conn:
            if not sqlalchemy.inspect(conn).has_table("jobs"):
                return []  # the bot has not created its tables yet
            return conn.execute(sqlalchemy.text(sql), params).all()

    def settled(self) -> bool:
        """No job is queued or running: whatever the bot was doing has landed."""
        return not self._rows("SELECT id FROM jobs WHERE state IN ('queued', 'running')")

    def hopeless(self, expect: Iterable[str]) -> str | None:
        """Why the awaited state can no longer come, or None while it still can."""
        if not self.alive():
            return "the bot exited"
        failed = self._rows("SELECT id, handler, error FROM jobs WHERE state = 'failed' ORDER BY id")
        if failed:
            return f"job {failed[0][0]} ({failed[0][1]}) failed for good: {failed[0][2]}"
        bisections = self._rows("SELECT id, status FROM bisections ORDER BY id")
        ended = [(i, s) for i, s in bisections if s is not None and s not in expect]
        if ended:
            return f"bisection #{ended[0][0]} ended {ended[0][1]} (awaited: {', '.join(expect)})"
        if bisections and all(s is not None for _, s in bisections) and self.settled():
            return "every bisection has ended and the bot has no job left to run"
        return None

    def report(self) -> str:
        """The bisections' status and outcome, their first failing steps' reasons, jobs that failed, the log's tail."""
        lines = []
        for i, status, phase, outcome, revert_error in self._rows(
            "SELECT id, status, phase, outcome, revert_error FROM bisections ORDER BY id"
        ):
            outcome = json.loads(outcome) if isinstance(outcome, str) else outcome or {}
            lines.append(
                f"bisection #{i}: status {status or 'unfinished'}, phase {phase}"
                + "".join(
                    f"; {text}"
                    for text in (outcome.get("message"), outcome.get("revert_refused"), revert_error)
                    if text
                )
            )
            steps = self._rows(
                "SELECT kind, sha, verdict, state, infra_reason, log_tail FROM steps "
                "WHERE bisection_id = :b ORDER BY id",
                b=i,
            )
            lines += [f"  {reason}" for reason in failing_steps(steps)]  # as the demo reports them
        for i, handler, state, attempts, error in self._rows(
            "SELECT id, handler, state, attempts, error FROM jobs WHERE error IS NOT NULL ORDER BY id LIMIT 5"
        ):
            lines.append(f"job {i} ({handler}): {state} after {attempts} attempt(s): {error}")
        for log in self.logs:
            text = log.read_text(errors="replace") if log.exists() else "(no log)"
            lines.append(f"--- the last lines of {log.name} ---\n{text[-3000:]}")
        return "\n".join(lines) or "the bot's store holds nothing yet"


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 180,
    bot: BotWatch | None = None,
    expect: Iterable[str] = ("found",),
):
    """Poll `predicate` until it returns something truthy, and return that. With `bot`, fail at once (not
    at the timeout) when the bot exited, a job failed for good, a bisection ended with a status not in
    `expect`, or every bisection ended with nothing left to run; the failure carries `bot.report()`."""
    expect = tuple(expect)
    timeout, by_limit = test_deadline.bounded(timeout)
    deadline = time.monotonic() + timeout
    while True:
        if value := predicate():
            return value
        why = bot.hopeless(expect) if bot else None
        if why:
            # Hopeless twice, a second apart: GitHub's answers and the store's rows are not written in one
            # transaction, so one reading can fall between a write and the next.
            time.sleep(1.0)
            if value := predicate():
                return value
            if bot.hopeless(expect):
                raise AssertionError(f"{why}\n{bot.report()}")
            continue
        if time.monotonic() >= deadline:
            limit = " (all the test's own limit leaves)" if by_limit else ""
            raise AssertionError(f"timed out after {timeout:.0f} s{limit}" + (f"\n{bot.report()}" if bot else ""))
        time.sleep(0.5)
