"""import-linter as the architecture tests run it."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    """lint-imports on the packages under cwd (first on the path, so a copy is checked, not this tree)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports is missing: pip install -e '.[test]' (import-linter)"
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([exe, "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
