"""GitHub App authentication: the app's JWT for its installation on a repository, then a
short-lived installation token (PyGithub refreshes it), for the API and for git over HTTP."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from github import Auth, Github, GithubIntegration

from bot.adapters.github.forge import retry_policy
from bot.adapters.github.writes import for_client, register


@dataclass
class AppCredentials:
    app_id: int
    private_key: str  # PEM
    base_url: str = "https://api.github.com"
    throttle: bool = True
    timeout: int = 15  # seconds per request; an answer later than this is retried
    _auth: dict[str, Auth.AppInstallationAuth] = field(default_factory=dict, repr=False)

    @classmethod
    def from_file(
        cls, app_id: int, key_path: Path, base_url: str, throttle: bool = True, timeout: int = 15
    ) -> AppCredentials:
        return cls(app_id, key_path.read_text(), base_url.rstrip("/"), throttle, timeout)

    def _installation(self, repo: str) -> Auth.AppInstallationAuth:
        if repo not in self._auth:
            app = Auth.AppAuth(self.app_id, self.private_key)
            integration = GithubIntegration(
                auth=app, base_url=self.base_url, retry=retry_policy(patient=self.throttle), timeout=self.timeout
            )
            owner, name = repo.split("/", 1)
            installation = integration.get_repo_installation(owner, name)
            self._auth[repo] = app.get_installation_auth(installation.id)
        return self._auth[repo]

    def client(self, repo: str) -> Github:
        pauses = {} if self.throttle else dict(seconds_between_requests=0, seconds_between_writes=0)
        gh = Github(
            base_url=self.base_url,
            auth=self._installation(repo),
            retry=retry_policy(patient=self.throttle),
            timeout=self.timeout,
            **pauses,
        )
        return register(gh, for_client(patient=self.throttle, timeout=self.timeout))

    def token(self, repo: str) -> str:
        """The current installation token (valid for git over HTTP as `Authorization: Bearer`)."""
        auth = self._installation(repo)
        if auth.requester is None:  # PyGithub binds a requester on first use by a client
            self.client(repo).get_repo(repo)
        return auth.token
