"""The sandbox's inner layering (pyproject.toml's "sandbox layers" contract) catches the circle it once had."""

from __future__ import annotations

import shutil

from tests.support import ROOT
from tests.support.lint import lint_imports


def test_the_renderer_reaching_for_the_state_is_caught(tmp_path):
    """render -> state -> actions.engine -> ... -> render was the circle deferred imports hid."""
    copy = tmp_path / "tree"
    for name in ("bot", "runners", "sandbox", "scenarios"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    render = copy / "sandbox" / "render" / "__init__.py"
    render.write_text(render.read_text() + "\nfrom ..state import SandboxState  # the old arrow back up\n")
    proc = lint_imports(copy)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "sandbox.render -> sandbox.state" in proc.stdout
