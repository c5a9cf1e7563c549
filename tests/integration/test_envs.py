"""Step environments layered on a base interpreter that is itself a venv (a laptop, CI, a GPU image)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runners.envs import EnvCache, EnvError, EnvSpec


def _dist_files(name: str, version: str, requires: tuple[str, ...]) -> dict[str, str]:
    module = name.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    return {
        f"{module}.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": metadata,
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "",
    }


def _installed(site: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    for rel, text in _dist_files(name, version, requires).items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)


def _wheel(where: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    path = where / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for rel, text in _dist_files(name, version, requires).items():
            whl.writestr(rel, text)
    return path


@pytest.fixture
def base(tmp_path) -> tuple[Path, Path]:
    """A venv made from this test's own interpreter (itself usually a venv), holding packages nothing else has."""
    home = tmp_path / "base-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(home)], check=True)
    site = next(home.glob("lib/python*/site-packages"))
    _installed(site, "rb-only-in-base", "1.3")
    _installed(site, "rb-dep", "1.0")
    return home / "bin" / "python", site


def _tree(tmp_path: Path, *deps: str) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    quoted = ", ".join(f'"{d}"' for d in deps)
    (tree / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "0"\ndependencies = [{quoted}]\n')
    return tree


def _run(python: Path, code: str) -> str:
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_an_environment_on_a_venv_sees_the_venvs_own_packages_and_installs_nothing(base, tmp_path):
    python, site = base
    logs: list[str] = []
    env = EnvCache(tmp_path / "envs", base_python=str(python)).ensure(
        _tree(tmp_path, "rb-only-in-base>=1.2"), EnvSpec(offline=True), logs.append
    )
    where = _run(env.python, "import rb_only_in_base; print(rb_only_in_base.__file__, rb_only_in_base.VERSION)")
    assert where == f"{site / 'rb_only_in_base.py'} 1.3"  # from the base venv, not a copy
    assert any("met by the base interpreter, installing 0" in line for line in logs)
    assert not list(env.python.parent.parent.glob("lib/python*/site-packages/rb_only_in_base*"))


def test_a_step_in_that_environment_imports_the_base_package(base, tmp_path):
    from runners.spec import StepSpec
    from runners.step import run_in_tree

    python, _ = base
    tree = _tree(tmp_path, "rb-only-in-base")
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(tree), *cmd], check=True)
    sha = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    spec = StepSpec(
        1,
        sha,
        ("python", "-c", "import rb_only_in_base, sys; sys.exit(0 if rb_only_in_base.VERSION == '1.3' else 1)"),
        60,
        env_spec=EnvSpec(offline=True),
    )
    result = run_in_tree(spec, tree, tmp_path / "out", EnvCache(tmp_path / "envs", base_python=str(python)), "r")
    assert result.exit_code == 0, result.log_tail


def test_only_what_the_base_lacks_is_installed_dependencies_included(base, tmp_path):
    python, site = base
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    top = _wheel(wheels, "rb-top", "2.0", ("rb-dep>=1.0", "rb-newer>=3"))
    newer = _wheel(wheels, "rb-newer", "3.1", ("rb-only-in-base",))
    deps = (f"rb-top @ {top.as_uri()}", f"rb-newer @ {newer.as_uri()}")
    env = EnvCache(tmp_path / "envs", base_python=str(python)).ensure(
        _tree(tmp_path, *deps), EnvSpec(offline=True), lambda _: None
    )
    own = next(env.python.parent.parent.glob("lib/python*/site-packages"))
    assert (own / "rb_top.py").exists() and (own / "rb_newer.py").exists()
    assert not (own / "rb_dep.py").exists() and not (own / "rb_only_in_base.py").exists()  # the base has them
    assert _run(env.python, "import rb_dep; print(rb_dep.__file__)") == str(site / "rb_dep.py")


def test_a_pin_the_base_is_too_old_for_is_installed_over_it(base, tmp_path):
    python, _ = base
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    dep2 = _wheel(wheels, "rb-dep", "2.0")
    env = EnvCache(tmp_path / "envs", base_python=str(python)).ensure(
        _tree(tmp_path, f"rb-dep @ {dep2.as_uri()}"), EnvSpec(offline=True), lambda _: None
    )
    assert _run(env.python, "import rb_dep; print(rb_dep.VERSION)") == "2.0"  # its own copy shadows the base's


def test_a_requirement_nothing_can_meet_offline_is_an_env_error(base, tmp_path):
    python, _ = base
    with pytest.raises(EnvError, match="uv pip"):
        EnvCache(tmp_path / "envs", base_python=str(python)).ensure(
            _tree(tmp_path, "rb-nowhere>=9"), EnvSpec(offline=True), lambda _: None
        )


def test_the_key_includes_the_base(base, tmp_path):
    python, _ = base
    tree = _tree(tmp_path, "rb-only-in-base")
    on_base = EnvCache(tmp_path / "envs", base_python=str(python)).ensure(tree, EnvSpec(offline=True), lambda _: None)
    # the same pins on another interpreter: another environment (this one would not see rb-only-in-base)
    with pytest.raises(EnvError):
        EnvCache(tmp_path / "envs", base_python=sys.executable).ensure(tree, EnvSpec(offline=True), lambda _: None)
    assert (tmp_path / "envs" / on_base.key).is_dir()
