"""GitHub's refusal of a push that creates or changes a workflow file without the right to.

A push through a GitHub App's installation token lacking the `workflows` permission, or a classic token lacking
the `workflow` scope, that creates, changes or deletes a file under `.github/workflows/` is refused:

    ! [remote rejected] x -> x (refusing to allow a GitHub App to create or update workflow
      `.github/workflows/ci.yml` without `workflows` permission)

(REALITY.md, "GitHub: writes"; GitHub docs, "Permissions required for GitHub Apps": Workflows, "Scopes for OAuth
apps": workflow). The sandbox checks the pushed commits in a pre-receive hook, run by `git receive-pack` under
`git http-backend` only for such a pusher; the refusal reaches the client on its `remote:` lines with GitHub's
words, and the ref as `[remote rejected] (pre-receive hook declined)`.

Classic tokens have every scope by default here; `without_workflow_scope(state, token)` takes the scope away.
"""

from __future__ import annotations

import threading
import weakref
from pathlib import Path
from typing import Any

HOOK = """#!/bin/sh
# the sandbox's GitHub check (sandbox/workflow_push.py): commits that touch .github/workflows/ are refused
zero=0000000000000000000000000000000000000000
status=0
while read -r old new ref; do
  [ "$new" = "$zero" ] && continue
  hit=$(git rev-list "$new" --not --all | while read -r commit; do
          git diff-tree --no-commit-id --name-only -r --root -m "$commit"
        done | grep '^\\.github/workflows/' | head -n 1)
  if [ -n "$hit" ]; then
    printf 'refusing to allow %s to create or update workflow `%s` without %s\\n' \\
      "$SANDBOX_WORKFLOW_PUSHER" "$hit" "$SANDBOX_WORKFLOW_RIGHT" >&2
    status=1
  fi
done
exit $status
"""

APP = ("a GitHub App", "`workflows` permission")
CLASSIC = ("a Personal Access Token", "`workflow` scope")

_SCOPELESS: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def without_workflow_scope(state: Any, token: str) -> None:
    """A classic token of this sandbox made without the `workflow` scope."""
    with _LOCK:
        _SCOPELESS.setdefault(state, set()).add(token)


def refusal_env(state: Any, token: str | None) -> dict[str, str]:
    """The environment for `git http-backend` that has receive-pack refuse workflow changes for this pusher
    ({} when the pusher may change workflows)."""
    if not token:
        return {}
    granted = state.apps.permissions_of(token)
    if granted is not None:
        if granted.get("workflows") == "write":
            return {}
        who, right = APP
    else:
        with _LOCK:
            if token not in _SCOPELESS.get(state, ()):
                return {}
        who, right = CLASSIC
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.hooksPath",
        "GIT_CONFIG_VALUE_0": str(_hooks(Path(state.root))),
        "SANDBOX_WORKFLOW_PUSHER": who,
        "SANDBOX_WORKFLOW_RIGHT": right,
    }


def _hooks(root: Path) -> Path:
    hooks = root / "_workflow-push-hooks"
    script = hooks / "pre-receive"
    if not script.exists() or script.read_text() != HOOK:
        hooks.mkdir(parents=True, exist_ok=True)
        tmp = hooks / f".pre-receive.{threading.get_ident()}"
        tmp.write_text(HOOK)
        tmp.chmod(0o755)
        tmp.replace(script)
    return hooks
