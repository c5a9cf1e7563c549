"""Check that bot.synthetic's fast-import builder writes the same history as the one-commit-at-a-time builder.

    python bench/check_synthetic.py

For each case, both builders run. The check compares the commit ids, the refs, HEAD, the working
tree files, a clean `git status` and the test script. It prints one line per case and exits 1 on
the first difference.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.synthetic import build  # noqa: E402

CASES = [
    dict(commits=20, culprit=7),
    dict(commits=1, culprit=1),
    dict(commits=10, culprit=99),  # no commit breaks it
    dict(commits=30, culprit=30, unbuildable=frozenset({3, 4, 29})),
    dict(commits=12, culprit=5, merge_at=8, side_commits=4, side_culprit=2),
    dict(commits=12, culprit=9, merge_at=8, side_commits=3),
    dict(commits=12, culprit=7, merge_at=8, side_commits=3, side_culprit=3),
    dict(commits=12, culprit=7, merge_at=1, side_commits=2, side_culprit=1),
    dict(commits=12, culprit=3, merge_at=2, side_commits=2),
    dict(commits=12, culprit=10, merge_at=6, side_commits=2, unbuildable=frozenset({4, 5, 7})),
    dict(commits=12, culprit=10, merge_at=6, side_commits=2, unbuildable=frozenset({5})),
]


def snapshot(path: Path) -> tuple:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=True).stdout

    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if ".git" not in p.relative_to(path).parts)
    return git("for-each-ref", "--format=%(refname) %(objectname)"), git("status", "--porcelain"), git("symbolic-ref", "HEAD"), files


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(CASES):
            slow = build(Path(tmp) / f"slow{i}" / "repo", sleep=0.1, flake=0.05, fast=False, **case)
            fast = build(Path(tmp) / f"fast{i}" / "repo", sleep=0.1, flake=0.05, **case)
            checks = {
                "commit ids": (slow.good, slow.bad, slow.culprit, slow.shas) == (fast.good, fast.bad, fast.culprit, fast.shas),
                "refs, status and files": snapshot(slow.path) == snapshot(fast.path),
                "test script": slow.test_script.read_text() == fast.test_script.read_text(),
            }
            failed = [name for name, ok in checks.items() if not ok]
            print(f"{case}: {'same' if not failed else 'DIFFERENT ' + ', '.join(failed)}")
            if failed:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
