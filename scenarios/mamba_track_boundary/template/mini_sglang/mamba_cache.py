"""Prefix cache for a recurrent model.

A recurrent state cannot be sliced: the cache can only hand out the state of a prefix whose
exact length was snapshotted. Requests snapshot their state into one of two ping-pong track
slots every `mamba_track_interval` tokens during decode (and once at the last aligned position
of a prefill); when a request finishes, the prefix up to `last_track_seqlen` is inserted with the
latest snapshot. That length is the cache's only claim about which tokens the state covers.
"""

from __future__ import annotations

import threading

import torch


class MambaPrefixCache:
    def __init__(self, page_size: int = 1, disable: bool = False) -> None:
        self.page_size = page_size
        self.disable = disable
        self._entries: dict[tuple[int, ...], torch.Tensor] = {}
        self._lengths: set[int] = set()
        self._lock = threading.Lock()
        self.hits = 0
        self.inserts = 0

    def __len__(self) -> int:
        return len(self._entries)

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()
            self._lengths.clear()

    def insert(self, token_ids: list[int], state: torch.Tensor) -> bool:
        """Cache `state` as the state after exactly `token_ids`."""
        if self.disable or not token_ids:
            return False
        key = tuple(token_ids)
        with self._lock:
            if key in self._entries:
                return False
            self._entries[key] = state.detach().clone()
            self._lengths.add(len(key))
            self.inserts += 1
            return True

    def match_prefix(self, token_ids: list[int], max_len: int) -> tuple[int, torch.Tensor | None]:
        """The longest cached prefix of `token_ids` no longer than `max_len`: (length, state copy)."""
        if self.disable or max_len <= 0:
            return 0, None
        with self._lock:
            for length in sorted(self._lengths, reverse=True):
                if length > max_len:
                    continue
                state = self._entries.get(tuple(token_ids[:length]))
                if state is not None:
                    self.hits += 1
                    return length, state.clone()
        return 0, None

    def stats(self) -> dict:
        return {"entries": len(self._entries), "hits": self.hits, "inserts": self.inserts}
