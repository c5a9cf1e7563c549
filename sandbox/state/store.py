"""The sandbox's in-memory state: users, tokens, repositories (real bare git repositories on disk),
issues and pull requests (one number space per repository, as on GitHub), comments, reactions,
labels, statuses, check runs -- and the fault injector. Every mutation holds `state.lock`."""

from __future__ import annotations

import itertools
import tempfile
import threading
from pathlib import Path

from .. import gitstore
from ..actions.engine import Actions
from ..apps import App, AppRegistry
from ..models import Comment, Issue, PullInfo, Reaction, Repo, User, now_iso
from ..ratelimit import RateBook
from .blobs import BlobHost
from .faults import Faults
from .search_index import SearchIndex

PERMISSIONS = ("admin", "maintain", "write", "triage", "read", "none")


class SandboxState:
    """Everything the sandbox knows. Repositories live under `root` as `owner/name.git`."""

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="gh-sandbox-")
            root = self._tmp.name
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.users: dict[str, User] = {}
        self.tokens: dict[str, str] = {}  # token -> login
        self.apps = AppRegistry()  # GitHub Apps: JWT -> installation -> installation token
        self.repos: dict[str, Repo] = {}  # "owner/name" (lower case) -> Repo
        self.comments: dict[int, tuple[str, Comment]] = {}  # id -> (repo key, comment)
        self.reactions: dict[int, list[Reaction]] = {}  # comment id -> reactions
        self.faults = Faults()
        self.blobs = BlobHost()  # where download redirects point: another host (sandbox.server serves it)
        self.rates = RateBook()  # the REST rate limit, and every request counted
        self.search = SearchIndex()  # what issue search sees: writes show after a lag, as on GitHub
        self._ids = itertools.count(1000)
        # GitHub Actions emulation (workflows, runs, webhooks)
        self.actions = Actions(self)

    def new_id(self) -> int:
        with self.lock:
            return next(self._ids)

    # -- seeding --

    def add_user(
        self,
        login: str,
        *,
        name: str | None = None,
        email: str | None = None,
        token: str | None = None,
        type: str = "User",
    ) -> User:
        with self.lock:
            user = self.users.get(login)
            if user is None:
                user = self.users[login] = User(login, self.new_id(), name, email, type)
            if token:
                self.tokens[token] = login
            return user

    def register_app(
        self, app_id: int, public_key_pem: str, repos: list[str], slug: str = "revert-bisect"
    ) -> dict[str, int]:
        """A GitHub App installed on `repos`; its installation ids by repository."""
        with self.lock:
            app = self.apps.apps.setdefault(app_id, App(app_id, slug, public_key_pem))
            for name in repos:
                app.installations.setdefault(name.lower(), self.new_id())
            self.add_user(app.bot_login, type="Bot")
            return dict(app.installations)

    def add_token(self, token: str, login: str) -> None:
        with self.lock:
            if login not in self.users:
                self.add_user(login)
            self.tokens[token] = login

    def user_for_token(self, token: str) -> User | None:
        with self.lock:
            login = self.tokens.get(token)
            return self.users.get(login) if login else None

    def user_by_email(self, email: str) -> User | None:
        with self.lock:
            return next((u for u in self.users.values() if u.email and u.email.lower() == email.lower()), None)

    def create_repo(
        self,
        full_name: str,
        *,
        default_branch: str = "main",
        source: Path | str | None = None,
        description: str | None = None,
        owner_permission: str = "admin",
    ) -> Repo:
        """A repository backed by a bare git repository: empty, or a bare clone of `source`."""
        owner, name = full_name.split("/")
        with self.lock:
            if full_name.lower() in self.repos:
                raise ValueError(f"repository {full_name} already exists")
            path = self.root / owner / f"{name}.git"
            if source is not None:
                gitstore.clone_bare(Path(source), path)
                gitstore.git(path, "symbolic-ref", "HEAD", f"refs/heads/{default_branch}")
            else:
                gitstore.init_bare(path, default_branch)
            repo = Repo(owner, name, self.new_id(), path, default_branch, description)
            self.repos[full_name.lower()] = repo
            self.add_user(owner, type="Organization" if owner not in self.users else self.users[owner].type)
            self.actions.discover(repo)
            return repo

    def repo(self, full_name: str) -> Repo | None:
        with self.lock:
            return self.repos.get(full_name.lower())

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        if permission not in PERMISSIONS:
            raise ValueError(f"permission must be one of {PERMISSIONS}")
        with self.lock:
            self.add_user(login)
            repo = self._need(full_name)
            if permission == "none":
                repo.permissions.pop(login, None)
            else:
                repo.permissions[login] = permission

    # -- GitHub Actions (sandbox/actions/) --

    def bind_workflow(
        self, full_name: str, path: str, argv: list[str], env: dict | None = None, timeout: float | None = None
    ):
        """Run `argv` (in a worktree of the run's head sha) for each run of the workflow at `path`."""
        return self.actions.bind(self._need(full_name), path, argv, env, timeout)

    def start_run(
        self,
        full_name: str,
        workflow: int | str,
        ref_or_sha: str,
        event: str = "schedule",
        inputs: dict | None = None,
        actor: str | None = None,
        branch_of_sha: str | None = None,
        head_repository: str | None = None,
    ) -> int:
        """Start a workflow run (on a background runner slot); its id. `branch_of_sha` labels a run
        at a sha with the branch it stood for (an earlier nightly of that branch); `head_repository` names the
        fork a pull request's run comes from."""
        return self.actions.start(
            self._need(full_name),
            workflow,
            ref_or_sha,
            event=event,
            inputs=inputs,
            actor=actor,
            branch_of_sha=branch_of_sha,
            head_repository=head_repository,
        ).id

    def add_hook(
        self, url: str, secret: str, events: tuple[str, ...] | list[str] = ("workflow_run",), repo: str | None = None
    ):
        """Deliver signed webhooks (`workflow_run`) to `url`."""
        return self.actions.add_hook(url, secret, events, repo)

    @property
    def hook_deliveries(self) -> list[dict]:
        return self.actions.deliveries

    def _need(self, full_name: str) -> Repo:
        repo = self.repo(full_name)
        if repo is None:
            raise KeyError(full_name)
        return repo

    def add_issue(
        self,
        full_name: str,
        *,
        title: str,
        body: str | None = None,
        user: str,
        number: int | None = None,
        labels: list[str] | tuple[str, ...] = (),
        state: str = "open",
        created_at: str | None = None,
    ) -> Issue:
        with self.lock:
            repo = self._need(full_name)
            self.add_user(user)
            number = number or repo.next_number()
            if number in repo.issues:
                raise ValueError(f"{full_name}#{number} already exists")
            for label in labels:
                self.ensure_label(repo, label)
            when = created_at or now_iso()
            issue = Issue(
                number,
                self.new_id(),
                title,
                body,
                user,
                state,
                list(labels),
                when,
                when,
                when if state == "closed" else None,
            )
            repo.issues[number] = issue
            return issue

    def add_pull(
        self,
        full_name: str,
        *,
        title: str,
        body: str | None = None,
        user: str,
        head: str,
        base: str | None = None,
        number: int | None = None,
        merged: bool = False,
        merge_commit_sha: str | None = None,
        head_sha: str | None = None,
        base_sha: str | None = None,
        merged_at: str | None = None,
        created_at: str | None = None,
        state: str | None = None,
        labels: list[str] | tuple[str, ...] = (),
    ) -> Issue:
        with self.lock:
            repo = self._need(full_name)
            state = state or ("closed" if merged else "open")
            issue = self.add_issue(
                full_name,
                title=title,
                body=body,
                user=user,
                number=number,
                labels=labels,
                state=state,
                created_at=created_at,
            )
            if merged:
                issue.closed_at = merged_at or issue.created_at
            issue.pull = PullInfo(
                head,
                base or repo.default_branch,
                merged,
                merge_commit_sha,
                (merged_at or issue.created_at) if merged else None,
                head_sha,
                base_sha,
                id=self.new_id(),
            )
            return issue

    def add_comment(
        self, full_name: str, number: int, *, user: str, body: str, created_at: str | None = None
    ) -> Comment:
        with self.lock:
            repo = self._need(full_name)
            if number not in repo.issues:
                raise KeyError(f"{full_name}#{number}")
            self.add_user(user)
            when = created_at or now_iso()
            comment = Comment(self.new_id(), number, user, body, when, when)
            self.comments[comment.id] = (repo.full_name.lower(), comment)
            return comment

    def issues_of(self, repo: Repo) -> list[Issue]:
        """A snapshot of the repository's issues and pull requests (safe to iterate while others write)."""
        with self.lock:
            return list(repo.issues.values())

    def comments_of(self, repo: Repo, number: int) -> list[Comment]:
        with self.lock:
            key = repo.full_name.lower()
            return sorted(
                (c for r, c in self.comments.values() if r == key and c.issue_number == number), key=lambda c: c.id
            )

    def ensure_label(self, repo: Repo, name: str) -> dict:
        with self.lock:
            if name not in repo.labels:
                repo.labels[name] = {"id": self.new_id(), "name": name, "color": "ededed", "description": None}
            return repo.labels[name]
