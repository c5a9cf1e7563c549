"""Commit statuses and check runs."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import gitstore
from ..models import Repo, now_iso
from ..render import Renderer
from ..schema import conform
from .deps import Access, State, body_of, need_write
from .errors import invalid, not_found, respond

router = APIRouter()


CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")


@router.post("/repos/{owner}/{repo}/statuses/{sha}", status_code=201)
async def create_status(request: Request, access: Access, state: State, sha: str):
    r, rr, login = access
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
    status = {
        "url": f"{rr.api(r)}/statuses/{full}",
        "avatar_url": None,
        "id": ident,
        "node_id": f"SC_{ident}",
        "state": st,
        "description": body.get("description"),
        "target_url": body.get("target_url"),
        "context": body.get("context") or "default",
        "created_at": when,
        "updated_at": when,
        "creator": rr.user(login, "nullable-simple-user"),
        "sha": full,
    }
    with state.lock:
        r.statuses.append(status)
    return respond(201, status)


def check_body(r: Repo, rr: Renderer, run: dict) -> dict:
    a = rr.api(r)
    body = {
        **run,
        "url": f"{a}/check-runs/{run['id']}",
        "html_url": f"{rr.html(r)}/runs/{run['id']}",
        "node_id": f"CR_{run['id']}",
        "app": None,
        "pull_requests": [],
        "check_suite": {"id": run["id"]},
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{a}/check-runs/{run['id']}/annotations",
            **run.get("output", {}),
        },
    }
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


@router.post("/repos/{owner}/{repo}/check-runs", status_code=201)
async def create_check_run(request: Request, access: Access, state: State):
    r, rr, login = access
    need_write(r, login)
    body = await body_of(request)
    body = body if isinstance(body, dict) else {}
    missing = [f for f in ("name", "head_sha") if not body.get(f)]
    if missing:
        raise invalid([{"resource": "CheckRun", "field": f, "code": "missing_field"} for f in missing])
    sha = gitstore.resolve(r.path, body["head_sha"])
    if sha is None:
        raise invalid(
            [{"resource": "CheckRun", "field": "head_sha", "code": "invalid"}],
            "No commit found for SHA: " + body["head_sha"],
        )
    run = {
        "id": state.new_id(),
        "head_sha": sha,
        "status": "queued",
        "conclusion": None,
        "started_at": now_iso(),
        "completed_at": None,
        "details_url": None,
        "external_id": "",
    }
    check_fields(run, body)
    with state.lock:
        r.check_runs[run["id"]] = run
    return respond(201, check_body(r, rr, run))


@router.patch("/repos/{owner}/{repo}/check-runs/{check_run_id}")
async def update_check_run(request: Request, access: Access, state: State, check_run_id: int):
    r, rr, login = access
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
