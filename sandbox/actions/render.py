"""The Actions JSON bodies: workflows, runs and their attempts, jobs, artifacts (conformed to the OpenAPI schemas)."""

from __future__ import annotations

import shlex
import time
from datetime import UTC, datetime

from .. import gitstore
from ..models import Repo
from ..render import Renderer, node_id
from ..schema import conform
from .model import JOB_STATUSES, Artifact, Job, Run, Workflow


def render_workflow(rr: Renderer, repo: Repo, wf: Workflow) -> dict:
    h = rr.html(repo)
    body = {
        "id": wf.id,
        "node_id": node_id("W", wf.id),
        "name": wf.name,
        "path": wf.path,
        "state": wf.state,
        "created_at": wf.created_at,
        "updated_at": wf.updated_at,
        "url": f"{rr.api(repo)}/actions/workflows/{wf.id}",
        "html_url": f"{h}/blob/{repo.default_branch}/{wf.path}",
        "badge_url": f"{h}/workflows/{wf.path.rsplit('/', 1)[-1]}/badge.svg",
    }
    return conform(body, "workflow", rr.base)


def _head_commit(repo: Repo, sha: str) -> dict | None:
    try:
        c = gitstore.commit(repo.path, sha)
    except gitstore.GitError:
        return None
    return {
        "id": c["sha"],
        "tree_id": c["tree"],
        "message": c["message"],
        "timestamp": c["committer"]["date"],
        "author": {"name": c["author"]["name"], "email": c["author"]["email"]},
        "committer": {"name": c["committer"]["name"], "email": c["committer"]["email"]},
    }


def render_run(rr: Renderer, wf: Workflow, repo: Repo, run: Run, attempt: int | None = None) -> dict:
    """A run as GET .../runs/{id} shows it (its newest attempt), or one earlier attempt (.../attempts/{n})."""
    a, h = rr.api(repo), rr.html(repo)
    u = f"{a}/actions/runs/{run.id}"
    minimal = rr.repo(repo, schema="minimal-repository")
    fork = rr.state.repo(run.head_repository) if run.head_repository else None
    head_repo = rr.repo(fork, schema="minimal-repository") if fork is not None else minimal
    past = next((p for p in run.attempts if p.number == attempt), None)
    number = past.number if past else run.attempt
    status, conclusion = (past.status, past.conclusion) if past else (run.status, run.conclusion)
    body = {
        "id": run.id,
        "node_id": node_id("WFR", run.id),
        "name": wf.name,
        "display_title": run.display_title,
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": wf.path,
        "run_number": run.run_number,
        "run_attempt": number,
        "event": run.event,
        "status": status,
        "conclusion": conclusion,
        "workflow_id": wf.id,
        "check_suite_id": run.id,
        "check_suite_node_id": node_id("CS", run.id),
        "url": u,
        "html_url": f"{h}/actions/runs/{run.id}",
        "jobs_url": f"{u}/jobs",
        "logs_url": f"{u}/logs",
        "check_suite_url": f"{a}/check-suites/{run.id}",
        "artifacts_url": f"{u}/artifacts",
        "cancel_url": f"{u}/cancel",
        "rerun_url": f"{u}/rerun",
        "previous_attempt_url": f"{u}/attempts/{number - 1}" if number > 1 else None,
        "workflow_url": f"{a}/actions/workflows/{wf.id}",
        "pull_requests": [],
        "referenced_workflows": [],
        "created_at": run.created_at,
        "updated_at": past.updated_at if past else run.updated_at,
        "run_started_at": (past.run_started_at if past else run.run_started_at) or run.created_at,
        "actor": rr.user(run.actor),
        "triggering_actor": rr.user(past.triggering_actor if past else run.triggering_actor or run.actor),
        "head_commit": _head_commit(repo, run.head_sha),
        "repository": minimal,
        "head_repository": head_repo,
        "head_repository_id": fork.id if fork is not None else repo.id,
    }
    return conform(body, "workflow-run", rr.base)


def render_job(rr: Renderer, wf: Workflow, repo: Repo, run: Run, job: Job) -> dict:
    a = rr.api(repo)
    done = job.status == "completed"
    status = job.status if job.status in JOB_STATUSES else "queued"
    ran = job.runner_name is not None
    if not ran and done:  # skipped, or cancelled before a runner took it: no steps
        steps: list[dict] = []
    else:
        step_status = "completed" if done else ("in_progress" if job.status == "in_progress" else "queued")
        started = {
            "name": "Set up job",
            "status": "completed" if job.started_at else "queued",
            "conclusion": "success" if job.started_at else None,
            "started_at": job.started_at,
            "completed_at": job.started_at,
        }
        if wf.argv or not job.step_records:  # a bound command: one step for it
            middle = [
                {
                    "name": "Run " + (shlex.join(wf.argv) if wf.argv else wf.path),
                    "status": step_status,
                    "conclusion": job.conclusion,
                    "started_at": job.started_at,
                    "completed_at": job.completed_at,
                }
            ]
        else:  # the file's steps as they ran (a skipped step concludes `skipped`, as on GitHub)
            middle = [
                {k: r.get(k) for k in ("name", "status", "conclusion", "started_at", "completed_at")}
                for r in list(job.step_records)
            ]
        ended = {
            "name": "Complete job",
            "status": "completed" if done else "queued",
            "conclusion": "success" if done else None,
            "started_at": job.completed_at,
            "completed_at": job.completed_at,
        }
        steps = [{**s, "number": n} for n, s in enumerate([started, *middle, ended], start=1)]
    body = {
        "id": job.id,
        "node_id": node_id("J", job.id),
        "run_id": run.id,
        "run_url": f"{a}/actions/runs/{run.id}",
        "run_attempt": job.attempt,
        "head_sha": run.head_sha,
        "head_branch": run.head_branch,
        "workflow_name": wf.name,
        "name": job.name,
        "url": f"{a}/actions/jobs/{job.id}",
        "html_url": f"{rr.html(repo)}/actions/runs/{run.id}/job/{job.id}",
        "check_run_url": f"{a}/check-runs/{job.id}",
        "status": status,
        "conclusion": job.conclusion,
        "created_at": job.created_at,
        "started_at": job.started_at or job.created_at,
        "completed_at": job.completed_at,
        "steps": steps,
        "labels": list(job.labels),
        "runner_id": 1 if ran else None,
        "runner_name": job.runner_name,
        "runner_group_id": 1 if ran else None,
        "runner_group_name": "Default" if ran else None,
    }
    return conform(body, "job", rr.base)


def render_artifact(rr: Renderer, repo: Repo, run: Run, art: Artifact) -> dict:
    a = rr.api(repo)
    body = {
        "id": art.id,
        "node_id": node_id("AR", art.id),
        "name": art.name,
        "size_in_bytes": len(art.data),
        "url": f"{a}/actions/artifacts/{art.id}",
        "archive_download_url": f"{a}/actions/artifacts/{art.id}/zip",
        "expired": False,
        "created_at": art.created_at,
        "updated_at": art.created_at,
        "expires_at": datetime.fromtimestamp(time.time() + 90 * 86400, UTC)
        .replace(microsecond=0)
        .isoformat()
        .replace("+00:00", "Z"),
        "digest": art.digest,
        "workflow_run": {
            "id": run.id,
            "repository_id": repo.id,
            "head_repository_id": repo.id,
            "head_branch": run.head_branch or "",
            "head_sha": run.head_sha,
        },
    }
    return conform(body, "artifact", rr.base)
