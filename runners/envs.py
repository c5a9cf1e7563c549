"""Python environments keyed by a commit's dependency pins, built once with uv and reused.

A commit that changes only source files has the same pins as its neighbours, so it runs in the
environment they built: the step only changes the checkout. The key hashes what decides the
environment's contents -- the interpreter, the project's dependency lists (runtime and the
requested extras) -- and nothing else, so a version bump or an edited comment in pyproject.toml
does not cost a rebuild. The code under test is never installed into the environment: it runs
from the worktree through PYTHONPATH, so one environment serves every worktree.

An environment is layered on the runner's interpreter (the base): it sees every package the base
sees -- a GPU image's CUDA torch in a venv or conda env, say -- and installs only what the commit
pins and the base does not satisfy.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

READY = ".revert-bisect-ready"
MAX_ROUNDS = 25  # dependency depth an environment may need installing
KEEP = 8  # environments kept per cache; the least recently used beyond this are removed


class EnvError(Exception):
    """The commit's environment cannot be made from what it pins: the commit cannot be tested (skip)."""


@dataclass(frozen=True)
class EnvSpec:
    project: str = "pyproject.toml"  # relative to the worktree
    extras: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = (".",)  # worktree dirs put first on PYTHONPATH
    offline: bool = False  # uv --offline: only what the cache (or the base interpreter) already has

    def to_json(self) -> dict:
        return {
            "project": self.project,
            "extras": list(self.extras),
            "pythonpath": list(self.pythonpath),
            "offline": self.offline,
        }

    @classmethod
    def from_json(cls, data: dict) -> EnvSpec:
        return cls(
            str(data.get("project", "pyproject.toml")),
            tuple(data.get("extras", ())),
            tuple(data.get("pythonpath", (".",))),
            bool(data.get("offline", False)),
        )


@dataclass(frozen=True)
class Env:
    key: str
    python: Path
    reused: bool
    pythonpath: tuple[Path, ...] = field(default=())

    def variables(self, base: dict[str, str]) -> dict[str, str]:
        """Environment variables for a process that runs the code under test in this environment."""
        paths = [str(p) for p in self.pythonpath]
        if base.get("PYTHONPATH"):
            paths.append(base["PYTHONPATH"])
        bindir = str(self.python.parent)
        return {
            **base,
            "VIRTUAL_ENV": str(self.python.parent.parent),
            "PATH": bindir + os.pathsep + base.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join(paths),
            "REVERT_BISECT_PYTHON": str(self.python),
        }


def pins(worktree: Path, spec: EnvSpec) -> list[str]:
    """The requirement strings the commit pins, sorted; EnvError when its pyproject is missing or broken."""
    try:
        text = (worktree / spec.project).read_text()
    except FileNotFoundError:
        raise EnvError(f"{spec.project} does not exist at this commit") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise EnvError(f"{spec.project} cannot be read: {exc}") from None
    return pins_of(text, spec)


def pins_of(text: str, spec: EnvSpec) -> list[str]:
    """`pins` of a pyproject.toml's text (read from a commit without checking it out, say)."""
    try:
        project = tomllib.loads(text).get("project", {})
    except tomllib.TOMLDecodeError as exc:
        raise EnvError(f"{spec.project} cannot be read: {exc}") from None
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in spec.extras:
        reqs += optional.get(extra, [])
    if not all(isinstance(r, str) for r in reqs):
        raise EnvError(f"{spec.project}: dependencies must be strings")
    return sorted({" ".join(r.split()) for r in reqs})


def env_key(requirements: list[str], base_python: str) -> str:
    facts = {
        "schema": 2,  # 2: layered on the base by a .pth, not --system-site-packages
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "base": base_python,
        "requirements": requirements,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20]


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            raise EnvError("uv is not installed on this runner (pip install uv, or its standalone installer)") from None
        return found
    return find_uv_bin()


# Run by the base interpreter: the directories its packages come from, as `site` makes them (a venv's
# own site-packages, a conda env's, the system's when the venv includes them, the user site when on).
_BASE_SITES = """
import json, os, site
dirs = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
print(json.dumps([d for d in dict.fromkeys(dirs) if os.path.isdir(d)]))
"""
LAYER = "_revert_bisect_base.pth"


def base_sites(base_python: str) -> list[str]:
    """The site-packages directories the base interpreter sees (read from the base itself)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    proc = subprocess.run(
        [base_python, "-c", _BASE_SITES], capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env
    )
    if proc.returncode != 0:
        raise EnvError(f"cannot ask the base interpreter {base_python} for its packages: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


def layer_on(home: Path, sites: list[str]) -> None:
    """Make the environment at home see every package its base sees, after its own: a `.pth` whose lines
    run `site.addsitedir`, so the base's own .pth files (editable installs, say) are honoured too.
    (`uv venv --system-site-packages` is not enough: for a venv base it exposes the venv's *base*
    interpreter's packages, not the venv's -- a runner image's CUDA torch in a venv would be gone.)"""
    own = sorted(home.glob("lib/python*/site-packages")) or sorted(home.glob("Lib/site-packages"))
    if not own:
        raise EnvError(f"the new environment {home} has no site-packages directory")
    lines = [f"import site; site.addsitedir({d!r})" for d in sites]
    (own[0] / LAYER).write_text("\n".join(lines) + "\n")


def unsatisfied(python: str, requirements: list[str]) -> list[str]:
    """The requirements (and, through the distributions that meet them, their dependencies) that the
    environment does not meet yet. What the base already satisfies is never reinstalled from an index."""
    if not requirements:
        return []
    import packaging

    argv = [
        python,
        str(Path(__file__).with_name("unmet.py")),
        "--packaging-dir",
        str(Path(packaging.__file__).parent.parent),
    ]
    proc = subprocess.run([*argv, *requirements], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise EnvError(f"cannot check the requirements {requirements}: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


class EnvCache:
    def __init__(self, root: Path, base_python: str | None = None, keep: int = KEEP):
        self.root = root
        # on a runner the bot's package runs from a venv of its own (the step workflow): the code under test,
        # and so the base, is the runner's interpreter it names in REVERT_BISECT_PYTHON
        self.base_python = base_python or os.environ.get("REVERT_BISECT_PYTHON") or sys.executable
        self.keep = keep
        root.mkdir(parents=True, exist_ok=True)

    def ensure(self, worktree: Path, spec: EnvSpec, log) -> Env:
        """The environment for the commit checked out in worktree: reused when its pins were seen."""
        requirements = pins(worktree, spec)
        key = env_key(requirements, self.base_python)
        home = self.root / key
        pythonpath = tuple(worktree / p for p in spec.pythonpath)
        with open(self.root / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two steps wanting one new environment build it once
            ready = home / READY
            if ready.exists():
                os.utime(ready)
                return Env(key, home / "bin" / "python", True, pythonpath)
            self._evict()
            self._build(home, requirements, spec.offline, log)
            ready.write_text(json.dumps({"requirements": requirements, "built_at": time.time()}))
        return Env(key, home / "bin" / "python", False, pythonpath)

    def _build(self, home: Path, requirements: list[str], offline: bool, log) -> None:
        shutil.rmtree(home, ignore_errors=True)  # a half-built one from a killed step
        uv = uv_binary()
        log(f"revert-bisect: building environment {home.name} ({len(requirements)} requirements) on {self.base_python}")
        self._uv(log, uv, "venv", "--quiet", "--python", self.base_python, str(home))
        layer_on(home, base_sites(self.base_python))
        python = str(home / "bin" / "python")
        missing = unsatisfied(python, requirements)
        log(
            f"revert-bisect: {len(requirements) - len(missing)} requirements met by the base interpreter, "
            f"installing {len(missing)}"
        )
        # uv does not see the base's packages (it reads only the environment's own site-packages), so it
        # installs without dependencies, and each round installs only what is still unmet.
        extra = ["--offline"] if offline else []
        for _ in range(MAX_ROUNDS):
            if not missing:
                return
            self._uv(log, uv, "pip", "install", "--quiet", "--no-deps", "--python", python, *extra, *missing)
            before, missing = missing, unsatisfied(python, requirements)
            if set(missing) & set(before):
                raise EnvError(
                    f"installed {sorted(set(missing) & set(before))} but they are still unmet: conflicting pins?"
                )
        raise EnvError(f"the requirements still need {missing} after {MAX_ROUNDS} install rounds")

    @staticmethod
    def _uv(log, *argv: str) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.stdout or proc.stderr:
            log((proc.stdout + proc.stderr).rstrip())
        if proc.returncode != 0:
            raise EnvError(f"`uv {argv[1]}` failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")

    def _evict(self) -> None:
        built = sorted(self.root.glob(f"*/{READY}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for ready in built[self.keep - 1 :]:
            home = ready.parent
            with open(self.root / f"{home.name}.lock", "w") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # in use by another step
                ready.unlink(missing_ok=True)
                shutil.rmtree(home, ignore_errors=True)
