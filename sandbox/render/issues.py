"""Issues, pull requests, comments and reactions in GitHub's shapes; `#N` references in text."""

from __future__ import annotations

import re

from .. import gitstore
from ..models import Comment, Issue, Reaction, Repo
from ..schema import conform
from .core import RepoRenderer, node_id


class Renderer(RepoRenderer):
    """Every body the sandbox answers with, from the request's own base URL."""

    # -- issues, pull requests, comments --

    def label(self, repo: Repo, name: str) -> dict:
        lab = self.state.ensure_label(repo, name)
        return {
            "id": lab["id"],
            "node_id": node_id("LA", lab["id"]),
            "url": f"{self.api(repo)}/labels/{name}",
            "name": name,
            "description": lab["description"],
            "color": lab["color"],
            "default": False,
        }

    def author_association(self, repo: Repo, login: str) -> str:
        if login == repo.owner:
            return "OWNER"
        return "MEMBER" if repo.permissions.get(login) in ("admin", "maintain", "write") else "CONTRIBUTOR"

    def issue(self, repo: Repo, issue: Issue, schema: str = "issue") -> dict:
        a, n = self.api(repo), issue.number
        kind = "pull" if issue.pull else "issues"
        body = {
            "id": issue.id,
            "node_id": node_id("I", issue.id),
            "url": f"{a}/issues/{n}",
            "repository_url": a,
            "labels_url": f"{a}/issues/{n}/labels{{/name}}",
            "comments_url": f"{a}/issues/{n}/comments",
            "events_url": f"{a}/issues/{n}/events",
            "html_url": f"{self.html(repo)}/{kind}/{n}",
            "number": n,
            "state": issue.state,
            "title": issue.title,
            "body": issue.body,
            "user": self.user(issue.user, "nullable-simple-user"),
            "labels": [self.label(repo, name) for name in issue.labels],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": False,
            "active_lock_reason": None,
            "comments": len(self.state.comments_of(repo, n)),
            "closed_at": issue.closed_at,
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "author_association": self.author_association(repo, issue.user),
            "timeline_url": f"{a}/issues/{n}/timeline",
            "draft": bool(issue.pull and issue.pull.draft),
        }
        if issue.state == "closed":
            body["state_reason"] = "completed"
        if issue.pull:
            body["pull_request"] = {
                "url": f"{a}/pulls/{n}",
                "html_url": f"{self.html(repo)}/pull/{n}",
                "diff_url": f"{self.html(repo)}/pull/{n}.diff",
                "patch_url": f"{self.html(repo)}/pull/{n}.patch",
                "merged_at": issue.pull.merged_at,
            }
        if schema == "issue-search-result-item":
            body["score"] = 1.0  # GitHub's search relevance; the sandbox ranks by date alone
        return conform(body, schema, self.base)

    def pull_shas(self, repo: Repo, issue: Issue) -> tuple[str | None, str | None]:
        p = issue.pull
        head = p.head_sha if p.merged and p.head_sha else gitstore.resolve(repo.path, f"refs/heads/{p.head}")
        base = p.base_sha if p.merged and p.base_sha else gitstore.resolve(repo.path, f"refs/heads/{p.base}")
        return head or p.head_sha, base or p.base_sha

    def pull(self, repo: Repo, issue: Issue, schema: str = "pull-request") -> dict:
        p, a, n = issue.pull, self.api(repo), issue.number
        head_sha, base_sha = self.pull_shas(repo, issue)
        repo_body = self.repo(repo, schema="repository")
        body = {
            "url": f"{a}/pulls/{n}",
            "id": p.id,
            "node_id": node_id("PR", p.id),
            "html_url": f"{self.html(repo)}/pull/{n}",
            "diff_url": f"{self.html(repo)}/pull/{n}.diff",
            "patch_url": f"{self.html(repo)}/pull/{n}.patch",
            "issue_url": f"{a}/issues/{n}",
            "commits_url": f"{a}/pulls/{n}/commits",
            "review_comments_url": f"{a}/pulls/{n}/comments",
            "review_comment_url": f"{a}/pulls/comments{{/number}}",
            "comments_url": f"{a}/issues/{n}/comments",
            "statuses_url": f"{a}/statuses/{head_sha or ''}",
            "number": n,
            "state": issue.state,
            "locked": False,
            "title": issue.title,
            "user": self.user(issue.user),
            "body": issue.body,
            "labels": [self.label(repo, name) for name in issue.labels],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": issue.created_at,
            "updated_at": issue.updated_at,
            "closed_at": issue.closed_at,
            "merged_at": p.merged_at,
            "merge_commit_sha": p.merge_commit_sha,
            "assignee": None,
            "assignees": [],
            "requested_teams": [],
            "requested_reviewers": [self.user(r) for r in p.requested_reviewers],
            "head": {
                "label": f"{repo.owner}:{p.head}",
                "ref": p.head,
                "sha": head_sha or "",
                "user": self.user(repo.owner),
                "repo": repo_body,
            },
            "base": {
                "label": f"{repo.owner}:{p.base}",
                "ref": p.base,
                "sha": base_sha or "",
                "user": self.user(repo.owner),
                "repo": repo_body,
            },
            "_links": {
                k: {"href": v}
                for k, v in {
                    "self": f"{a}/pulls/{n}",
                    "html": f"{self.html(repo)}/pull/{n}",
                    "issue": f"{a}/issues/{n}",
                    "comments": f"{a}/issues/{n}/comments",
                    "review_comments": f"{a}/pulls/{n}/comments",
                    "review_comment": f"{a}/pulls/comments{{/number}}",
                    "commits": f"{a}/pulls/{n}/commits",
                    "statuses": f"{a}/statuses/{head_sha or ''}",
                }.items()
            },
            "author_association": self.author_association(repo, issue.user),
            "auto_merge": None,
            "draft": p.draft,
        }
        if schema == "pull-request":
            commits = self.pull_commits(repo, issue)
            body.update(
                {
                    "merged": p.merged,
                    "mergeable": None if p.merged else True,
                    "rebaseable": None,
                    "mergeable_state": "clean" if not p.merged else "unknown",
                    "merged_by": None,
                    "comments": len(self.state.comments_of(repo, n)),
                    "review_comments": 0,
                    "maintainer_can_modify": False,
                    "commits": len(commits),
                    "additions": 0,
                    "deletions": 0,
                    "changed_files": 0,
                }
            )
        return conform(body, schema, self.base)

    def pull_commits(self, repo: Repo, issue: Issue) -> list[dict]:
        p = issue.pull
        if p.merged and p.merge_commit_sha:
            return [gitstore.commit(repo.path, p.merge_commit_sha)]
        head, base = self.pull_shas(repo, issue)
        if not head:
            return []
        return gitstore.log(repo.path, f"{base}..{head}" if base else head, reverse=True)

    def comment(self, repo: Repo, c: Comment) -> dict:
        a = self.api(repo)
        kind = "pull" if repo.issues[c.issue_number].pull else "issues"
        body = {
            "id": c.id,
            "node_id": node_id("IC", c.id),
            "url": f"{a}/issues/comments/{c.id}",
            "html_url": f"{self.html(repo)}/{kind}/{c.issue_number}#issuecomment-{c.id}",
            "body": c.body,
            "user": self.user(c.user, "nullable-simple-user"),
            "created_at": c.created_at,
            "updated_at": c.updated_at,
            "issue_url": f"{a}/issues/{c.issue_number}",
            "author_association": self.author_association(repo, c.user),
        }
        return conform(body, "issue-comment", self.base)

    def reaction(self, r: Reaction) -> dict:
        return conform(
            {
                "id": r.id,
                "node_id": node_id("RE", r.id),
                "user": self.user(r.user, "nullable-simple-user"),
                "content": r.content,
                "created_at": r.created_at,
            },
            "reaction",
            self.base,
        )


REF_PATTERN = re.compile(r"(?:(?<![\w/])|(?<=\s))(?:([\w.-]+/[\w.-]+))?#(\d+)\b")


def references(text: str | None, repo: Repo) -> set[int]:
    """Issue/PR numbers of `repo` that `text` mentions (`#N` or `owner/repo#N`)."""
    out = set()
    for slug, number in REF_PATTERN.findall(text or ""):
        if not slug or slug.lower() == repo.full_name.lower():
            out.add(int(number))
    return out
