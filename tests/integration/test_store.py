import pytest
import sqlalchemy

from bot.adapters.store.db import HEAD_REVISION, connect, is_current
from bot.adapters.store.store import NewBisection, NewStep, StepReport, Store
from bot.domain.bisect.ledger import Entry, entries
from bot.domain.bisect.model import Phase, State
from bot.domain.errors import NotFound, StoreUnavailable


def exercise(url: str) -> None:
    engine = connect(url)
    assert is_current(engine)
    store = Store(engine)
    bid = store.create(NewBisection("/r", "v1", "main", "a" * 40, "b" * 40, ["./t.sh"], {"workers": 2}), "calibrating")
    ids = store.add_steps(bid, [NewStep("a" * 40, "calibrate", 1), NewStep("b" * 40, "calibrate", 1)])
    store.finish_step(ids[0], StepReport(0, 0.0003, None, "good", "local/wt-0", 1.5, "ok"))
    store.finish_step(
        ids[0], StepReport(1, None, None, "bad", "x", 9.0, "late duplicate")
    )  # only a running step takes a result
    assert store.mark_lost(bid, "lost: driver died") == 1
    searching = State(Phase.SEARCHING, merges=("m" * 40,))
    store.save_tests(bid, [Entry("./t.sh", state=searching, guess="c" * 40, guess_probability=0.5)])
    row = store.get(bid)
    assert row.phase == "searching" and row.guess == "c" * 40 and row.settings == {"workers": 2}
    assert entries(row.tests) == [Entry("./t.sh", state=searching, guess="c" * 40, guess_probability=0.5)]
    assert [(s.state, s.verdict, s.exit_code) for s in row.steps] == [("done", "good", 0), ("lost", "infra", None)]
    assert row.steps[1].infra_reason == "lost: driver died"
    assert [r.id for r in store.recent()] == [bid]
    with pytest.raises(NotFound):
        store.get(bid + 100)
    connect(url)  # migrating an up-to-date store again is a no-op


def test_head_revision_constant_matches_alembic(tmp_path):
    from alembic.script import ScriptDirectory

    from bot.adapters.store.db import HEAD_REVISION, _alembic_config

    assert ScriptDirectory.from_config(_alembic_config()).get_current_head() == HEAD_REVISION


def test_sqlite_store(tmp_path):
    exercise(f"sqlite:///{tmp_path / 'store.db'}")


@pytest.mark.postgres
def test_postgresql_store(pg_url):
    exercise(pg_url)
    engine = sqlalchemy.create_engine(pg_url)
    with engine.connect() as conn:
        tables = set(sqlalchemy.inspect(conn).get_table_names())
    assert {"bisections", "steps", "alembic_version"} <= tables


def test_default_store_lives_in_user_data_dir(tmp_path):
    engine = connect()
    assert str(tmp_path / "xdg-data") in str(engine.url)


@pytest.mark.parametrize(
    "url, words",
    [
        ("postgresql+psycopg://nobody@127.0.0.1:1/none", "cannot reach the store"),
        ("not a url", "not a usable SQLAlchemy URL"),
        ("mysql+nodriver://x/y", "not a usable SQLAlchemy URL"),
    ],
)
def test_unreachable_store_is_a_clear_error(url, words):
    with pytest.raises(StoreUnavailable, match=words):
        connect(url)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_migrations_match_the_models(backend, tmp_path, request):
    """Autogenerate finds nothing to add: every model change came with its migration."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from bot.adapters.store.models import Base

    url = f"sqlite:///{tmp_path / 'm.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = connect(url)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_replicas_starting_together_migrate_one_at_a_time(backend, tmp_path, request):
    """Several `serve` processes on one fresh database: one migrates, the others find it done."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'bot.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    program = (
        "from bot.adapters.store.db import connect, HEAD_REVISION, _revision\n"
        f"with connect({url!r}).connect() as c: print(_revision(c))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert outputs == [HEAD_REVISION] * 4, outputs
