"""The fault injector for REST (and, on request, git) responses."""

from __future__ import annotations

import random
import threading


class Faults:
    """Injected failures for REST responses: `set(rate, kinds, seed)`; off by default."""

    KINDS = ("5xx", "403-ratelimit", "429", "slow")

    def __init__(self) -> None:
        self.rate = 0.0
        self.kinds: tuple[str, ...] = self.KINDS
        self.include_git = False
        self.slow_seconds = 1.0
        self.injected: list[tuple[str, str, str]] = []  # (kind, method, path), for tests and logs
        self._rng = random.Random(0)
        self._lock = threading.Lock()

    def set(
        self,
        rate: float,
        kinds: tuple[str, ...] | list[str] = KINDS,
        seed: int | None = 0,
        *,
        include_git: bool = False,
        slow_seconds: float = 1.0,
    ) -> None:
        if not 0.0 <= rate <= 1.0:
            raise ValueError("fault rate must be within [0, 1]")
        unknown = set(kinds) - set(self.KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds: {sorted(unknown)} (known: {self.KINDS})")
        with self._lock:
            self.rate, self.kinds, self.include_git = rate, tuple(kinds), include_git
            self.slow_seconds = slow_seconds
            self._rng = random.Random(seed)

    def off(self) -> None:
        self.set(0.0)

    def draw(self, method: str, path: str, git: bool = False) -> str | None:
        """The fault to inject into this request, or None."""
        with self._lock:
            if self.rate <= 0 or not self.kinds or (git and not self.include_git):
                return None
            if self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(self.kinds)
            self.injected.append((kind, method, path))
            return kind
