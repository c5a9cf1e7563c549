"""The renderer's base: node ids, URLs from the request's own base URL (`base`), and the bodies of users,
repositories, commits and git refs in GitHub's shapes."""

from __future__ import annotations

import base64

from .. import gitstore
from ..models import Repo, SandboxStore, User
from ..schema import conform

DOCS = "https://docs.github.com/rest"


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode().rstrip("=")


class RepoRenderer:
    def __init__(self, state: SandboxStore, base: str) -> None:
        self.state = state
        self.base = base.rstrip("/")

    def api(self, repo: Repo) -> str:
        return f"{self.base}/repos/{repo.full_name}"

    def html(self, repo: Repo) -> str:
        return f"{self.base}/{repo.full_name}"

    # -- users --

    def user(self, login: str | None, schema: str = "simple-user", **extra) -> dict | None:
        """A user as `schema` describes one; `extra`: the fields that schema adds (a collaborator's role_name)."""
        if login is None:
            return None
        user = self.state.users.get(login) or User(login, 0)
        u = f"{self.base}/users/{user.login}"
        body = {
            "login": user.login,
            "id": user.id,
            "node_id": node_id("U", user.id),
            "type": user.type,
            "avatar_url": f"{self.base}/avatars/{user.login}",
            "gravatar_id": "",
            "url": u,
            "html_url": f"{self.base}/{user.login}",
            "followers_url": f"{u}/followers",
            "following_url": f"{u}/following{{/other_user}}",
            "gists_url": f"{u}/gists{{/gist_id}}",
            "starred_url": f"{u}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{u}/subscriptions",
            "organizations_url": f"{u}/orgs",
            "repos_url": f"{u}/repos",
            "events_url": f"{u}/events{{/privacy}}",
            "received_events_url": f"{u}/received_events",
            "site_admin": False,
            "user_view_type": "public",
        }
        if user.name:
            body["name"] = user.name
        if user.email:
            body["email"] = user.email
        body.update(extra)
        return conform(body, schema, self.base)

    # -- repositories --

    def repo(self, repo: Repo, viewer: str | None = None, schema: str = "full-repository") -> dict:
        a, h = self.api(repo), self.html(repo)
        perm = repo.permissions.get(viewer or "", "none")
        order = ["read", "triage", "write", "maintain", "admin"]
        level = order.index(perm) if perm in order else -1
        body = {
            "id": repo.id,
            "node_id": node_id("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": self.user(repo.owner),
            "private": repo.private,
            "html_url": h,
            "description": repo.description,
            "fork": False,
            "url": a,
            "default_branch": repo.default_branch,
            "visibility": "public",
            "archived": False,
            "disabled": False,
            "created_at": repo.created_at,
            "updated_at": repo.created_at,
            "pushed_at": repo.created_at,
            "clone_url": f"{h}.git",
            "git_url": f"{h}.git",
            "ssh_url": f"{h}.git",
            "svn_url": h,
            "mirror_url": None,
            "homepage": None,
            "license": None,  # GitHub's answer for a repository without a detected licence
            "language": "Python",
            "permissions": {
                "admin": level >= 4,
                "maintain": level >= 3,
                "push": level >= 2,
                "triage": level >= 1,
                "pull": True,
            },
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_downloads": False,
            "has_discussions": False,
            "is_template": False,
            "allow_forking": True,
            "web_commit_signoff_required": False,
            "topics": [],
            "forks_count": 0,
            "forks": 0,
            "stargazers_count": 0,
            "watchers_count": 0,
            "watchers": 0,
            "size": 0,
            "open_issues_count": sum(1 for i in self.state.issues_of(repo) if i.state == "open"),
            "open_issues": sum(1 for i in self.state.issues_of(repo) if i.state == "open"),
            "network_count": 0,
            "subscribers_count": 0,
        }
        for key, suffix in [
            ("archive_url", "/{archive_format}{/ref}"),
            ("assignees_url", "/assignees{/user}"),
            ("blobs_url", "/git/blobs{/sha}"),
            ("branches_url", "/branches{/branch}"),
            ("collaborators_url", "/collaborators{/collaborator}"),
            ("comments_url", "/comments{/number}"),
            ("commits_url", "/commits{/sha}"),
            ("compare_url", "/compare/{base}...{head}"),
            ("contents_url", "/contents/{+path}"),
            ("contributors_url", "/contributors"),
            ("deployments_url", "/deployments"),
            ("downloads_url", "/downloads"),
            ("events_url", "/events"),
            ("forks_url", "/forks"),
            ("git_commits_url", "/git/commits{/sha}"),
            ("git_refs_url", "/git/refs{/sha}"),
            ("git_tags_url", "/git/tags{/sha}"),
            ("hooks_url", "/hooks"),
            ("issue_comment_url", "/issues/comments{/number}"),
            ("issue_events_url", "/issues/events{/number}"),
            ("issues_url", "/issues{/number}"),
            ("keys_url", "/keys{/key_id}"),
            ("labels_url", "/labels{/name}"),
            ("languages_url", "/languages"),
            ("merges_url", "/merges"),
            ("milestones_url", "/milestones{/number}"),
            ("notifications_url", "/notifications{?since,all,participating}"),
            ("pulls_url", "/pulls{/number}"),
            ("releases_url", "/releases{/id}"),
            ("stargazers_url", "/stargazers"),
            ("statuses_url", "/statuses/{sha}"),
            ("subscribers_url", "/subscribers"),
            ("subscription_url", "/subscription"),
            ("tags_url", "/tags"),
            ("teams_url", "/teams"),
            ("trees_url", "/git/trees{/sha}"),
        ]:
            body[key] = a + suffix
        return conform(body, schema, self.base)

    # -- commits --

    def _git_user(self, ident: dict) -> dict | None:
        user = self.state.user_by_email(ident["email"])
        return self.user(user.login) if user else None  # GitHub: null for an identity it cannot map

    def commit(self, repo: Repo, c: dict, with_files: bool = False) -> dict:
        a = self.api(repo)
        body = {
            "url": f"{a}/commits/{c['sha']}",
            "sha": c["sha"],
            "node_id": node_id("C", c["sha"][:12]),
            "html_url": f"{self.html(repo)}/commit/{c['sha']}",
            "comments_url": f"{a}/commits/{c['sha']}/comments",
            "commit": {
                "url": f"{a}/git/commits/{c['sha']}",
                "author": c["author"],
                "committer": c["committer"],
                "message": c["message"],
                "comment_count": 0,
                "tree": {"sha": c["tree"], "url": f"{a}/git/trees/{c['tree']}"},
                "verification": {
                    "verified": False,
                    "reason": "unsigned",
                    "signature": None,
                    "payload": None,
                    "verified_at": None,
                },
            },
            "author": self._git_user(c["author"]),
            "committer": self._git_user(c["committer"]),
            "parents": [
                {"sha": p, "url": f"{a}/commits/{p}", "html_url": f"{self.html(repo)}/commit/{p}"} for p in c["parents"]
            ],
        }
        if with_files:
            files = gitstore.files(repo.path, c["parents"][0] if c["parents"] else None, c["sha"])
            body["files"] = [self.file(repo, c["sha"], f) for f in files]
            add, rem = sum(f["additions"] for f in files), sum(f["deletions"] for f in files)
            body["stats"] = {"additions": add, "deletions": rem, "total": add + rem}
        return conform(body, "commit", self.base)

    def file(self, repo: Repo, sha: str, f: dict) -> dict:
        return {
            **f,
            "blob_url": f"{self.html(repo)}/blob/{sha}/{f['filename']}",
            "raw_url": f"{self.html(repo)}/raw/{sha}/{f['filename']}",
            "contents_url": f"{self.api(repo)}/contents/{f['filename']}?ref={sha}",
        }

    def git_ref(self, repo: Repo, ref: str, sha: str) -> dict:
        kind = gitstore.object_type(repo.path, sha) or "commit"
        return {
            "ref": ref,
            "node_id": node_id("REF", ref),
            "url": f"{self.api(repo)}/git/{ref}",
            "object": {"type": kind, "sha": sha, "url": f"{self.api(repo)}/git/{kind}s/{sha}"},
        }
