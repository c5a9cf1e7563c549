"""The code host, through PyGithub: the few reads and writes the bot makes, each write looked up first.

Idempotence is by content the bot can find again: a PR by its head branch, a comment by a hidden
marker in its body, a branch by its name. A retry after a crash never makes a second one.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

from github import Auth, Github, GithubException, GithubRetry
from github.Repository import Repository

from bot.adapters.github.actions import GitHubActions
from bot.adapters.github.downloads import Downloads
from bot.adapters.github.followups import FollowupFinder
from bot.adapters.github.runs import CiRuns
from bot.adapters.github.writes import TRANSPORT_METHODS, for_client, register, writes_of
from bot.domain.body_limit import fit
from bot.ports import CulpritFacts, Followups, PullRef, Skipped

MARKER = "<!-- revert-bisect:{key} -->"
FIXES_KEYWORDS = re.compile(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\s+#(\d+)")


def _message(exc: GithubException) -> str:
    data = exc.data if isinstance(exc.data, dict) else {}
    return str(data.get("message") or exc)


CONNECT_RETRIES = 2  # a refused connection or a connect timeout is tried 3 times, then the job is parked
READ_RETRIES = 3


def retry_policy(*, patient: bool) -> GithubRetry:
    """Retry 5xx, 429 and secondary rate limits (honouring Retry-After) on the idempotent methods only.

    Never POST: a POST whose answer was lost may have been done, and sent again it makes a second comment, issue, PR
    or run. The bot retries its POSTs itself, each looked up first (bot.adapters.github.writes). A connection refused
    before the request went out is still retried here, on every method (urllib3's connect retries), but only
    `CONNECT_RETRIES` times, and a timeout `READ_RETRIES` times: when GitHub does not answer at all, the job waits
    for it parked, not in the transport (bot.domain.patience, bot.observability.reachability)."""
    return GithubRetry(
        total=10,
        connect=CONNECT_RETRIES,
        read=READ_RETRIES,
        backoff_factor=1.0 if patient else 0.02,
        secondary_rate_wait=60 if patient else 1,
        status_forcelist=list(range(500, 600)) + [429],
        allowed_methods=TRANSPORT_METHODS,
    )


def connect(base_url: str, token: str, *, throttle: bool = True, timeout: int = 15) -> Github:
    """A PyGithub client on any host that builds its URLs from `base_url` (GitHub, GHE, the sandbox).

    `throttle=False` (a local sandbox) drops PyGithub's pauses between requests and retries fast."""
    pauses = {} if throttle else dict(seconds_between_requests=0, seconds_between_writes=0)
    gh = Github(
        base_url=base_url.rstrip("/"),
        auth=Auth.Token(token),
        retry=retry_policy(patient=throttle),
        timeout=timeout,
        **pauses,
    )
    return register(gh, for_client(patient=throttle, timeout=timeout))


def marker(key: str) -> str:
    return MARKER.format(key=re.sub(r"[^A-Za-z0-9_.:/-]", "-", key))


class GitHubForge(CiRuns):
    """bot.ports.Forge and bot.ports.CiReads (its CiRuns) on PyGithub. `gh` and `repo` are this adapter's own: callers
    use the methods (tests may read the sandbox through `repo`)."""

    def __init__(self, gh: Github, repo_slug: str):
        self.gh = gh
        self.repo: Repository = gh.get_repo(repo_slug)
        self.writes = writes_of(gh)  # how a POST is retried: looked up first (bot.adapters.github.writes)
        self.downloads = Downloads(self.repo.requester)  # logs and artifacts: GitHub's redirect, then another host
        self._comments: dict[tuple[int, str], tuple[int, str]] = {}  # (thread, key) -> (comment id, text shown)

    # -- reads --

    @property
    def site(self) -> str:
        return self.repo.html_url

    @property
    def slug(self) -> str:
        return self.repo.full_name

    def culprit_facts(self, sha: str, subject_pr: int | None) -> CulpritFacts:
        """The culprit's PR as GitHub links it to the commit, else the `(#N)` its squash subject names."""
        pulls = self.pulls_for_commit(sha)
        number = pulls[0] if pulls else subject_pr
        if not number:
            return CulpritFacts(None, None, None, ())
        pr = self.repo.get_pull(number)
        return CulpritFacts(number, pr.title, pr.user.login, tuple(label.name for label in pr.labels))

    def actions(self, workflow: str) -> GitHubActions:
        return GitHubActions(self.repo, workflow, self.writes)

    def role(self, user: str) -> str | None:
        """admin | maintain | write | triage | read (or a custom role's name), or None for a stranger (the only
        trustworthy check): GitHub answers a user without access with an empty role_name, an unknown one 404."""
        try:
            return self.repo.get_collaborator_role_name(user) or None
        except GithubException as exc:
            if exc.status == 404:
                return None
            raise

    def pulls_for_commit(self, sha: str) -> list[int]:
        return [p.number for p in self.repo.get_commit(sha).get_pulls()]

    def open_pr_for_head(self, branch: str) -> PullRef | None:
        owner = self.repo.owner.login
        for pr in self.repo.get_pulls(state="open", head=f"{owner}:{branch}"):
            return PullRef(pr.number, pr.html_url, branch, False)
        return None

    def open_revert_of(self, culprit_pr: int, ours: str | None = None) -> int | None:
        """An open PR that already reverts the culprit PR (GitHub's own revert button writes `Reverts o/r#N`),
        other than one from the bot's own branch `ours` (a publish cut short by a crash, to be finished).

        Read from the culprit PR's timeline: a PR whose body names it is cross-referenced there. One page of
        one PR's events, not a scan of every open PR (thousands on a busy repository), and, unlike issue search,
        not eventually consistent."""
        slug = self.repo.full_name
        for event in self.repo.get_issue(culprit_pr).get_timeline():
            if event.event != "cross-referenced":
                continue
            source = (event.raw_data.get("source") or {}).get("issue") or {}
            number, title, body = source.get("number"), source.get("title") or "", source.get("body") or ""
            if not number or "pull_request" not in source or source.get("state") != "open":
                continue
            if f"Reverts {slug}#{culprit_pr}" in body or title.startswith("Revert ") and f"#{culprit_pr}" in body:
                if ours is None or self.repo.get_pull(number).head.ref != ours:
                    return number
        return None

    # -- writes, each looked up first, and looked up again before a retry --

    def open_pr(self, title: str, body: str, head: str, base: str, draft: bool = False) -> PullRef:
        body = fit(body)  # GitHub refuses a longer one (422): never sent
        existing = self.open_pr_for_head(head)
        if existing:
            return existing

        def ours() -> PullRef | None:  # a retry's lookup: an earlier attempt made it
            found = self.open_pr_for_head(head)
            return replace(found, created=True) if found else None

        def create() -> PullRef:
            try:
                pr = self.repo.create_pull(base=base, head=head, title=title, body=body, draft=draft)
            except GithubException as exc:  # "A pull request already exists": an earlier attempt made it after all
                if exc.status == 422 and "already exists" in str(exc.data) and (found := ours()):
                    return found
                raise
            return PullRef(pr.number, pr.html_url, head, True)

        return self.writes.make(f"opening the PR from {head}", create, ours)

    def add_labels(self, number: int, labels: list[str]) -> None:
        """Adding a label the issue has changes nothing on GitHub: sent again as it is."""
        if labels:
            issue = self.repo.get_issue(number)
            self.writes.make(f"labelling #{number}", lambda: issue.add_to_labels(*labels), idempotent=True)

    def request_review(self, number: int, reviewers: list[str]) -> list[Skipped]:
        """Review requested from each of `reviewers` who can review; the others skipped, with GitHub's reason.

        GitHub refuses the whole request with 422 when one of them is not a collaborator ("Reviews may only be
        requested from collaborators"), common for an outside contributor's culprit: then each is asked alone."""
        wanted = list(dict.fromkeys(r for r in reviewers if r))
        if not wanted:
            return []
        pull = self.repo.get_pull(number)

        def ask(names: list[str]) -> None:  # a review request is a set on GitHub's side: sent again as it is
            self.writes.make(
                f"requesting review on #{number}", lambda: pull.create_review_request(reviewers=names), idempotent=True
            )

        try:
            ask(wanted)
            return []
        except GithubException as exc:
            if exc.status != 422:
                raise
            if len(wanted) == 1:
                return [Skipped(wanted[0], _message(exc))]
        skipped = []
        for name in wanted:
            try:
                ask([name])
            except GithubException as exc:
                if exc.status != 422:
                    raise
                skipped.append(Skipped(name, _message(exc)))
        return skipped

    def comment_once(self, number: int, key: str, body: str) -> tuple[int, bool]:
        """Post `body` on issue/PR `number` unless a comment with the same key exists; then update it.

        The comment's id is kept once known: a status comment edited every few minutes costs one PATCH, and
        nothing when its text did not change, not a listing of every comment of the thread each time."""
        tag = marker(key)
        text = fit(f"{tag}\n{body}")  # GitHub refuses a longer one (422): never sent
        known = self._comments.get((number, key))
        if known is not None:
            comment_id, shown = known
            if shown == text:
                return comment_id, False
            try:
                url = f"{self.repo.url}/issues/comments/{comment_id}"
                self.repo.requester.requestJsonAndCheck("PATCH", url, input={"body": text})
                self._comments[(number, key)] = (comment_id, text)
                return comment_id, False
            except GithubException as exc:
                if exc.status != 404:
                    raise
                del self._comments[(number, key)]  # deleted on GitHub: looked up (and made) again below
        comment_id, created = self._comment_once(number, tag, text)
        self._comments[(number, key)] = (comment_id, text)
        return comment_id, created

    def _comment_once(self, number: int, tag: str, text: str) -> tuple[int, bool]:
        issue = self.repo.get_issue(number)

        def find():
            for comment in issue.get_comments():
                if tag in (comment.body or ""):
                    return comment
            return None

        comment = find()
        if comment is not None:
            if comment.body != text:
                comment.edit(text)  # PATCH: the same body twice is the same comment, so the transport retries it
            return comment.id, False
        made = self.writes.make(f"commenting on #{number}", lambda: issue.create_comment(text), find)
        if made.body != text:  # found by its marker after a lost answer, with an older text
            made.edit(text)
        return made.id, True

    def ensure_issue(self, key: str, title: str, body: str) -> tuple[int, bool]:
        """An open issue carrying `key`'s marker, found by search or among the newest open issues, else created."""
        tag = marker(key)
        query = f'repo:{self.repo.full_name} is:issue is:open "revert-bisect:{key}"'

        def recent() -> int | None:  # search lags behind a write: the newest open issues are read directly
            for n, issue in enumerate(self.repo.get_issues(state="open", sort="created", direction="desc")):
                if n >= 100:
                    break
                if issue.pull_request is None and tag in (issue.body or ""):
                    return issue.number
            return None

        for issue in self.gh.search_issues(query):
            if tag in (issue.body or ""):
                return issue.number, False
        if (number := recent()) is not None:
            return number, False
        make = lambda: self.repo.create_issue(title=title, body=fit(f"{tag}\n{body}")).number  # noqa: E731
        return self.writes.make(f"opening the issue {key}", make, recent), True

    def react(self, number: int, comment_id: int, content: str) -> None:
        """Reactions are idempotent on GitHub's side (the same user and content answer 200): sent again as they are."""
        comment = self.repo.get_issue(number).get_comment(comment_id)
        self.writes.make(f"reacting to comment {comment_id}", lambda: comment.create_reaction(content), idempotent=True)

    def kill_switch(self, label: str, allowed_roles: list[str], allowed_users: list[str]) -> int | None:
        """An open issue carrying `label`, opened by someone allowed to command the bot (anyone could add a label
        to their own issue otherwise). Listed by label, not searched: search lags behind writes, and a switch turned on
        a moment ago must hold the next revert."""
        for issue in self.repo.get_issues(state="open", labels=[label]):
            if issue.pull_request is not None:
                continue
            login = issue.user.login if issue.user else None
            if login and (login in allowed_users or self.role(login) in allowed_roles):
                return issue.number
        return None

    def reverts_opened_since(self, since: datetime, bot_branch_prefix: str = "revert-bisect/") -> int:
        """Revert PRs the bot opened since `since` (any state: a closed one still counted against the cap)."""
        count = 0
        for pr in self.repo.get_pulls(state="all", sort="created", direction="desc"):
            created = pr.created_at if pr.created_at.tzinfo else pr.created_at.replace(tzinfo=UTC)
            if created < since:
                break
            count += pr.head.ref.startswith(bot_branch_prefix)
        return count

    def followup_for(self, culprit_pr: int) -> Followups:
        """Where the culprit's proper fix is worked on, within the finder's request budget
        (bot.adapters.github.followups)."""
        return FollowupFinder(self.repo).find(culprit_pr)
