"""The arrows of docs/architecture.md, held by import-linter's contracts in pyproject.toml."""

from __future__ import annotations

import shutil

from tests.support import ROOT
from tests.support.lint import lint_imports


def test_every_contract_is_kept():
    proc = lint_imports(ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_a_broken_arrow_fails_the_check(tmp_path):
    """A runner module that imports the bot -- the arrow this project once had -- is caught; so are the service and
    the dashboard reaching past the store's port."""
    copy = tmp_path / "tree"
    for name in ("bot", "runners", "sandbox", "scenarios"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    (copy / "runners" / "leak.py").write_text(
        "from bot.domain.bisect.verdict import classify  # a runner reaching into the bot\n"
    )
    (copy / "bot" / "domain" / "leak.py").write_text("import sqlalchemy  # the pure domain reaching for the store\n")
    (copy / "bot" / "service" / "leak.py").write_text(
        "from bot.adapters.store.store import Store  # the service past its port (bot.ports.store)\n"
    )
    (copy / "bot" / "web" / "leak.py").write_text("from bot.adapters.store.models import BisectionRow  # the same\n")
    proc = lint_imports(copy)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "runners.leak -> bot.domain.bisect.verdict" in proc.stdout
    assert "bot.domain.leak -> sqlalchemy" in proc.stdout
    assert "bot.service.leak -> bot.adapters.store.store" in proc.stdout
    assert "bot.web.leak -> bot.adapters.store.models" in proc.stdout
