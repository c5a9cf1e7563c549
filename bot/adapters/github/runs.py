"""A repository's workflow runs as the nightly path reads them: runs, attempts, jobs, logs and artifacts (a part of
bot.adapters.github.forge.GitHubForge, which mixes it in; the logs and artifacts come through GitHub's signed
redirects, bot.adapters.github.downloads)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from github import GithubException
from github.Repository import Repository

from bot.adapters.github.actions import artifact_files
from bot.adapters.github.downloads import DownloadError, Downloads
from bot.domain.scope import RunInfo, run_info
from bot.domain.signals import JobInfo

NEXT_PAGE = re.compile(r'<([^>]+)>;\s*rel="next"')  # a `Link` header's next page


class CiRuns:
    repo: Repository
    downloads: Downloads

    def run_artifact(self, run_id: int, name: str) -> dict[str, bytes]:
        """The files of a run's artifact called `name` ({} when the run has none); DownloadError when it cannot be
        downloaded."""
        return artifact_files(self.repo, run_id, name, self.downloads)

    def _pages(self, url: str, params: dict) -> Iterator[dict]:
        """Each page of a list, as GitHub sends it (its `Link` header's next page followed)."""
        next_url: str | None = url
        query: dict | None = params
        while next_url:
            headers, data = self.repo.requester.requestJsonAndCheck("GET", next_url, parameters=query)
            yield data or {}
            found = NEXT_PAGE.search(headers.get("link") or "")
            next_url, query = (found.group(1), None) if found else (None, None)

    def workflow_runs(self, workflow: int | str, branch: str, events: list[str], limit: int) -> list[RunInfo]:
        """Completed runs of a workflow (its id, or its file's name or path) on `branch` for each of `events`,
        newest first, at most `limit`: GET .../actions/workflows/{id}/runs?branch=&event=&status=completed, read from
        the list's pages as they are (one request a page, not one per run)."""
        ident = workflow.rsplit("/", 1)[-1] if isinstance(workflow, str) else workflow
        url = f"{self.repo.url}/actions/workflows/{ident}/runs"
        found: dict[int, RunInfo] = {}
        for event in dict.fromkeys(events):
            params = {"branch": branch, "event": event, "status": "completed", "per_page": min(max(limit, 1), 100)}
            listed: list[RunInfo] = []
            for page in self._pages(url, params):
                listed += [run_info(run) for run in page.get("workflow_runs") or []]
                if len(listed) >= limit or not page.get("workflow_runs"):
                    break
            found.update((run.id, run) for run in listed[:limit])
        return sorted(found.values(), key=lambda r: r.id, reverse=True)[:limit]

    def run(self, run_id: int) -> RunInfo:
        """A run as it is now: its newest attempt's number, status and conclusion (GET .../actions/runs/{id})."""
        _, data = self.repo.requester.requestJsonAndCheck("GET", f"{self.repo.url}/actions/runs/{run_id}")
        return run_info(data)

    def run_attempt(self, run_id: int, attempt: int) -> RunInfo:
        """One attempt of a run (GET .../actions/runs/{id}/attempts/{n})."""
        _, data = self.repo.requester.requestJsonAndCheck(
            "GET", f"{self.repo.url}/actions/runs/{run_id}/attempts/{attempt}"
        )
        return run_info(data)

    def run_jobs(self, run_id: int, attempt: int | None = None) -> list[JobInfo]:
        """The jobs of a run's newest attempt (GET .../runs/{id}/jobs, GitHub's default `filter=latest`), or of one
        attempt (GET .../runs/{id}/attempts/{n}/jobs); every page."""
        url = f"{self.repo.url}/actions/runs/{run_id}" + (f"/attempts/{attempt}/jobs" if attempt else "/jobs")
        out = []
        for data in self._pages(url, {"per_page": 100}):
            for job in data.get("jobs") or []:
                out.append(
                    JobInfo(
                        job["id"],
                        job.get("name") or "",
                        job.get("status") or "",
                        job.get("conclusion"),
                        int(job.get("run_attempt") or attempt or 1),
                    )
                )
        return out

    def job_log(self, job_id: int) -> str | None:
        """One job's log as GitHub wrote it, decoded as UTF-8 (GET .../actions/jobs/{id}/logs: a redirect to another
        host, bot.adapters.github.downloads); None when GitHub no longer has it (404, 410: past its retention),
        DownloadError when it cannot be downloaded."""
        try:
            data = self.downloads.fetch(f"{self.repo.url}/actions/jobs/{job_id}/logs", f"the log of job {job_id}")
        except DownloadError as exc:
            if isinstance(exc.__cause__, GithubException) and exc.__cause__.status in (404, 410):
                return None
            raise
        return data.decode("utf-8-sig", "replace")
