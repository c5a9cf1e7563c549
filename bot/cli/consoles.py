"""The two consoles every command writes to: the answer on stdout, progress and errors on stderr."""

from __future__ import annotations

from rich.console import Console

err = Console(stderr=True, soft_wrap=True)
out = Console()
if not out.is_terminal:  # piped or captured: keep table rows on one line each
    out = Console(width=200)
