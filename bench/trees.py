"""A benchmark's histories on this tree's engine or another checkout's, split over worker processes."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def use_tree(tree: str | None) -> None:
    """Import the `bot` package from another checkout from now on (None: this tree's, as imported)."""
    if tree:
        for name in [m for m in sys.modules if m == "bot" or m.startswith("bot.")]:
            del sys.modules[name]
        sys.path.insert(0, str(Path(tree).resolve()))


def over_processes(share: Callable[..., Any], args: Callable[[range], tuple], histories: int, jobs: int) -> list:
    """`share(*args(seeds))` for the histories split into `jobs` interleaved ranges of seeds, one process each."""
    with multiprocessing.Pool(jobs) as pool:
        return pool.starmap(share, [args(range(j, histories, jobs)) for j in range(jobs)])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--histories, --tree and --jobs, as every bench of histories takes them."""
    parser.add_argument("--histories", type=int, default=2000)
    parser.add_argument("--tree", help="another checkout whose engine to measure on the same histories")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (the histories are split among them)")


def rows_given(text: str | None, default: list, types: tuple[Callable[[str], Any], ...]) -> list:
    """The rows of --rows ("a,b;c,d", each field read by its type), or `default` when none are given."""
    if not text:
        return default
    return [tuple(read(v) for read, v in zip(types, spec.split(","), strict=True)) for spec in text.split(";")]


def each_row(rows: list, measure: Callable[[Any], list[str]]) -> list[list[str]]:
    """`measure(spec)` for every row, each row's seconds said on stderr as it ends."""
    out = []
    for spec in rows:
        started = time.monotonic()
        out.append(measure(spec))
        print(f"{spec}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return out
