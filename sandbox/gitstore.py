"""Read-only views of a bare git repository through the `git` CLI (refs, commits, diffs)."""

from __future__ import annotations

import os
import subprocess
from functools import lru_cache
from pathlib import Path

_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
SEP = "\x1f"
REC = "\x1e"
_FORMAT = SEP.join(["%H", "%T", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI", "%B"]) + REC


class GitError(RuntimeError):
    pass


def git(repo: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    proc = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, env=_ENV, check=False)
    if check and proc.returncode != 0:
        raise GitError(proc.stderr.decode(errors="replace").strip())
    return proc.stdout.decode(errors="replace")


def git_env(repo: Path, env: dict[str, str], *args: str) -> str:
    """`git` with more environment (a commit's author and committer)."""
    proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env={**_ENV, **env}, check=False)
    if proc.returncode != 0:
        raise GitError(proc.stderr.decode(errors="replace").strip())
    return proc.stdout.decode(errors="replace")


def init_bare(path: Path, default_branch: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "init", "-q", "--bare", "-b", default_branch, str(path)], check=True, capture_output=True, env=_ENV
    )
    _configure(path)


def clone_bare(source: Path, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["git", "clone", "-q", "--bare", "--no-local", str(source), str(path)],
        check=True,
        capture_output=True,
        env=_ENV,
    )
    _configure(path)


def _configure(path: Path) -> None:
    git(path, "config", "http.receivepack", "true")
    git(path, "config", "receive.denyNonFastForwards", "false")


def resolve(repo: Path, rev: str) -> str | None:
    """A commit sha for a sha, branch, tag or other revision; None when it names no commit."""
    if not rev or rev.startswith("-"):
        return None
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "-q", f"{rev}^{{commit}}"],
        capture_output=True,
        env=_ENV,
        check=False,
    )
    return out.stdout.decode().strip() if out.returncode == 0 else None


def ref_sha(repo: Path, ref: str) -> str | None:
    """The object a full ref name (refs/...) points at, or None."""
    out = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "-q", ref], capture_output=True, env=_ENV, check=False
    )
    if out.returncode != 0 or git(repo, "for-each-ref", "--format=%(refname)", ref).strip() != ref:
        return None
    return out.stdout.decode().strip()


def valid_ref(ref: str) -> bool:
    return subprocess.run(["git", "check-ref-format", ref], capture_output=True, env=_ENV, check=False).returncode == 0


def object_type(repo: Path, sha: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "cat-file", "-t", sha], capture_output=True, env=_ENV, check=False)
    return out.stdout.decode().strip() if out.returncode == 0 else None


def update_ref(repo: Path, ref: str, sha: str) -> None:
    git(repo, "update-ref", ref, sha)


def delete_ref(repo: Path, ref: str) -> None:
    git(repo, "update-ref", "-d", ref)


def branches(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def _parse(out: str) -> list[dict]:
    commits = []
    for rec in out.split(REC):
        rec = rec.lstrip("\n")
        if not rec:
            continue
        f = rec.split(SEP)
        commits.append(
            {
                "sha": f[0],
                "tree": f[1],
                "parents": f[2].split(),
                "author": {"name": f[3], "email": f[4], "date": f[5]},
                "committer": {"name": f[6], "email": f[7], "date": f[8]},
                "message": f[9].rstrip("\n"),
            }
        )
    return commits


def log(
    repo: Path,
    *revs: str,
    max_count: int | None = None,
    skip: int = 0,
    paths: tuple[str, ...] = (),
    reverse: bool = False,
) -> list[dict]:
    args = ["log", f"--format={_FORMAT}"]
    if max_count is not None:
        args.append(f"--max-count={max_count}")
    if skip:
        args.append(f"--skip={skip}")
    if reverse:
        args.append("--reverse")
    return _parse(git(repo, *args, *revs, "--", *paths))


def commit(repo: Path, sha: str) -> dict:
    """A commit's fields; a full sha names content that never changes, so that answer is kept (run and
    webhook payloads render the same head commit many times)."""
    if len(sha) == 40:
        return dict(_commit_of(repo, sha))
    return _parse(git(repo, "show", "-s", f"--format={_FORMAT}", sha))[0]


@lru_cache(maxsize=1024)
def _commit_of(repo: Path, sha: str) -> dict:
    return _parse(git(repo, "show", "-s", f"--format={_FORMAT}", sha))[0]


def count(repo: Path, rng: str) -> int:
    return int(git(repo, "rev-list", "--count", rng).strip() or 0)


def merge_base(repo: Path, a: str, b: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo), "merge-base", a, b], capture_output=True, env=_ENV, check=False)
    return out.stdout.decode().strip() if out.returncode == 0 else None


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied", "T": "changed"}


# hunk headers from git's default driver, whatever attributes the caller's global git config names (GitHub's are not
# guaranteed to name a Python method: docs/github-contract.md)
_DEFAULT_DRIVER = ("-c", "core.attributesFile=/dev/null")


def files(repo: Path, old: str | None, new: str) -> list[dict]:
    """The files changed between two commits (old None: against the empty tree), with patch text."""
    base = old or git(repo, "hash-object", "-t", "tree", "/dev/null").strip()
    status = git(repo, "diff", "--no-renames", "--name-status", base, new)
    numstat = git(repo, "diff", "--no-renames", "--numstat", base, new)
    counts = {}
    for line in numstat.splitlines():
        add, rem, path = line.split("\t", 2)
        counts[path] = (int(add) if add != "-" else 0, int(rem) if rem != "-" else 0)
    out = []
    for line in status.splitlines():
        code, path = line.split("\t", 1)
        add, rem = counts.get(path, (0, 0))
        patch = git(
            repo, *_DEFAULT_DRIVER, "diff", "--no-renames", "--no-color", "--no-ext-diff", base, new, "--", path
        )
        hunk = patch.find("\n@@")
        blob = git(repo, "rev-parse", f"{new if code[0] != 'D' else base}:{path}").strip()
        out.append(
            {
                "filename": path,
                "status": _STATUS.get(code[0], "modified"),
                "additions": add,
                "deletions": rem,
                "changes": add + rem,
                "sha": blob,
                "patch": patch[hunk + 1 :] if hunk >= 0 else "",
            }
        )
    return out


def blob(repo: Path, sha: str) -> bytes | None:
    """A blob's bytes (None when `sha` names no blob)."""
    if object_type(repo, sha) != "blob":
        return None
    return subprocess.run(["git", "-C", str(repo), "cat-file", "blob", sha], capture_output=True, env=_ENV).stdout
