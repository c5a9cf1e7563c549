"""The sandbox's FastAPI app: GitHub's REST layout at the root, git smart HTTP at /{owner}/{repo}.git."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from . import gitstore
from .githttp import git_http_backend
from .render import DOCS, Renderer, references
from .schema import conform
from .state import Issue, Reaction, Repo, SandboxState, now_iso

REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale",
                     "timed_out")
GIT_ROUTE = re.compile(r"^/[^/]+/[^/]+\.git(/|$)")


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict] | None = None, doc: str = DOCS,
                 headers: dict | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.errors, self.doc, self.headers = status, message, errors, doc, headers


def not_found() -> ApiError:
    return ApiError(404, "Not Found", doc=f"{DOCS}")


def invalid(errors: list[dict], message: str = "Validation Failed") -> ApiError:
    return ApiError(422, message, errors)


def _json(status: int, body, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(body, status_code=status, headers=headers)


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
        return _json(exc.status, body, exc.headers)

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
            return _json(status, {"message": message, "documentation_url": DOCS})
        elif kind in ("403-ratelimit", "429"):
            return _json(403 if kind == "403-ratelimit" else 429, {
                "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try "
                           "again. If you reach out to GitHub Support for help, please include the request ID.",
                "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
                                     "#about-secondary-rate-limits"}, {"Retry-After": "1"})
        token = _token(request)
        app_jwt = state.apps.app_for(token)
        if app_jwt is not None:  # a GitHub App's JWT: only the app endpoints accept it
            request.state.app, request.state.login = app_jwt, None
            return await call_next(request)
        user = state.user_for_token(token) if token else None
        if user is None:
            headers = {"WWW-Authenticate": 'Basic realm="GitHub sandbox"'} if is_git else None
            return _json(401, {"message": "Bad credentials", "documentation_url": DOCS}, headers)
        request.state.login = user.login
        response = await call_next(request)
        response.headers.setdefault("X-GitHub-Media-Type", "github.v3; format=json")
        response.headers.setdefault("X-RateLimit-Limit", "5000")
        response.headers.setdefault("X-RateLimit-Remaining", "4999")
        return response

    def ctx(request: Request, owner: str, repo: str) -> tuple[Repo, Renderer, str]:
        r = state.repo(f"{owner}/{repo}")
        login = request.state.login
        if r is None or (r.private and login not in r.permissions):
            raise not_found()
        return r, Renderer(state, str(request.base_url)), login

    def need_write(r: Repo, login: str) -> None:
        if r.permissions.get(login) not in ("admin", "maintain", "write"):
            raise ApiError(403, "Resource not accessible by integration")

    def issue_of(r: Repo, number: int) -> Issue:
        issue = r.issues.get(number)
        if issue is None:
            raise not_found()
        return issue

    def pull_of(r: Repo, number: int) -> Issue:
        issue = r.issues.get(number)
        if issue is None or issue.pull is None:
            raise not_found()
        return issue

    async def body_of(request: Request) -> dict | list:
        raw = await request.body()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(400, "Problems parsing JSON")

    def page(request: Request, items: list, default: int = 30) -> tuple[list, dict]:
        try:
            per = max(1, min(100, int(request.query_params.get("per_page", default))))
            num = max(1, int(request.query_params.get("page", 1)))
        except ValueError:
            raise invalid([{"code": "invalid", "message": "page and per_page must be integers"}])
        chunk = items[(num - 1) * per: num * per]
        last = max(1, -(-len(items) // per))
        links = []

        def url(n: int) -> str:
            q = dict(request.query_params)
            q.update(page=str(n), per_page=str(per))
            return f"{str(request.base_url).rstrip('/')}{request.url.path}?{urlencode(q)}"

        if num < last:
            links += [f'<{url(num + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if num > 1:
            links += [f'<{url(1)}>; rel="first"', f'<{url(num - 1)}>; rel="prev"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

    # -- repositories and commits --

    @app.get("/repos/{owner}/{repo}")
    def get_repo(request: Request, owner: str, repo: str):
        r, rr, login = ctx(request, owner, repo)
        return rr.repo(r, login)

    @app.get("/repos/{owner}/{repo}/commits")
    def list_commits(request: Request, owner: str, repo: str, sha: str | None = None, path: str | None = None):
        r, rr, _ = ctx(request, owner, repo)
        start = gitstore.resolve(r.path, sha or r.default_branch)
        if start is None:
            if sha is None:  # an empty repository
                raise ApiError(409, "Git Repository is empty.")
            raise not_found()
        total = int(gitstore.git(r.path, "rev-list", "--count", start, "--", *((path,) if path else ())).strip())
        window, headers = page(request, range(total))
        commits = gitstore.log(r.path, start, max_count=len(window), skip=window.start if len(window) else 0,
                               paths=(path,) if path else ()) if len(window) else []
        items = [rr.commit(r, c) for c in commits]
        return _json(200, items, headers)

    @app.get("/repos/{owner}/{repo}/commits/{commit_sha}/pulls")
    def commit_pulls(request: Request, owner: str, repo: str, commit_sha: str):
        r, rr, _ = ctx(request, owner, repo)
        sha = gitstore.resolve(r.path, commit_sha)
        if sha is None:
            raise ApiError(422, "No commit found for SHA: " + commit_sha, [])
        found = [i for i in state.issues_of(r) if i.pull and
                 (i.pull.merge_commit_sha == sha or (not i.pull.merged and rr.pull_shas(r, i)[0] == sha))]
        found.sort(key=lambda i: -i.number)
        items, headers = page(request, found)
        return _json(200, [rr.pull(r, i, "pull-request-simple") for i in items], headers)

    @app.get("/repos/{owner}/{repo}/commits/{ref:path}")
    def get_commit(request: Request, owner: str, repo: str, ref: str):
        r, rr, _ = ctx(request, owner, repo)
        sha = gitstore.resolve(r.path, ref)
        if sha is None:
            if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
                raise invalid([], f"No commit found for SHA: {ref}")
            raise not_found()
        return rr.commit(r, gitstore.commit(r.path, sha), with_files=True)

    @app.get("/repos/{owner}/{repo}/compare/{basehead:path}")
    def compare(request: Request, owner: str, repo: str, basehead: str):
        r, rr, _ = ctx(request, owner, repo)
        if "..." in basehead:
            base_rev, head_rev = basehead.split("...", 1)
        elif ".." in basehead:
            base_rev, head_rev = basehead.split("..", 1)
        else:
            raise not_found()
        base_rev, head_rev = base_rev.split(":")[-1], head_rev.split(":")[-1]
        base, head = gitstore.resolve(r.path, base_rev), gitstore.resolve(r.path, head_rev)
        if base is None or head is None:
            raise not_found()
        mb = gitstore.merge_base(r.path, base, head) or base
        ahead, behind = gitstore.count(r.path, f"{base}..{head}"), gitstore.count(r.path, f"{head}..{base}")
        status = ("identical" if ahead == behind == 0 else "ahead" if behind == 0 else
                  "behind" if ahead == 0 else "diverged")
        commits = gitstore.log(r.path, f"{mb}..{head}", reverse=True)[:250]
        files = [rr.file(r, head, f) for f in gitstore.files(r.path, mb, head)][:300]
        h = rr.html(r)
        return {
            "url": f"{rr.api(r)}/compare/{basehead}", "html_url": f"{h}/compare/{basehead}",
            "permalink_url": f"{h}/compare/{owner}:{base[:7]}...{owner}:{head[:7]}",
            "diff_url": f"{h}/compare/{basehead}.diff", "patch_url": f"{h}/compare/{basehead}.patch",
            "base_commit": rr.commit(r, gitstore.commit(r.path, base)),
            "merge_base_commit": rr.commit(r, gitstore.commit(r.path, mb)),
            "status": status, "ahead_by": ahead, "behind_by": behind, "total_commits": ahead,
            "commits": [rr.commit(r, c) for c in commits], "files": files,
        }

    # -- git refs --

    @app.get("/repos/{owner}/{repo}/git/ref/{ref:path}")
    def get_ref(request: Request, owner: str, repo: str, ref: str):
        r, rr, _ = ctx(request, owner, repo)
        sha = gitstore.ref_sha(r.path, f"refs/{ref}")
        if sha is None:
            raise not_found()
        return rr.git_ref(r, f"refs/{ref}", sha)

    @app.post("/repos/{owner}/{repo}/git/refs", status_code=201)
    async def create_ref(request: Request, owner: str, repo: str):
        r, rr, login = ctx(request, owner, repo)
        need_write(r, login)
        body = await body_of(request)
        ref, sha = body.get("ref") if isinstance(body, dict) else None, body.get("sha") if isinstance(body, dict) else None
        if not isinstance(ref, str) or not isinstance(sha, str):
            raise invalid([{"resource": "Reference", "field": "ref" if not isinstance(ref, str) else "sha",
                            "code": "missing_field"}], "Invalid request.")
        if not ref.startswith("refs/") or ref.count("/") < 2 or not gitstore.valid_ref(ref):
            raise invalid([], "Reference name is invalid")
        if gitstore.ref_sha(r.path, ref) is not None:
            raise invalid([], "Reference already exists")
        if not re.fullmatch(r"[0-9a-f]{40}", sha) or gitstore.object_type(r.path, sha) is None:
            raise invalid([], "Object does not exist")
        with state.lock:
            gitstore.update_ref(r.path, ref, sha)
        return _json(201, rr.git_ref(r, ref, sha), {"Location": f"{rr.api(r)}/git/{ref}"})

    @app.delete("/repos/{owner}/{repo}/git/refs/{ref:path}", status_code=204)
    def delete_ref(request: Request, owner: str, repo: str, ref: str):
        r, _, login = ctx(request, owner, repo)
        need_write(r, login)
        full = f"refs/{ref}"
        with state.lock:
            if gitstore.ref_sha(r.path, full) is None:
                raise invalid([], "Reference does not exist")
            gitstore.delete_ref(r.path, full)
        return Response(status_code=204)

    # -- issues, comments, reactions, labels, timeline --

    @app.post("/repos/{owner}/{repo}/issues", status_code=201)
    async def create_issue(request: Request, owner: str, repo: str):
        r, rr, login = ctx(request, owner, repo)
        body = await body_of(request)
        title = body.get("title") if isinstance(body, dict) else None
        if title is None or (isinstance(title, str) and not title.strip()):
            raise invalid([{"resource": "Issue", "field": "title", "code": "missing_field"}])
        labels = [str(x) for x in body.get("labels") or []]
        issue = state.add_issue(r.full_name, title=str(title), body=body.get("body"), user=login,
                                labels=labels if r.permissions.get(login) in ("admin", "maintain", "write") else [])
        return _json(201, rr.issue(r, issue), {"Location": f"{rr.api(r)}/issues/{issue.number}"})

    @app.get("/repos/{owner}/{repo}/issues/comments/{comment_id}")
    def get_comment(request: Request, owner: str, repo: str, comment_id: int):
        """issues/get-comment: not in the OpenAPI subset, but PyGithub's `get_issue_comment` (the
        forge's `react`) calls it."""
        r, rr, _ = ctx(request, owner, repo)
        found = state.comments.get(comment_id)
        if found is None or found[0] != r.full_name.lower():
            raise not_found()
        return rr.comment(r, found[1])

    @app.patch("/repos/{owner}/{repo}/issues/comments/{comment_id}")
    async def update_comment(request: Request, owner: str, repo: str, comment_id: int):
        r, rr, login = ctx(request, owner, repo)
        found = state.comments.get(comment_id)
        if found is None or found[0] != r.full_name.lower():
            raise not_found()
        comment = found[1]
        if comment.user != login and r.permissions.get(login) not in ("admin", "maintain"):
            raise ApiError(403, "Resource not accessible by integration")
        body = await body_of(request)
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            raise invalid([{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
        with state.lock:
            comment.body, comment.updated_at = text, now_iso()
        return rr.comment(r, comment)

    @app.post("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
    async def create_reaction(request: Request, owner: str, repo: str, comment_id: int):
        r, rr, login = ctx(request, owner, repo)
        found = state.comments.get(comment_id)
        if found is None or found[0] != r.full_name.lower():
            raise not_found()
        body = await body_of(request)
        content = body.get("content") if isinstance(body, dict) else None
        if content not in REACTIONS:
            raise invalid([{"resource": "Reaction", "field": "content", "code": "invalid"}])
        with state.lock:
            existing = state.reactions.setdefault(comment_id, [])
            for reaction in existing:
                if reaction.user == login and reaction.content == content:
                    return _json(200, rr.reaction(reaction))
            reaction = Reaction(state.new_id(), login, content, now_iso())
            existing.append(reaction)
        return _json(201, rr.reaction(reaction))

    @app.get("/repos/{owner}/{repo}/issues/{issue_number}")
    def get_issue(request: Request, owner: str, repo: str, issue_number: int):
        r, rr, _ = ctx(request, owner, repo)
        return rr.issue(r, issue_of(r, issue_number))

    @app.get("/repos/{owner}/{repo}/issues/{issue_number}/comments")
    def list_comments(request: Request, owner: str, repo: str, issue_number: int):
        r, rr, _ = ctx(request, owner, repo)
        issue_of(r, issue_number)
        items, headers = page(request, state.comments_of(r, issue_number))
        return _json(200, [rr.comment(r, c) for c in items], headers)

    @app.post("/repos/{owner}/{repo}/issues/{issue_number}/comments", status_code=201)
    async def create_comment(request: Request, owner: str, repo: str, issue_number: int):
        r, rr, login = ctx(request, owner, repo)
        issue_of(r, issue_number)
        body = await body_of(request)
        text = body.get("body") if isinstance(body, dict) else None
        if not isinstance(text, str) or not text:
            raise invalid([{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
        comment = state.add_comment(r.full_name, issue_number, user=login, body=text)
        return _json(201, rr.comment(r, comment), {"Location": f"{rr.api(r)}/issues/comments/{comment.id}"})

    @app.post("/repos/{owner}/{repo}/issues/{issue_number}/labels")
    async def add_labels(request: Request, owner: str, repo: str, issue_number: int):
        r, rr, login = ctx(request, owner, repo)
        issue = issue_of(r, issue_number)
        need_write(r, login)
        body = await body_of(request)
        labels = body.get("labels") if isinstance(body, dict) else body
        if isinstance(labels, list):
            labels = [x.get("name") if isinstance(x, dict) else x for x in labels]
        if not isinstance(labels, list) or not labels or not all(isinstance(x, str) and x for x in labels):
            raise invalid([{"resource": "Label", "field": "labels", "code": "invalid"}])
        with state.lock:
            for name in labels:
                if name not in issue.labels:
                    issue.labels.append(name)
            issue.updated_at = now_iso()
        return [rr.label(r, name) for name in issue.labels]

    @app.get("/repos/{owner}/{repo}/issues/{issue_number}/timeline")
    def timeline(request: Request, owner: str, repo: str, issue_number: int):
        r, rr, _ = ctx(request, owner, repo)
        issue_of(r, issue_number)
        events: list[tuple[str, int, dict]] = []
        with state.lock:
            for other in list(r.issues.values()):
                if other.number == issue_number:
                    continue
                texts = [(other.body, other.created_at, other.user)]
                texts += [(c.body, c.created_at, c.user) for c in state.comments_of(r, other.number)]
                hits = [(when, who) for text, when, who in texts if issue_number in references(text, r)]
                if hits:
                    when, who = min(hits)
                    events.append((when, 0, conform({
                        "event": "cross-referenced", "actor": rr.user(who), "created_at": when, "updated_at": when,
                        "source": {"type": "issue", "issue": rr.issue(r, other)}},
                        "timeline-cross-referenced-event", rr.base)))
            for c in state.comments_of(r, issue_number):
                body = rr.comment(r, c)
                body.update(event="commented", actor=rr.user(c.user))
                events.append((c.created_at, c.id, body))
        events.sort(key=lambda e: (e[0], e[1]))
        items, headers = page(request, [e[2] for e in events])
        return _json(200, items, headers)

    # -- pull requests --

    @app.get("/repos/{owner}/{repo}/pulls")
    def list_pulls(request: Request, owner: str, repo: str, head: str | None = None, base: str | None = None,
                   sort: str = "created", direction: str | None = None):
        state_ = request.query_params.get("state", "open")
        r, rr, _ = ctx(request, owner, repo)
        if state_ not in ("open", "closed", "all"):
            raise invalid([{"resource": "PullRequest", "field": "state", "code": "invalid"}])
        pulls = [i for i in state.issues_of(r) if i.pull and (state_ == "all" or i.state == state_)]
        if head:
            h_owner, _, h_ref = head.rpartition(":")
            pulls = [i for i in pulls if i.pull.head == h_ref and (not h_owner or h_owner.lower() == r.owner.lower())]
        if base:
            pulls = [i for i in pulls if i.pull.base == base]
        reverse = (direction or ("asc" if sort == "popularity" else "desc")) == "desc"
        key = {"updated": lambda i: i.updated_at}.get(sort, lambda i: (i.created_at, i.number))
        pulls.sort(key=key, reverse=reverse)
        items, headers = page(request, pulls)
        return _json(200, [rr.pull(r, i, "pull-request-simple") for i in items], headers)

    @app.post("/repos/{owner}/{repo}/pulls", status_code=201)
    async def create_pull(request: Request, owner: str, repo: str):
        r, rr, login = ctx(request, owner, repo)
        need_write(r, login)
        body = await body_of(request)
        if not isinstance(body, dict):
            body = {}
        errors = [{"resource": "PullRequest", "field": f, "code": "missing_field"}
                  for f in ("title", "head", "base") if not body.get(f)]
        if errors and not (errors[0]["field"] == "title" and body.get("issue")):
            raise invalid(errors)
        head = str(body["head"]).rpartition(":")[2]
        base = str(body["base"])
        if gitstore.resolve(r.path, f"refs/heads/{head}") is None:
            raise invalid([{"resource": "PullRequest", "field": "head", "code": "invalid"}])
        if gitstore.resolve(r.path, f"refs/heads/{base}") is None:
            raise invalid([{"resource": "PullRequest", "field": "base", "code": "invalid"}])
        with state.lock:
            dup = next((i for i in r.issues.values() if i.pull and i.state == "open" and i.pull.head == head
                        and i.pull.base == base), None)
            if dup is not None:
                raise invalid([{"resource": "PullRequest", "code": "custom",
                                "message": f"A pull request already exists for {r.owner}:{head}."}])
            if gitstore.count(r.path, f"refs/heads/{base}..refs/heads/{head}") == 0:
                raise invalid([{"resource": "PullRequest", "code": "custom",
                                "message": f"No commits between {base} and {head}"}])
            issue = state.add_pull(r.full_name, title=str(body["title"]), body=body.get("body"), user=login,
                                   head=head, base=base)
            issue.pull.draft = bool(body.get("draft"))
        return _json(201, rr.pull(r, issue), {"Location": f"{rr.api(r)}/pulls/{issue.number}"})

    @app.get("/repos/{owner}/{repo}/pulls/{pull_number}")
    def get_pull(request: Request, owner: str, repo: str, pull_number: int):
        r, rr, _ = ctx(request, owner, repo)
        return rr.pull(r, pull_of(r, pull_number))

    @app.get("/repos/{owner}/{repo}/pulls/{pull_number}/commits")
    def pull_commits(request: Request, owner: str, repo: str, pull_number: int):
        r, rr, _ = ctx(request, owner, repo)
        items, headers = page(request, rr.pull_commits(r, pull_of(r, pull_number)))
        return _json(200, [rr.commit(r, c) for c in items], headers)

    @app.post("/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", status_code=201)
    async def request_reviewers(request: Request, owner: str, repo: str, pull_number: int):
        r, rr, login = ctx(request, owner, repo)
        issue = pull_of(r, pull_number)
        need_write(r, login)
        body = await body_of(request)
        reviewers = body.get("reviewers", []) if isinstance(body, dict) else None
        teams = body.get("team_reviewers", []) if isinstance(body, dict) else None
        if not isinstance(reviewers, list) or not isinstance(teams, list) or not (reviewers or teams):
            raise invalid([{"resource": "PullRequest", "field": "reviewers", "code": "missing_field"}])
        for name in reviewers:
            if name not in r.permissions or name == issue.user:
                raise invalid([], "Reviews may only be requested from collaborators. One or more of the users or "
                                  "teams you specified is not a collaborator of the "
                                  f"{r.full_name} repository.")
        with state.lock:
            for name in reviewers:
                if name not in issue.pull.requested_reviewers:
                    issue.pull.requested_reviewers.append(name)
        return _json(201, rr.pull(r, issue, "pull-request-simple"))

    # -- statuses and check runs --

    @app.post("/repos/{owner}/{repo}/statuses/{sha}", status_code=201)
    async def create_status(request: Request, owner: str, repo: str, sha: str):
        r, rr, login = ctx(request, owner, repo)
        need_write(r, login)
        body = await body_of(request)
        st = body.get("state") if isinstance(body, dict) else None
        if st not in ("error", "failure", "pending", "success"):
            raise invalid([{"resource": "Status", "field": "state", "code": "invalid"}])
        full = gitstore.resolve(r.path, sha)
        if full is None:
            raise invalid([], f"No commit found for SHA: {sha}")
        ident = state.new_id()
        when = now_iso()
        status = {"url": f"{rr.api(r)}/statuses/{full}", "avatar_url": None, "id": ident,
                  "node_id": f"SC_{ident}", "state": st, "description": body.get("description"),
                  "target_url": body.get("target_url"), "context": body.get("context") or "default",
                  "created_at": when, "updated_at": when, "creator": rr.user(login, "nullable-simple-user"),
                  "sha": full}
        with state.lock:
            r.statuses.append(status)
        return _json(201, status)

    def check_body(r: Repo, rr: Renderer, run: dict) -> dict:
        a = rr.api(r)
        body = {**run, "url": f"{a}/check-runs/{run['id']}", "html_url": f"{rr.html(r)}/runs/{run['id']}",
                "node_id": f"CR_{run['id']}", "app": None, "pull_requests": [],
                "check_suite": {"id": run["id"]},
                "output": {"title": None, "summary": None, "text": None, "annotations_count": 0,
                           "annotations_url": f"{a}/check-runs/{run['id']}/annotations", **run.get("output", {})}}
        return conform(body, "check-run", rr.base)

    def check_fields(run: dict, body: dict) -> None:
        for key in ("name", "details_url", "external_id", "started_at", "completed_at", "status", "conclusion"):
            if key in body:
                run[key] = body[key]
        if "output" in body and isinstance(body["output"], dict):
            run["output"] = {k: body["output"].get(k) for k in ("title", "summary", "text") if k in body["output"]}
        if run.get("status") not in CHECK_STATUSES:
            raise invalid([{"resource": "CheckRun", "field": "status", "code": "invalid"}])
        if run.get("conclusion") is not None:
            if run["conclusion"] not in CHECK_CONCLUSIONS:
                raise invalid([{"resource": "CheckRun", "field": "conclusion", "code": "invalid"}])
            run["status"] = "completed"
            run["completed_at"] = run.get("completed_at") or now_iso()
        elif run["status"] == "completed":
            raise invalid([{"resource": "CheckRun", "field": "conclusion", "code": "missing_field"}])

    @app.post("/repos/{owner}/{repo}/check-runs", status_code=201)
    async def create_check_run(request: Request, owner: str, repo: str):
        r, rr, login = ctx(request, owner, repo)
        need_write(r, login)
        body = await body_of(request)
        body = body if isinstance(body, dict) else {}
        missing = [f for f in ("name", "head_sha") if not body.get(f)]
        if missing:
            raise invalid([{"resource": "CheckRun", "field": f, "code": "missing_field"} for f in missing])
        sha = gitstore.resolve(r.path, body["head_sha"])
        if sha is None:
            raise invalid([{"resource": "CheckRun", "field": "head_sha", "code": "invalid"}], "No commit found for SHA: "
                          + body["head_sha"])
        run = {"id": state.new_id(), "head_sha": sha, "status": "queued", "conclusion": None,
               "started_at": now_iso(), "completed_at": None, "details_url": None, "external_id": ""}
        check_fields(run, body)
        with state.lock:
            r.check_runs[run["id"]] = run
        return _json(201, check_body(r, rr, run))

    @app.patch("/repos/{owner}/{repo}/check-runs/{check_run_id}")
    async def update_check_run(request: Request, owner: str, repo: str, check_run_id: int):
        r, rr, login = ctx(request, owner, repo)
        need_write(r, login)
        run = r.check_runs.get(check_run_id)
        if run is None:
            raise not_found()
        body = await body_of(request)
        updated = dict(run)
        check_fields(updated, body if isinstance(body, dict) else {})
        with state.lock:
            run.update(updated)
        return check_body(r, rr, run)

    # -- collaborators, search --

    @app.get("/repos/{owner}/{repo}/collaborators/{username}/permission")
    def collaborator_permission(request: Request, owner: str, repo: str, username: str):
        r, rr, _ = ctx(request, owner, repo)
        if username not in state.users:
            raise not_found()
        role = r.permissions.get(username, "none")
        permission = {"maintain": "write", "triage": "read"}.get(role, role)
        user = rr.user(username, "nullable-collaborator")
        user["permissions"] = {"admin": role == "admin", "maintain": role in ("admin", "maintain"),
                               "push": role in ("admin", "maintain", "write"),
                               "triage": role in ("admin", "maintain", "write", "triage"), "pull": role != "none"}
        user["role_name"] = role
        return {"permission": permission, "role_name": role, "user": user}

    @app.get("/search/issues")
    def search_issues(request: Request):
        q = request.query_params.get("q", "").strip()
        if not q:
            raise invalid([{"resource": "Search", "field": "q", "code": "missing"}])
        rr = Renderer(state, str(request.base_url))
        tokens = re.findall(r'(\S+:"[^"]*"|"[^"]*"|\S+)', q)
        repos, kind, st, labels, authors, words = [], None, None, [], [], []
        for tok in tokens:
            key, sep, value = tok.partition(":")
            value = value.strip('"')
            if sep and key == "repo":
                repos.append(value.lower())
            elif sep and key in ("is", "type") and value in ("pr", "pull-request", "issue"):
                kind = "issue" if value == "issue" else "pr"
            elif sep and key in ("is", "state") and value in ("open", "closed", "merged"):
                st = value
            elif sep and key == "label":
                labels.append(value)
            elif sep and key == "author":
                authors.append(value)
            elif sep and key == "in":
                continue
            else:
                words.append(tok.strip('"').lower())
        found = []
        with state.lock:
            for key_, r in state.repos.items():
                if repos and key_ not in repos:
                    continue
                for issue in r.issues.values():
                    if kind == "pr" and not issue.pull or kind == "issue" and issue.pull:
                        continue
                    if st == "merged" and not (issue.pull and issue.pull.merged):
                        continue
                    if st in ("open", "closed") and issue.state != st:
                        continue
                    if any(lab not in issue.labels for lab in labels) or (authors and issue.user not in authors):
                        continue
                    text = f"{issue.title}\n{issue.body or ''}".lower()
                    if all(w in text for w in words):
                        found.append((r, issue))
        found.sort(key=lambda x: (x[1].created_at, x[1].number), reverse=True)
        items, headers = page(request, found)
        out = []
        for r, issue in items:
            body = rr.issue(r, issue, "issue-search-result-item")
            body["score"] = 1.0
            out.append(body)
        return _json(200, {"total_count": len(found), "incomplete_results": False, "search_type": "lexical",
                              "items": out}, headers)

    # -- GitHub Actions (workflows, dispatches, runs, jobs, logs, artifacts) --

    from .apps import register as register_apps

    register_apps(app, state, renderer=lambda request: Renderer(state, str(request.base_url)), ApiError=ApiError)
    from .actions import register as register_actions

    register_actions(app, state, ctx=ctx, page=page, body_of=body_of, need_write=need_write)

    # -- git smart HTTP --

    @app.api_route("/{owner}/{repo}.git/{path:path}", methods=["GET", "POST"])
    async def git_http(request: Request, owner: str, repo: str, path: str):
        r = state.repo(f"{owner}/{repo}")
        if r is None:
            return Response("Repository not found.\n", status_code=404, media_type="text/plain")
        pushing = path.endswith("git-receive-pack") or request.query_params.get("service") == "git-receive-pack"
        if pushing and r.permissions.get(request.state.login) not in ("admin", "maintain", "write"):
            return Response("Permission denied.\n", status_code=403, media_type="text/plain")
        return await git_http_backend(request, state.root, f"/{r.owner}/{r.name}.git/{path}", request.state.login)

    @app.exception_handler(404)
    async def unknown_route(request: Request, exc):
        return _json(404, {"message": "Not Found", "documentation_url": DOCS})

    @app.exception_handler(405)
    async def bad_method(request: Request, exc):
        return _json(404, {"message": "Not Found", "documentation_url": DOCS})

    from fastapi.exceptions import RequestValidationError

    @app.exception_handler(RequestValidationError)
    async def bad_params(request: Request, exc: RequestValidationError):
        if any(e.get("loc", ("",))[0] == "path" for e in exc.errors()):
            return _json(404, {"message": "Not Found", "documentation_url": DOCS})
        return _json(422, {"message": "Validation Failed", "documentation_url": DOCS,
                           "errors": [{"code": "invalid", "field": str(e.get("loc", ["", ""])[-1])}
                                      for e in exc.errors()]})

    return app
