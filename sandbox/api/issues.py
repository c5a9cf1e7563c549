"""Issues, comments, reactions, labels, timelines, and issue search."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..models import Reaction, now_iso
from ..render import references
from ..schema import conform
from .body_limit import check_body
from .deps import Access, State, body_of, issue_of, need_write, page, renderer
from .errors import ApiError, invalid, not_found, respond
from .search_query import parse

router = APIRouter()


REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


@router.post("/repos/{owner}/{repo}/issues", status_code=201)
async def create_issue(request: Request, access: Access, state: State):
    r, rr, login = access
    body = await body_of(request)
    title = body.get("title") if isinstance(body, dict) else None
    if title is None or (isinstance(title, str) and not title.strip()):
        raise invalid([{"resource": "Issue", "field": "title", "code": "missing_field"}])
    check_body(body.get("body"), "Issue")
    labels = [str(x) for x in body.get("labels") or []]
    issue = state.add_issue(
        r.full_name,
        title=str(title),
        body=body.get("body"),
        user=login,
        labels=labels if r.permissions.get(login) in ("admin", "maintain", "write") else [],
    )
    return respond(201, rr.issue(r, issue), {"Location": f"{rr.api(r)}/issues/{issue.number}"})


@router.get("/repos/{owner}/{repo}/issues")
def list_issues(request: Request, access: Access, state: State, sort: str = "created", direction: str = "desc"):
    """issues/list-for-repo (not in the OpenAPI subset; GitHub's docs): open by default, pull requests included
    (with their `pull_request` key), newest first by default, paged; `labels=a,b` keeps those carrying every one."""
    r, rr, _ = access
    state_ = request.query_params.get("state", "open")
    if state_ not in ("open", "closed", "all") or sort not in ("created", "updated", "comments"):
        raise invalid(
            [
                {
                    "resource": "Issue",
                    "field": "state" if state_ not in ("open", "closed", "all") else "sort",
                    "code": "invalid",
                }
            ]
        )
    labels = [name.strip() for name in request.query_params.get("labels", "").split(",") if name.strip()]
    found = [
        i
        for i in state.issues_of(r)
        if (state_ == "all" or i.state == state_) and all(name in i.labels for name in labels)
    ]
    key = {"updated": lambda i: (i.updated_at, i.number)}.get(sort, lambda i: (i.created_at, i.number))
    found.sort(key=key, reverse=direction != "asc")
    items, headers = page(request, found)
    return respond(200, [rr.issue(r, i) for i in items], headers)


@router.get("/repos/{owner}/{repo}/issues/comments/{comment_id}")
def get_comment(request: Request, access: Access, state: State, comment_id: int):
    """issues/get-comment: not in the OpenAPI subset, but PyGithub's `get_issue_comment` (the
    forge's `react`) calls it."""
    r, rr, _ = access
    found = state.comments.get(comment_id)
    if found is None or found[0] != r.full_name.lower():
        raise not_found()
    return rr.comment(r, found[1])


@router.patch("/repos/{owner}/{repo}/issues/comments/{comment_id}")
async def update_comment(request: Request, access: Access, state: State, comment_id: int):
    r, rr, login = access
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
    check_body(text, "IssueComment")
    with state.lock:
        comment.body, comment.updated_at = text, now_iso()
    return rr.comment(r, comment)


@router.post("/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
async def create_reaction(request: Request, access: Access, state: State, comment_id: int):
    r, rr, login = access
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
                return respond(200, rr.reaction(reaction))
        reaction = Reaction(state.new_id(), login, content, now_iso())
        existing.append(reaction)
    return respond(201, rr.reaction(reaction))


@router.get("/repos/{owner}/{repo}/issues/{issue_number}")
def get_issue(request: Request, access: Access, issue_number: int):
    r, rr, _ = access
    return rr.issue(r, issue_of(r, issue_number))


@router.get("/repos/{owner}/{repo}/issues/{issue_number}/comments")
def list_comments(request: Request, access: Access, state: State, issue_number: int):
    r, rr, _ = access
    issue_of(r, issue_number)
    items, headers = page(request, state.comments_of(r, issue_number))
    return respond(200, [rr.comment(r, c) for c in items], headers)


@router.post("/repos/{owner}/{repo}/issues/{issue_number}/comments", status_code=201)
async def create_comment(request: Request, access: Access, state: State, issue_number: int):
    r, rr, login = access
    issue_of(r, issue_number)
    body = await body_of(request)
    text = body.get("body") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text:
        raise invalid([{"resource": "IssueComment", "field": "body", "code": "missing_field"}])
    check_body(text, "IssueComment")
    comment = state.add_comment(r.full_name, issue_number, user=login, body=text)
    return respond(201, rr.comment(r, comment), {"Location": f"{rr.api(r)}/issues/comments/{comment.id}"})


@router.post("/repos/{owner}/{repo}/issues/{issue_number}/labels")
async def add_labels(request: Request, access: Access, state: State, issue_number: int):
    r, rr, login = access
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


@router.get("/repos/{owner}/{repo}/issues/{issue_number}/timeline")
def timeline(request: Request, access: Access, state: State, issue_number: int):
    r, rr, _ = access
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
                events.append(
                    (
                        when,
                        0,
                        conform(
                            {
                                "event": "cross-referenced",
                                "actor": rr.user(who),
                                "created_at": when,
                                "updated_at": when,
                                "source": {"type": "issue", "issue": rr.issue(r, other)},
                            },
                            "timeline-cross-referenced-event",
                            rr.base,
                        ),
                    )
                )
        for c in state.comments_of(r, issue_number):
            body = rr.comment(r, c)
            body.update(event="commented", actor=rr.user(c.user))
            events.append((c.created_at, c.id, body))
    events.sort(key=lambda e: (e[0], e[1]))
    items, headers = page(request, [e[2] for e in events])
    return respond(200, items, headers)


@router.get("/search/issues")
def search_issues(request: Request, state: State):
    q = request.query_params.get("q", "").strip()
    if not q:
        raise invalid([{"resource": "Search", "field": "q", "code": "missing"}])
    rr = renderer(request)
    query = parse(q)
    found = []
    with state.lock:
        for key_, r in state.repos.items():
            for issue in r.issues.values():
                seen = state.search.view(key_, issue)
                if seen is not None and query.matches(key_, seen):
                    found.append((r, seen))
    found.sort(key=lambda x: (x[1].created_at, x[1].number), reverse=True)
    items, headers = page(request, found)
    out = []
    for r, issue in items:
        out.append(rr.issue(r, issue, "issue-search-result-item"))
    return respond(
        200, {"total_count": len(found), "incomplete_results": False, "search_type": "lexical", "items": out}, headers
    )
