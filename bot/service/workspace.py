"""The bot's clones of the repositories it bisects: cloned (then fetched) from the forge with the token in a
per-command header, one clone or fetch at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from bot.domain.errors import ForgeError, RepoError
from bot.ports import Clones, Git


class Workspace:
    def __init__(self, clones: Clones, root: Path, clone_url: Callable[[str], str], token: Callable[[str], str]):
        self.clones = clones
        self.root = root
        self.clone_url = clone_url
        self.token = token
        self._lock = threading.Lock()

    def sync(self, repo: str) -> Git:
        """The repository's clone, its branches fetched again (origin/*)."""
        target = self.root / repo.replace("/", "__")
        with self._lock:  # one clone/fetch at a time per workspace
            try:
                self.clones.sync(self.clone_url(repo), target, self.token(repo))
            except RepoError as exc:
                raise ForgeError(str(exc)) from exc
            return self.clones.open(target)
