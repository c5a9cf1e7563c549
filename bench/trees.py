"""A benchmark's histories on this tree's engine or another checkout's, split over worker processes."""

from __future__ import annotations

import argparse
import multiprocessing
import sys
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
