"""The self-hosted runner machine the step workflow (runners/github/revert-bisect-step.yml) runs on, set up
the way its header asks of a real one: Linux, `python3` (>= 3.11) and `uv` on PATH, git, flock, network access
to the repository -- and nothing of the bot's beyond what the workflow installs itself.

The workflow's first step makes a venv of the runner's own with uv (`uv venv`, then `uv pip install --no-deps
"${PACKAGE:-revert-bisect}" packaging`) under ${REVERT_BISECT_HOME}/runner-venvs/<hash of the requirement>,
once, under a lock. This machine is air-gapped the way a locked-down GPU box is: uv is offline (UV_OFFLINE,
UV_NO_INDEX) with a local wheelhouse (UV_FIND_LINKS) holding the runner package -- a wheel of this checkout's
`runners` package under the project's name and version, built here, as a release would be published -- and a
wheel of `packaging`, made from the copy this process runs with; uv's cache (UV_CACHE_DIR) and
REVERT_BISECT_HOME are the machine's own, under its root. `python3` is a virtual environment that also sees
the test environment's third-party packages (what a real GPU machine has installed once: torch, the
libraries a commit's pins name) -- but not this project's own distribution, so the workflow installs the
package as on a fresh machine instead of finding it installed.

So the workflow's install step, its `STEP_SPEC` mapping and its `--out "$RUNNER_TEMP/revert-bisect"` all run
as written, and `$REVERT_BISECT_RUNNER_VENV/bin/python -m runners.step` imports the installed copy, not the
repository under test, while the code under test runs on the machine's `python3`.
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
    venv, wheels, tools = root / "python", root / "wheelhouse", root / "bin"
    if not (venv / "bin" / "python3").exists():
        _make_python(venv)
    wheels.mkdir(parents=True, exist_ok=True)
    if not any(wheels.glob(f"{PROJECT.replace('-', '_')}-*.whl")):
        build_wheel(wheels)
    if not any(wheels.glob("packaging-*.whl")):
        wheel_of_installed("packaging", wheels)
    tools.mkdir(parents=True, exist_ok=True)
    if not (tools / "uv").exists():  # uv alone: the test environment's bin/ holds a python3 of its own
        from uv import find_uv_bin

        (tools / "uv").symlink_to(find_uv_bin())
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    return {
        "TMPDIR": str(root / "tmp"),  # the machine's own /tmp
        "PATH": os.pathsep.join(
            [str(venv / "bin"), str(tools), os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")]
        ),
        "REVERT_BISECT_HOME": str(root / "revert-bisect"),  # the runner package's venvs
        "UV_OFFLINE": "1",
        "UV_NO_INDEX": "1",
        "UV_FIND_LINKS": str(wheels),
        "UV_CACHE_DIR": str(root / "uv-cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _make_python(venv: Path) -> None:
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    python = str(base) if base.exists() else sys.executable
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    libraries = venv / "libraries"  # the test environment's packages, this project's own left out
    libraries.mkdir(exist_ok=True)
    here = Path(sysconfig.get_paths()["purelib"])  # the packages this process runs with
    for entry in here.iterdir():
        if not _ours(entry.name):
            (libraries / entry.name).symlink_to(entry)
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
    files[f"{dist}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {PROJECT}\nVersion: {version}\n".encode()
    files[f"{dist}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: sandbox\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    return _write_wheel(into, f"{dist}.dist-info", files)


def wheel_of_installed(name: str, into: Path) -> Path:
    """A wheel of an installed pure-Python distribution, from the files its RECORD lists (a mirror's copy)."""
    dist = importlib.metadata.distribution(name)
    files: dict[str, bytes] = {}
    info = None
    for entry in dist.files or ():
        path = entry.as_posix()
        if path.startswith("..") or "__pycache__" in path or path.endswith(".pyc"):
            continue
        top = path.split("/", 1)[0]
        if top.endswith(".dist-info"):
            info = top
            if path.rsplit("/", 1)[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
        files[path] = Path(str(dist.locate_file(entry))).read_bytes()
    assert info is not None, f"{name}: no .dist-info in its RECORD"
    return _write_wheel(into, info, files)


def _write_wheel(into: Path, info: str, files: dict[str, bytes]) -> Path:
    """`files` (with `info`/METADATA and WHEEL) as a pure-Python wheel, its RECORD written from them."""
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    files = {**files, f"{info}/RECORD": ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()}
    wheel = into / f"{info.removesuffix('.dist-info')}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
