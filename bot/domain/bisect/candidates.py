"""Candidate lists from a commit graph (pure: the graph is a mapping sha -> parent shas).

The graph holds the commits of the range GOOD..BAD (what `git rev-list --parents GOOD..BAD`
prints); a parent outside the mapping lies at or below GOOD and is taken as good.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

Graph = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Scope:
    """A linear search space: `base` (position 0, good) then `candidates` oldest first."""

    base: str
    candidates: tuple[str, ...]

    def position(self, sha: str) -> int | None:
        if sha == self.base:
            return 0
        return self._index.get(sha)

    @cached_property
    def _index(self) -> dict[str, int]:
        return {sha: i + 1 for i, sha in enumerate(self.candidates)}

    def sha(self, position: int) -> str:
        return self.base if position == 0 else self.candidates[position - 1]


def first_parent_chain(graph: Graph, head: str) -> list[str]:
    """head and its first parents while they stay inside the range, newest first."""
    chain = []
    sha: str | None = head
    while sha is not None and sha in graph:
        chain.append(sha)
        parents = graph[sha]
        sha = parents[0] if parents else None
    return chain


def first_parent_scope(graph: Graph, good: str, bad: str) -> Scope:
    """BAD's first-parent chain down to GOOD, which may lie inside the graph (a test of a group whose own GOOD is
    later than the group's range)."""
    chain = first_parent_chain(graph, bad)
    if good in chain:
        chain = chain[: chain.index(good)]
    return Scope(good, tuple(reversed(chain)))


def ancestors(graph: Graph, head: str) -> set[str]:
    """head and all its ancestors inside the range."""
    seen: set[str] = set()
    stack = [head]
    while stack:
        sha = stack.pop()
        if sha in seen or sha not in graph:
            continue
        seen.add(sha)
        stack.extend(graph[sha])
    return seen


def is_merge(graph: Graph, sha: str) -> bool:
    return len(graph.get(sha, ())) > 1


def merge_scope(graph: Graph, merge: str) -> Scope:
    """The commits a merge brought in, first-parent along its second parent, then the merge itself.

    Position 0 is where the side branch left the mainline (it is an ancestor of the merge's
    first parent, so it counts as good); the merge stays last so that a breakage that only
    shows once both sides meet is still attributed.
    """
    first, side = graph[merge][0], graph[merge][1]
    mainline = ancestors(graph, first)
    chain: list[str] = []
    sha: str | None = side
    base = side
    while sha is not None:
        if sha not in graph or sha in mainline:
            base = sha
            break
        chain.append(sha)
        parents = graph[sha]
        sha = parents[0] if parents else None
        base = sha or base
    return Scope(base, tuple(reversed(chain)) + (merge,))


def descendants(graph: Graph, root: str) -> set[str]:
    """root and every commit of the range that has it as an ancestor."""
    children: dict[str, list[str]] = {}
    for sha, parents in graph.items():
        for p in parents:
            children.setdefault(p, []).append(sha)
    seen = {root}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return seen
