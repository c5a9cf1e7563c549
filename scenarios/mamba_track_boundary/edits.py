"""A change of the scenario's history, and the edits of the file tree (a dict path -> text) it is made of."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Tree = dict[str, str]


@dataclass
class Change:
    kind: str  # docs, ci, refactor, feature, test, bench, chore, release, culprit, broken, fix
    title: str  # without the (#NNNN) suffix
    summary: str  # one paragraph: the squash commit's body and the PR's motivation
    apply: Callable[[Tree], None]
    modifications: tuple[str, ...] = ()


# -- editing helpers --


def put(path: str, text: str) -> Callable[[Tree], None]:
    def apply(tree: Tree) -> None:
        tree[path] = text

    return apply


def append(path: str, text: str) -> Callable[[Tree], None]:
    def apply(tree: Tree) -> None:
        tree[path] = tree.get(path, "") + text

    return apply


def replace(path: str, old: str, new: str) -> Callable[[Tree], None]:
    def apply(tree: Tree) -> None:
        if old not in tree[path]:
            raise AssertionError(f"scenario builder: {old!r} not in {path}")
        tree[path] = tree[path].replace(old, new, 1)

    return apply


def insert_before(path: str, anchor: str, text: str) -> Callable[[Tree], None]:
    return replace(path, anchor, text + anchor)


def insert_after(path: str, anchor: str, text: str) -> Callable[[Tree], None]:
    return replace(path, anchor, anchor + text)


def chain(*edits: Callable[[Tree], None]) -> Callable[[Tree], None]:
    def apply(tree: Tree) -> None:
        for edit in edits:
            edit(tree)

    return apply
