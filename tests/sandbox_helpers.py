"""Contract checking for the GitHub sandbox: every HTTP exchange made with `requests` (PyGithub's
transport) is recorded and validated against GitHub's OpenAPI description with openapi-core."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

import requests
from openapi_core import OpenAPI
from openapi_core.contrib.requests import (
    RequestsOpenAPIRequest,
    RequestsOpenAPIResponse,
)
from openapi_core.templating.responses.exceptions import ResponseNotFound
from openapi_schema_validator import OAS30Validator

from bot.sandbox.schema import SPEC_PATH

SPEC = SPEC_PATH  # GitHub's description, cut to what the bot calls: the one copy, packaged with the sandbox
SERVED_PREFIXES_EXCLUDED = ("/repos/{owner}/{repo}/actions/", "/app/installations/", "/repos/{owner}/{repo}/installation")


def load_spec() -> dict:
    return add_operations_beyond_the_subset(json.loads(SPEC.read_text()))


def add_operations_beyond_the_subset(spec: dict) -> dict:
    """Operations the bot calls that the subset lacks, described as in GitHub's full description:
    issues/get-comment (PyGithub's `Repository.get_issue_comment`, used by the forge before reacting)."""
    path = spec["paths"].setdefault("/repos/{owner}/{repo}/issues/comments/{comment_id}", {})
    if "get" not in path:
        params = [{"$ref": "#/components/parameters/owner"}, {"$ref": "#/components/parameters/repo"},
                  {"$ref": "#/components/parameters/comment-id"}]
        path["get"] = {
            "operationId": "issues/get-comment", "parameters": params,
            "responses": {
                "200": {"description": "Response",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/issue-comment"}}}},
                "404": {"$ref": "#/components/responses/not_found"}}}
    return spec


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
                ops.append(Operation(op["operationId"], method.upper(), template, re.compile(f"^{pattern}$"),
                                     params, set(op["responses"])))
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
        self.error_validators = {"basic": OAS30Validator(schemas["basic-error"]),
                                 "validation": OAS30Validator(schemas["validation-error"])}

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
            prepared = requests.Request(request.method, url, headers=dict(request.headers),
                                        data=request.body).prepare()
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


USER_TEXT = {"body", "title", "message", "patch", "target_url", "details_url", "documentation_url", "summary",
             "text"}


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
