"""The two consoles every command writes to: the answer on stdout, progress and errors on stderr."""

from __future__ import annotations

import os

from rich.console import Console

err = Console(stderr=True, soft_wrap=True)
out = Console()  # as wide as the terminal, or as $COLUMNS says (rich reads it, piped or not)
if not out.is_terminal and not (os.environ.get("COLUMNS", "").isdigit() and int(os.environ["COLUMNS"]) > 0):
    out = Console(width=200)  # piped or captured with no $COLUMNS: keep table rows on one line each
