"""The sandbox's FastAPI app: GitHub's REST layout at the root, git smart HTTP at /{owner}/{repo}.git --
the resource routers of sandbox/api composed, behind the fault injector and the credentials check."""

from __future__ import annotations

import asyncio
import base64
import functools
import re

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError

from .api import actions, apps, checks, git_blobs, git_http, issues, pull_files, pull_merge, pulls, repos
from .api.errors import ApiError, respond
from .lost_answers import install as lose_answers
from .ratelimit import rate_and_etag
from .render import DOCS
from .state import SandboxState

GIT_ROUTE = re.compile(r"^/[^/]+/[^/]+\.git(/|$)")
# registration order is matching order: git smart HTTP's catch-all `/{owner}/{repo}.git/...` comes last
ROUTERS = (
    repos.router,
    issues.router,
    pulls.router,
    pull_files.router,
    git_blobs.router,
    pull_merge.router,
    checks.router,
    apps.router,
    actions.router,
    git_http.router,
)


def _token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    scheme = scheme.lower()
    if scheme in ("token", "bearer"):
        return value.strip() or None
    if scheme == "basic":
        try:
            user, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except ValueError:
            return None
        return password or user or None
    return None


def create_sandbox(state: SandboxState) -> FastAPI:
    app = FastAPI(title="GitHub sandbox", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.sandbox = state

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError):
        body = {"message": exc.message, "documentation_url": exc.doc}
        if exc.errors is not None:
            body["errors"] = exc.errors
        return respond(exc.status, body, exc.headers)

    # inside the credentials check, which sets the caller's login
    app.middleware("http")(functools.partial(rate_and_etag, book=state.rates))

    @app.middleware("http")
    async def auth_and_faults(request: Request, call_next):
        path = request.url.path
        is_git = bool(GIT_ROUTE.match(path))
        kind = state.faults.draw(request.method, path, git=is_git)
        if kind == "slow":
            await asyncio.sleep(state.faults.slow_seconds)
        elif kind == "5xx":
            status = 502 if len(state.faults.injected) % 2 else 503
            message = "Server Error" if status == 502 else "Service Unavailable"
            return respond(status, {"message": message, "documentation_url": DOCS})
        elif kind in ("403-ratelimit", "429"):
            return respond(
                403 if kind == "403-ratelimit" else 429,
                {
                    "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
                    "again. If you reach out to GitHub Support for help, please include the request ID.",
                    "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                    "#about-secondary-rate-limits",
                },
                {"Retry-After": "1"},
            )
        token = _token(request)
        app_jwt = state.apps.app_for(token)
        if app_jwt is not None:  # a GitHub App's JWT: only the app endpoints accept it
            request.state.app, request.state.login = app_jwt, None
            return await call_next(request)
        user = state.user_for_token(token) if token else None
        if user is None:
            headers = {"WWW-Authenticate": 'Basic realm="GitHub sandbox"'} if is_git else None
            return respond(401, {"message": "Bad credentials", "documentation_url": DOCS}, headers)
        request.state.login, request.state.token = user.login, token
        response = await call_next(request)
        response.headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
        response.headers.setdefault("X-RateLimit-Limit", "5000")
        response.headers.setdefault("X-RateLimit-Remaining", "4999")
        return response

    for router in ROUTERS:
        app.include_router(router)
    app.middleware("http")(actions.learn_base_url)  # added last: the outermost, before the credentials check

    @app.exception_handler(404)
    async def unknown_route(request: Request, exc):
        return respond(404, {"message": "Not Found", "documentation_url": DOCS})

    @app.exception_handler(405)
    async def bad_method(request: Request, exc):
        return respond(404, {"message": "Not Found", "documentation_url": DOCS})

    @app.exception_handler(RequestValidationError)
    async def bad_params(request: Request, exc: RequestValidationError):
        if any(e.get("loc", ("",))[0] == "path" for e in exc.errors()):
            return respond(404, {"message": "Not Found", "documentation_url": DOCS})
        return respond(
            422,
            {
                "message": "Validation Failed",
                "documentation_url": DOCS,
                "errors": [{"code": "invalid", "field": str(e.get("loc", ["", ""])[-1])} for e in exc.errors()],
            },
        )

    lose_answers(app, state)  # outermost of all: a request done in full whose answer is lost (sandbox/lost_answers.py)
    return app
