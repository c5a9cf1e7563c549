"""The arrows of docs/architecture.md, held by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    """lint-imports on the packages under cwd (first on the path, so a copy is checked, not this tree)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports is missing: pip install -e '.[test]' (import-linter)"
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_every_contract_is_kept():
    proc = _lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_a_broken_arrow_fails_the_check(tmp_path):
    """A runner module that imports the bot -- the arrow this project once had -- is caught."""
    copy = tmp_path / "tree"
    for name in ("bot", "runners", "sandbox", "scenarios"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "runners" / "leak.py").write_text("from bot.domain.bisect.verdict import classify  # a runner reaching into the bot\n")
    (copy / "bot" / "domain" / "leak.py").write_text("import sqlalchemy  # the pure domain reaching for the store\n")
    proc = _lint_imports(copy)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "runners.leak -> bot.domain.bisect.verdict" in proc.stdout
    assert "bot.domain.leak -> sqlalchemy" in proc.stdout
