"""What the tests share: the world builder, the sandbox's contract checks, waits, ports, the repository root."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
