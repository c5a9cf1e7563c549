"""Pull requests: listing, creation, commits, requested reviewers."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import gitstore
from .body_limit import check_body
from .deps import Access, State, body_of, need_write, page, pull_of
from .errors import ApiError, invalid, respond

router = APIRouter()
REVIEW_DOCS = "https://docs.github.com/rest/pulls/review-requests#request-reviewers-for-a-pull-request"


@router.get("/repos/{owner}/{repo}/pulls")
def list_pulls(
    request: Request,
    access: Access,
    state: State,
    head: str | None = None,
    base: str | None = None,
    sort: str = "created",
    direction: str | None = None,
):
    state_ = request.query_params.get("state", "open")
    r, rr, _ = access
    if state_ not in ("open", "closed", "all"):
        raise invalid([{"resource": "PullRequest", "field": "state", "code": "invalid"}])
    pulls = [i for i in state.issues_of(r) if i.pull and (state_ == "all" or i.state == state_)]
    if head:
        h_owner, _, h_ref = head.rpartition(":")
        pulls = [i for i in pulls if i.pull.head == h_ref and (not h_owner or h_owner.lower() == r.owner.lower())]
    if base:
        pulls = [i for i in pulls if i.pull.base == base]
    # "Default: `desc` when sort is `created` or sort is not specified, otherwise `asc`" (pulls/list's `direction`)
    reverse = (direction or ("desc" if sort == "created" else "asc")) == "desc"
    key = {"updated": lambda i: i.updated_at}.get(sort, lambda i: (i.created_at, i.number))
    pulls.sort(key=key, reverse=reverse)
    items, headers = page(request, pulls)
    return respond(200, [rr.pull(r, i, "pull-request-simple") for i in items], headers)


@router.post("/repos/{owner}/{repo}/pulls", status_code=201)
async def create_pull(request: Request, access: Access, state: State):
    r, rr, login = access
    need_write(r, login)
    body = await body_of(request)
    if not isinstance(body, dict):
        body = {}
    errors = [
        {"resource": "PullRequest", "field": f, "code": "missing_field"}
        for f in ("title", "head", "base")
        if not body.get(f)
    ]
    if errors and not (errors[0]["field"] == "title" and body.get("issue")):
        raise invalid(errors)
    check_body(body.get("body"), "PullRequest")
    head = str(body["head"]).rpartition(":")[2]
    base = str(body["base"])
    if gitstore.resolve(r.path, f"refs/heads/{head}") is None:
        raise invalid([{"resource": "PullRequest", "field": "head", "code": "invalid"}])
    if gitstore.resolve(r.path, f"refs/heads/{base}") is None:
        raise invalid([{"resource": "PullRequest", "field": "base", "code": "invalid"}])
    with state.lock:
        dup = next(
            (
                i
                for i in r.issues.values()
                if i.pull and i.state == "open" and i.pull.head == head and i.pull.base == base
            ),
            None,
        )
        if dup is not None:
            raise invalid(
                [
                    {
                        "resource": "PullRequest",
                        "code": "custom",
                        "message": f"A pull request already exists for {r.owner}:{head}.",
                    }
                ]
            )
        if gitstore.count(r.path, f"refs/heads/{base}..refs/heads/{head}") == 0:
            raise invalid(
                [{"resource": "PullRequest", "code": "custom", "message": f"No commits between {base} and {head}"}]
            )
        issue = state.add_pull(
            r.full_name, title=str(body["title"]), body=body.get("body"), user=login, head=head, base=base
        )
        issue.pull.draft = bool(body.get("draft"))
    return respond(201, rr.pull(r, issue), {"Location": f"{rr.api(r)}/pulls/{issue.number}"})


@router.get("/repos/{owner}/{repo}/pulls/{pull_number}")
def get_pull(request: Request, access: Access, pull_number: int):
    r, rr, _ = access
    return rr.pull(r, pull_of(r, pull_number))


@router.get("/repos/{owner}/{repo}/pulls/{pull_number}/commits")
def pull_commits(request: Request, access: Access, pull_number: int):
    r, rr, _ = access
    items, headers = page(request, rr.pull_commits(r, pull_of(r, pull_number)))
    return respond(200, [rr.commit(r, c) for c in items], headers)


@router.post("/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers", status_code=201)
async def request_reviewers(request: Request, access: Access, state: State, pull_number: int):
    r, rr, login = access
    issue = pull_of(r, pull_number)
    need_write(r, login)
    body = await body_of(request)
    reviewers = body.get("reviewers", []) if isinstance(body, dict) else None
    teams = body.get("team_reviewers", []) if isinstance(body, dict) else None
    if not isinstance(reviewers, list) or not isinstance(teams, list) or not (reviewers or teams):
        raise invalid([{"resource": "PullRequest", "field": "reviewers", "code": "missing_field"}])
    for name in reviewers:  # GitHub's 422s here carry message and documentation_url, no `errors`
        if name == issue.user:
            raise ApiError(422, "Review cannot be requested from pull request author.", doc=REVIEW_DOCS)
        if r.permissions.get(name, "none") == "none":
            raise ApiError(
                422,
                "Reviews may only be requested from collaborators. One or more of the users or "
                "teams you specified is not a collaborator of the "
                f"{r.full_name} repository.",
                doc=REVIEW_DOCS,
            )
    with state.lock:
        for name in reviewers:
            if name not in issue.pull.requested_reviewers:
                issue.pull.requested_reviewers.append(name)
    return respond(201, rr.pull(r, issue, "pull-request-simple"))
