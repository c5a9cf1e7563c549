"""The GitHub Actions operations: workflows, dispatches, runs and their attempts, jobs, logs, artifacts, re-runs,
cancellation. The
downloads answer 302 to a signed URL on the blob host (api/downloads.py, state/blobs.py), as GitHub's do."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from ..actions import workflow as wfspec
from ..actions.engine import Actions, RerunError
from ..actions.model import Job, Run, Workflow
from ..actions.render import render_artifact, render_job, render_run, render_workflow
from ..models import Repo
from . import downloads
from .deps import Access, State, body_of, need_write, page
from .errors import ApiError, invalid, not_found

router = APIRouter()


def actions_engine(state: State) -> Actions:
    return state.actions


Engine = Annotated[Actions, Depends(actions_engine)]


async def learn_base_url(request: Request, call_next):
    """Outermost middleware (the app factory adds it last): learn the base URL for webhooks."""
    actions: Actions = request.app.state.sandbox.actions
    if actions.base_url is None:
        actions.base_url = str(request.base_url).rstrip("/")
    return await call_next(request)


def found(location: str) -> Response:
    """GitHub's answer to a download: 302 to a signed URL on the blob host, no body."""
    return Response(status_code=302, headers={"Location": location})


def flow_of(actions: Actions, r: Repo, workflow_id: str) -> Workflow:
    wf = actions.workflow(r, workflow_id)
    if wf is None:
        raise not_found()
    return wf


def run_of(actions: Actions, r: Repo, run_id: int) -> Run:
    run = actions.run(run_id)
    if run is None or run.repo != r.full_name.lower():
        raise not_found()
    return run


@router.get("/repos/{owner}/{repo}/actions/workflows")
def list_workflows(request: Request, access: Access, actions: Engine):
    """actions/list-repo-workflows (beyond the subset; PyGithub's `get_workflows`)."""
    r, rr, _ = access
    flows = actions.workflows_of(r)
    items, headers = page(request, flows)
    return JSONResponse(
        {"total_count": len(flows), "workflows": [render_workflow(rr, r, w) for w in items]}, headers=headers
    )


@router.get("/repos/{owner}/{repo}/actions/workflows/{workflow_id}")
def get_workflow(request: Request, access: Access, actions: Engine, workflow_id: str):
    r, rr, _ = access
    return render_workflow(rr, r, flow_of(actions, r, workflow_id))


@router.post("/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches")
async def dispatch(request: Request, access: Access, actions: Engine, workflow_id: str):
    r, rr, login = access
    wf = flow_of(actions, r, workflow_id)
    need_write(r, login)
    body = await body_of(request)
    body = body if isinstance(body, dict) else {}
    ref, inputs = body.get("ref"), body.get("inputs") or {}
    if not isinstance(ref, str) or not ref:
        raise invalid(
            [{"resource": "WorkflowDispatch", "field": "ref", "code": "missing_field"}],
            'Invalid request.\n\n"ref" wasn\'t supplied.',
        )
    if not isinstance(inputs, dict):
        raise invalid([{"resource": "WorkflowDispatch", "field": "inputs", "code": "invalid"}])
    if "workflow_dispatch" not in wf.triggers:
        raise invalid([], "Workflow does not have 'workflow_dispatch' trigger")
    try:
        run = actions.start(r, wf, ref, event="workflow_dispatch", inputs=inputs, actor=login)
    except LookupError:
        raise invalid([], f"No ref found for: {ref}") from None
    except wfspec.InputError as exc:
        raise invalid([], str(exc)) from exc
    if body.get("return_run_details") is True and actions.run_details:
        u = f"{rr.api(r)}/actions/runs/{run.id}"
        return JSONResponse(
            {"workflow_run_id": run.id, "run_url": u, "html_url": f"{rr.html(r)}/actions/runs/{run.id}"}
        )
    return Response(status_code=204)


@router.get("/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs")
def list_runs(
    request: Request,
    access: Access,
    actions: Engine,
    workflow_id: str,
    branch: str | None = None,
    event: str | None = None,
    status: str | None = None,
    head_sha: str | None = None,
    actor: str | None = None,
):
    r, rr, _ = access
    wf = flow_of(actions, r, workflow_id)
    runs = actions.runs_of(r, wf)
    if branch:
        runs = [x for x in runs if x.head_branch == branch]
    if event:
        runs = [x for x in runs if x.event == event]
    if status:
        runs = [x for x in runs if status in (x.status, x.conclusion)]
    if head_sha:
        runs = [x for x in runs if x.head_sha == head_sha]
    if actor:
        runs = [x for x in runs if x.actor == actor]
    items, headers = page(request, runs)
    return JSONResponse(
        {"total_count": len(runs), "workflow_runs": [render_run(rr, actions.workflow_of(x), r, x) for x in items]},
        headers=headers,
    )


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}")
def get_run(request: Request, access: Access, actions: Engine, run_id: int):
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    return render_run(rr, actions.workflow_of(run), r, run)


def _jobs_page(request: Request, rr, actions: Actions, r: Repo, run: Run, jobs: list[Job]) -> JSONResponse:
    items, headers = page(request, jobs)
    wf = actions.workflow_of(run)
    return JSONResponse(
        {"total_count": len(jobs), "jobs": [render_job(rr, wf, r, run, j) for j in items]}, headers=headers
    )


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}/jobs")
def list_jobs(request: Request, access: Access, actions: Engine, run_id: int, filter: str = "latest"):
    """actions/list-jobs-for-workflow-run: `filter=latest` (the default) the newest execution of each job, `all`
    every execution of every attempt."""
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    if filter not in ("latest", "all"):
        raise invalid([{"resource": "Job", "field": "filter", "code": "invalid"}])
    jobs = run.latest_jobs() if filter == "latest" else list(run.jobs)
    return _jobs_page(request, rr, actions, r, run, jobs)


def _attempt(run: Run, attempt_number: int) -> int:
    if not 1 <= attempt_number <= run.attempt:
        raise not_found()
    return attempt_number


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}")
def get_attempt(request: Request, access: Access, actions: Engine, run_id: int, attempt_number: int):
    """actions/get-workflow-run-attempt."""
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    return render_run(rr, actions.workflow_of(run), r, run, _attempt(run, attempt_number))


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}/jobs")
def list_attempt_jobs(request: Request, access: Access, actions: Engine, run_id: int, attempt_number: int):
    """actions/list-jobs-for-workflow-run-attempt: the jobs as they stood in that attempt (those it re-ran, and
    the newest earlier execution of those it kept)."""
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    return _jobs_page(request, rr, actions, r, run, run.latest_jobs(_attempt(run, attempt_number)))


async def _rerun(request: Request, access, actions: Actions, run_id: int, failed_only: bool) -> JSONResponse:
    r, _, login = access
    run = run_of(actions, r, run_id)
    need_write(r, login)
    await body_of(request)  # enable_debug_logging: accepted, no debug logs here
    try:
        actions.rerun(run, failed_only=failed_only, actor=login)
    except RerunError as exc:
        raise ApiError(403, str(exc)) from None
    return JSONResponse({}, status_code=201)


@router.post("/repos/{owner}/{repo}/actions/runs/{run_id}/rerun")
async def rerun(request: Request, access: Access, actions: Engine, run_id: int):
    """actions/re-run-workflow: a new attempt of every job."""
    return await _rerun(request, access, actions, run_id, failed_only=False)


@router.post("/repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs")
async def rerun_failed_jobs(request: Request, access: Access, actions: Engine, run_id: int):
    """actions/re-run-workflow-failed-jobs: a new attempt of the failed jobs and the jobs that need them."""
    return await _rerun(request, access, actions, run_id, failed_only=True)


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}/logs")
def run_logs(request: Request, state: State, access: Access, actions: Engine, run_id: int):
    """actions/download-workflow-run-logs: a zip, one file per job and per step."""
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    return found(downloads.run_logs_url(state.blobs, rr, actions.workflow_of(run), r, run))


@router.get("/repos/{owner}/{repo}/actions/jobs/{job_id}/logs")
def job_logs(request: Request, state: State, access: Access, actions: Engine, job_id: int):
    r, _, _ = access
    run_id = actions.jobs.get(job_id)
    if run_id is None:
        raise not_found()
    job = next(j for j in run_of(actions, r, run_id).jobs if j.id == job_id)
    return found(downloads.job_log_url(state.blobs, job))


@router.get("/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts")
def list_artifacts(request: Request, access: Access, actions: Engine, run_id: int, name: str | None = None):
    r, rr, _ = access
    run = run_of(actions, r, run_id)
    arts = [a for a in run.artifacts if name is None or a.name == name]
    items, headers = page(request, arts)
    return JSONResponse(
        {"total_count": len(arts), "artifacts": [render_artifact(rr, r, run, a) for a in items]}, headers=headers
    )


@router.get("/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}")
def download_artifact(
    request: Request, state: State, access: Access, actions: Engine, artifact_id: int, archive_format: str
):
    r, rr, _ = access
    run_id = actions.artifacts.get(artifact_id)
    if run_id is None or archive_format != "zip":
        raise not_found()
    run = run_of(actions, r, run_id)
    art = next((a for a in run.artifacts if a.id == artifact_id), None)
    if art is None:
        raise not_found()
    return found(downloads.artifact_url(state.blobs, art))


@router.post("/repos/{owner}/{repo}/actions/runs/{run_id}/cancel")
def cancel_run(request: Request, access: Access, actions: Engine, run_id: int):
    r, _, login = access
    run = run_of(actions, r, run_id)
    need_write(r, login)
    if not actions.cancel(run):
        raise ApiError(409, "Cannot cancel a workflow run that is completed.")
    return JSONResponse({}, status_code=202)
