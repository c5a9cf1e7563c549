"""The demos' opening panel: where the sandbox and the bot answer, and the maintainer's token, on any terminal."""

import io
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from bot.cli.demo_github import _opening


def test_the_maintainers_token_is_shown_whole_on_an_80_column_terminal():
    # the CLI's stderr console soft-wraps (bot.cli.consoles.err); a panel printed so lost its wrapped lines
    text = io.StringIO()
    console = Console(file=text, width=80, soft_wrap=True, color_system=None)
    seeded = SimpleNamespace(repo="mini-sglang/mini-sglang", maintainer="m", tokens={"m": "sandbox-token-abc123"})
    _opening(console, "revert-bisect demo", "http://127.0.0.1:43413", seeded, "http://127.0.0.1:41234", Path("/d"))
    shown = text.getvalue()
    assert "maintainer token sandbox-token-abc123" in shown, shown
    assert "revert-bisect bot http://127.0.0.1:41234" in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
