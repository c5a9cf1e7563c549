"""The self-hosted runner machine the step workflow (runners/github/revert-bisect-step.yml) runs on, set up
the way its header asks of a real one: Linux, `python3` (>= 3.10) on PATH, git, flock, network access to
the repository -- and nothing of the bot's beyond what the workflow installs itself.

The workflow's first step runs `python3 -m pip install --user --quiet --upgrade "${PACKAGE:-...}"` under a
lock in the machine's temp dir (TMPDIR, the machine's own). This machine is air-gapped the way a
locked-down GPU box is: pip reads no index (PIP_NO_INDEX) but a local wheelhouse (PIP_FIND_LINKS) holding
the runner package -- a wheel of this checkout's `runners` package under the project's name and version,
built here, as a release would be published -- and installs it into a user base of the machine's own
(PYTHONUSERBASE). `python3` is a virtual environment with the system site (so `--user` installs are
allowed, as with a system Python) that also sees the test environment's third-party packages (what a real
machine has installed once) -- but not this project's own distribution, so pip installs the package as on
a fresh machine instead of finding it installed. pip resolves no dependencies (PIP_NO_DEPS): those
libraries are installed once, and resolving them again cost every step's install 1.6 s of CPU.

So the workflow's install step, its `STEP_SPEC` mapping and its
`--out "$RUNNER_TEMP/revert-bisect"` all run as written, and `python3 -m runners.step` imports the
installed copy, not the repository under test.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import runners

PROJECT = "revert-bisect"


def step_runner_env(root: Path) -> dict[str, str]:
    """Set the machine up under `root` (once; reused when present); the environment its runner gives jobs."""
    venv, wheels, userbase = root / "python", root / "wheelhouse", root / "userbase"
    if not (venv / "bin" / "python3").exists():
        _make_python(venv)
    wheels.mkdir(parents=True, exist_ok=True)
    if not any(wheels.glob("*.whl")):
        build_wheel(wheels)
    userbase.mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "TMPDIR": str(root / "tmp"),  # the machine's own /tmp (the install step's lock is machine-wide)
        "PATH": os.pathsep.join([str(venv / "bin"), os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")]),
        "PYTHONUSERBASE": str(userbase),
        "PIP_NO_INDEX": "1",
        "PIP_NO_DEPS": "1",  # the machine's libraries are installed once; resolving them cost each step 1.6 s of CPU
        "PIP_FIND_LINKS": str(wheels),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_ROOT_USER_ACTION": "ignore",
        "PIP_NO_WARN_SCRIPT_LOCATION": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _make_python(venv: Path) -> None:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = str(base) if base.exists() else sys.executable
    subprocess.run([python, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    libraries = venv / "libraries"  # the test environment's packages, this project's own left out
    libraries.mkdir(exist_ok=True)
    here = Path(sysconfig.get_paths()["purelib"])  # the packages this process runs with
    for entry in here.iterdir():
        if not _ours(entry.name):
            (libraries / entry.name).symlink_to(entry)
    # the tools installed with them (uv: the `uv` package looks for its binary beside its site directory)
    (libraries / "bin").symlink_to(Path(sysconfig.get_paths()["scripts"]))
    (purelib / "runner-machine.pth").write_text(f"{libraries}\n")


def _ours(name: str) -> bool:
    """This project's own distribution in a site-packages directory (its dist-info, an editable install's hook)."""
    low = name.lower().replace("-", "_")
    return low.startswith(("revert_bisect_", "__editable__.revert_bisect", "__editable___revert_bisect"))


def _version() -> str:
    try:
        return importlib.metadata.version(PROJECT)
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0"


def build_wheel(into: Path) -> Path:
    """A wheel of the `runners` package named as the project (py3-none-any), with its RECORD."""
    source = Path(runners.__file__).resolve().parent
    version = _version()
    dist = f"{PROJECT.replace('-', '_')}-{version}"
    files: dict[str, bytes] = {}
    for path in sorted(source.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[f"runners/{path.relative_to(source).as_posix()}"] = path.read_bytes()
    files[f"{dist}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: {PROJECT}\nVersion: {version}\nProvides-Extra: sglang\n"
    ).encode()
    files[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: sandbox\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},sha256={_digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{dist}.dist-info/RECORD"] = ("\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n").encode()
    wheel = into / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
