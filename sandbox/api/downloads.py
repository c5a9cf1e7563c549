"""What the Actions download redirects point at, put on the blob host (sandbox/state/blobs.py) when asked for.

- a job's log: UTF-8 text behind a byte-order mark, served as `text/plain` without a charset (REALITY.md,
  "GitHub: downloads": decode it as UTF-8 yourself);
- a run's logs: a zip with, for each job, `<n>_<job name>.txt` (the whole job log) at the top level and
  `<job name>/<step number>_<step name>.txt` for each step, names stripped of `/` and `:` and cut to 90
  characters (the layout gh reads: cli/cli pkg/cmd/run/view/logs.go, `jobLogFilenameRegexp`, `logFilenameRegexp`);
- an artifact: its zip, `application/zip`.
"""

from __future__ import annotations

import io
import re
import zipfile

from ..actions.model import Artifact, Job, Run, Workflow
from ..actions.render import render_job
from ..models import Repo
from ..render import Renderer
from ..state.blobs import BlobHost

BOM = "\ufeff"
NAME_MAX = 90
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z ")


def file_name(name: str) -> str:
    """A job's or step's name as the run-logs zip spells it."""
    return name.replace("/", "").replace(":", "")[:NAME_MAX].strip()


def job_log_text(job: Job) -> str:
    return "\n".join(job.log) + "\n" if job.log else ""


def step_logs(lines: list[str], steps: list[dict]) -> list[list[str]]:
    """The job log's lines by step: the set-up step until the first `##[group]Run ...`, each step that runs
    something from its own, the last step from `Cleaning up orphan processes` on (what the runner prints in
    GitHub's "Complete job"); more `Run` groups than middle steps stay with the last middle step."""
    out: list[list[str]] = [[] for _ in steps]
    if not steps:
        return out
    last = len(steps) - 1
    at = 0
    for line in lines:
        text = STAMP.sub("", line, count=1)
        if text.startswith("##[group]Run ") and 0 < at + 1 < last:
            at += 1
        elif text.startswith("Cleaning up orphan processes"):
            at = last
        out[at].append(line)
    return out


def run_logs_zip(rr: Renderer, wf: Workflow, repo: Repo, run: Run) -> bytes:
    """The newest attempt's logs: for each job `<n>_<job name>.txt`, and a folder of its steps' logs."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for n, job in enumerate(run.latest_jobs()):
            folder = file_name(job.name)
            steps = sorted(render_job(rr, wf, repo, run, job).get("steps") or [], key=lambda s: s["number"])
            archive.writestr(f"{n}_{folder}.txt", BOM + job_log_text(job))
            for step, lines in zip(steps, step_logs(list(job.log), steps)):
                text = "\n".join(lines) + "\n" if lines else ""
                archive.writestr(f"{folder}/{step['number']}_{file_name(step['name'])}.txt", BOM + text)
    return buffer.getvalue()


def job_log_url(blobs: BlobHost, job: Job) -> str:
    data = (BOM + job_log_text(job)).encode()
    return blobs.sign(blobs.put(f"job-logs/{job.id}/job-{job.id}.txt", data, "text/plain"))


def run_logs_url(blobs: BlobHost, rr: Renderer, wf: Workflow, repo: Repo, run: Run) -> str:
    data = run_logs_zip(rr, wf, repo, run)
    return blobs.sign(blobs.put(f"run-logs/{run.id}/logs_{run.id}.zip", data, "application/zip"))


def artifact_url(blobs: BlobHost, art: Artifact) -> str:
    return blobs.sign(blobs.put(f"artifacts/{art.id}/{art.name}.zip", art.data, "application/zip"))
