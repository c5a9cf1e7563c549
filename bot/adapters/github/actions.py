"""GitHub Actions, through PyGithub: dispatch a workflow, find and watch its run, read its artifact, cancel it."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta

from github import GithubException
from github.Repository import Repository
from github.WorkflowRun import WorkflowRun

from bot.adapters.dispatch.actions import ArtifactUnreadable, Dispatched
from bot.adapters.github.downloads import DownloadError, Downloads
from bot.adapters.github.writes import Writes, refused_for_now


@dataclass(frozen=True)
class RunState:
    id: int
    status: str  # queued, pending, waiting, in_progress, completed, ...
    conclusion: str | None
    html_url: str
    labels: tuple[str, ...] = ()
    runner: str | None = None


class GitHubActions:
    def __init__(self, repo: Repository, workflow: str, writes: Writes | None = None):
        self.repo = repo
        self.workflow_file = workflow
        self.writes = writes or Writes()  # the client's (the forge's): how a refused-for-now dispatch is sent again
        self._workflow = None
        self._runs: dict[int, tuple[WorkflowRun, RunState]] = {}  # runs in flight, with their ETags
        self.downloads = Downloads(repo.requester)

    @property
    def workflow(self):
        if self._workflow is None:
            self._workflow = self.repo.get_workflow(self.workflow_file)
        return self._workflow

    def dispatch(self, ref: str, inputs: dict[str, str]) -> int | None:
        """The new run's id; None when GitHub answered 204 without run details (find it by its run-name).

        Sent once: the transport retries no POST. A rate limit (GitHub did nothing) is waited out and sent again;
        GithubException 422 (refused: bad inputs, workflow missing on ref) propagates; anything else (a 5xx, a lost
        answer) raises Dispatched, since a run may exist: the backend finds it by the correlation id in its inputs."""
        send = lambda: self.workflow.create_dispatch(ref, inputs, throw=True, return_run_details=True)  # noqa: E731
        try:
            answer = self.writes.make(f"dispatching {self.workflow_file}", send)  # only "not now" is sent again
        except GithubException as exc:
            if exc.status in (400, 401, 403, 404, 422) and not refused_for_now(exc):
                raise
            raise Dispatched(str(exc)) from exc
        except OSError as exc:
            raise Dispatched(str(exc)) from exc
        return answer.id if hasattr(answer, "id") else None

    def find_runs(self, marker: str, since: datetime) -> list[int]:
        """Ids of dispatched runs of the workflow whose title (run-name) contains marker, oldest first."""
        created = (since - timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
        found = []
        for run in self.workflow.get_runs(event="workflow_dispatch", created=f">={created}"):
            if marker in (run.display_title or ""):
                found.append(run.id)
        return sorted(found)

    def state(self, run_id: int) -> RunState:
        """The run's state, asked with If-None-Match after the first time: an unchanged run answers 304, which
        costs nothing against the rate limit, and its jobs are read again only when the run changed."""
        known = self._runs.get(run_id)
        if known is not None and not known[0].update():
            return known[1]
        run = known[0] if known is not None else self.repo.get_workflow_run(run_id)
        labels, runner = (), None
        if run.status != "completed" or run.conclusion in ("cancelled", "timed_out"):
            for job in run.jobs():
                labels, runner = tuple(job.labels or ()), job.runner_name
                break
        state = RunState(run.id, run.status, run.conclusion, run.html_url, labels, runner)
        if run.status == "completed":
            self._runs.pop(run_id, None)
        else:
            self._runs[run_id] = (run, state)
        return state

    def artifact_file(self, run_id: int, artifact: str, member: str) -> bytes | None:
        """One file of a run's artifact; None when the run has no such artifact or file. ArtifactUnreadable when
        it has one that cannot be downloaded (bounded tries, bot.adapters.github.downloads)."""
        try:
            return artifact_files(self.repo, run_id, artifact, self.downloads).get(member)
        except DownloadError as exc:
            raise ArtifactUnreadable(str(exc)) from exc

    def cancel(self, run_id: int) -> bool:
        """False when the run had already completed (GitHub answers 409). A run polled before is cancelled through
        the object already held (no GET first), and forgotten: nobody polls it again."""
        known = self._runs.pop(run_id, None)
        try:
            return (known[0] if known else self.repo.get_workflow_run(run_id)).cancel()
        except GithubException as exc:
            if exc.status == 409:
                return False
            raise


def artifact_files(repo: Repository, run_id: int, name: str, downloads: Downloads | None = None) -> dict[str, bytes]:
    """The files of a run's artifact called `name` ({} when the run has none). GitHub redirects the download to a
    short-lived signed URL on another host, fetched without credentials (DownloadError when that keeps failing)."""
    for artifact in repo.get_workflow_run(run_id).get_artifacts():
        if artifact.name == name:
            what = f"the artifact {name} of run {run_id}"
            data = (downloads or Downloads(repo.requester)).fetch(artifact.archive_download_url, what)
            try:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    return {member: archive.read(member) for member in archive.namelist()}
            except zipfile.BadZipFile as exc:
                raise DownloadError(f"{what} is not a zip archive ({len(data)} bytes): {exc}") from exc
    return {}
