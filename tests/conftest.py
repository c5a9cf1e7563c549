"""Shared fixtures: isolated user directories, synthetic repositories, the CLI as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass

import pytest
import sqlalchemy

from scenarios.synthetic import build
from tests.support import deadline

PG_URL = os.environ.get("REVERT_BISECT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def _home_in(home, monkeypatch) -> None:
    """HOME and git's configuration in `home`: a ~/.gitconfig (diff.noprefix, a signing key, hooks) or
    /etc/gitconfig must not change what git does in a test; nor does the machine's git identity."""
    home.mkdir(exist_ok=True)
    (home / ".gitconfig").touch()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "Test Runner")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "tests@revert-bisect.invalid")


def pytest_configure(config):
    """The tests run as the README says whatever the shell that starts them exports: its REVERT_BISECT_* settings
    (a database, a token, a GitHub URL) would change what the bot under test does. REVERT_BISECT_TEST_PG names the
    tests' own PostgreSQL server and stays."""
    for name in [n for n in os.environ if n.startswith("REVERT_BISECT_") and n != "REVERT_BISECT_TEST_PG"]:
        del os.environ[name]
    # The machine's configuration, as a CI runner sets it: three workers share two cores, and every miniature
    # test file they start imports torch, whose OpenMP threads spin between parallel regions (0.13-0.21 of the
    # ~1.7 CPU-s each such process costs; the miniature's tests run one thread anyway). A shell's own setting stays.
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def bounded_waits(request):
    """Every wait of the test (tests.support.sandbox.wait_for) ends before the test's own limit, with its diagnosis."""
    marker = request.node.get_closest_marker("timeout")
    if marker is not None:
        limit = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    else:
        limit = request.config.getoption("timeout", None) or request.config.getini("timeout")
    deadline.start(float(limit or 0) or None)
    yield
    deadline.start(None)


@pytest.fixture(scope="session", autouse=True)
def isolated_session_home(tmp_path_factory):
    """The same for what module- and session-scoped fixtures build (they run before `isolated_home`)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        _home_in(tmp_path_factory.mktemp("session-home"), monkeypatch)
        yield


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Keep the default store and worktrees of every test inside its tmp_path, and its HOME and git
    configuration too."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    for size in ("COLUMNS", "LINES"):  # pytest-xdist's workers export 80x24: a test's width is what it passes
        monkeypatch.delenv(size, raising=False)
    _home_in(tmp_path / "home", monkeypatch)


@pytest.fixture(autouse=True)
def github_reachable():
    """GitHub's reachability is kept per host for the whole process (bot.observability.reachability): each test
    starts with every host up, whatever an earlier test's sandbox (stopped by now, its port free again) made of it."""
    from bot.observability.reachability import reset_all

    reset_all()
    yield
    reset_all()


@pytest.fixture
def synth(tmp_path):
    def make(commits: int = 20, culprit: int = 7, **kw):
        return build(tmp_path / f"repo-{uuid.uuid4().hex[:6]}", commits, culprit, **kw)

    return make


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str
    json: dict | None


@pytest.fixture
def cli(tmp_path):
    """Run `revert-bisect` as a real process; --json is read back when the run wrote it."""

    def run(*args: str, env: dict | None = None, timeout: float = 180) -> CliResult:
        out = tmp_path / f"out-{uuid.uuid4().hex[:6]}.json"
        argv = [sys.executable, "-m", "bot.cli.main", *args]
        if args and args[0] == "bisect" and "--json" not in args:
            argv[4:4] = ["--json", str(out)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
        data = json.loads(out.read_text()) if out.exists() else None
        return CliResult(proc.returncode, proc.stdout, proc.stderr, data)

    return run


@pytest.fixture
def pg_url(request):
    """A fresh schema on the PostgreSQL server for one test, dropped afterwards. The server is required,
    not optional: unreachable, the test fails saying what it needs (a skip would let the run pass without it)."""
    if (
        request.node.get_closest_marker("postgres") is None
    ):  # `-m "not postgres"` must leave out every test that needs it
        pytest.fail(
            f"{request.node.nodeid} uses PostgreSQL but is not marked `postgres`: add @pytest.mark.postgres "
            "(for one parameter: pytest.param(..., marks=pytest.mark.postgres))",
            pytrace=False,
        )
    schema = f"rb_test_{uuid.uuid4().hex[:10]}"
    engine = sqlalchemy.create_engine(PG_URL)
    try:
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{schema}"'))
    except sqlalchemy.exc.OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        pytest.fail(
            f"PostgreSQL at {sqlalchemy.engine.make_url(PG_URL).render_as_string(hide_password=True)} "
            f"is unreachable ({reason}). "
            "The tests marked `postgres` need a server on 127.0.0.1:5432 with trust auth for user postgres and a "
            "database `test` (createdb -h 127.0.0.1 -U postgres test; .ci/run does both), or REVERT_BISECT_TEST_PG "
            "naming another; or leave them out with -m 'not postgres'",
            pytrace=False,
        )
    yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text(f'DROP SCHEMA "{schema}" CASCADE'))
    engine.dispose()


KINDS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(items):
    """Each test is marked by the directory it lives in: `pytest -m "not e2e"` leaves out the whole stories."""
    for item in items:
        kind = next((k for k in KINDS if k in item.path.parts), None)
        if kind:
            item.add_marker(getattr(pytest.mark, kind))


@pytest.fixture
def world(tmp_path):
    """The scenario in the sandbox and the bot on loopback (tests.support.world), the KL test declared deterministic
    (tests.support.world.DECLARED_DETERMINISTIC: the story is not about the search)."""
    from tests.support.world import DECLARED_DETERMINISTIC, policies_with, sandbox_and_bot

    yield from sandbox_and_bot(tmp_path, policies=policies_with(tmp_path, DECLARED_DETERMINISTIC))
