"""Opening the store: default location, engine, and migrations to head."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from platformdirs import user_data_dir
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    NoSuchModuleError,
    OperationalError,
)

from bot.domain.errors import StoreUnavailable
from runners import locks

MIGRATIONS = Path(__file__).with_name("migrations")
# The newest migration; a test checks it against Alembic's own view. Knowing it lets an
# up-to-date store open without importing Alembic (a third of the CLI's start-up).
HEAD_REVISION = "0019"


def default_url() -> str:
    data = Path(user_data_dir("revert-bisect", appauthor=False))
    return f"sqlite:///{data / 'revert-bisect.db'}"


def _alembic_config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def connect(url: str | None = None) -> Engine:
    """An engine on `url` (default: SQLite under the user's data directory), migrated to head."""
    url = url or default_url()
    try:
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///:memory:"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, pool_pre_ping=True)
    except (ArgumentError, NoSuchModuleError, ValueError) as exc:
        raise StoreUnavailable(f"--db {url!r} is not a usable SQLAlchemy URL ({exc})") from exc
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        with _migration_lock(engine), engine.begin() as conn:
            if engine.dialect.name == "postgresql":  # replicas starting together migrate one at a time
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
            if _revision(conn) != HEAD_REVISION:
                from alembic import command

                cfg = _alembic_config()
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise StoreUnavailable(
            f"cannot reach the store at {engine.url.render_as_string(hide_password=True)}: {reason}"
        ) from exc
    return engine


MIGRATION_LOCK_KEY = 0x72625F6D6967  # "rb_mig": the advisory lock replicas take around migrations


@contextmanager
def _migration_lock(engine: Engine):
    """SQLite: an exclusive file lock beside the database while it is checked and migrated (PostgreSQL
    uses an advisory lock inside the migration's transaction instead). The lock file is deleted
    afterwards. Not a lock on the database file itself: closing any descriptor of it would drop the
    POSIX locks SQLite holds on it in this process."""
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:":
        yield
        return
    lock_path = Path(f"{path}.migrate-lock")
    lock = locks.take(lock_path)
    try:
        yield
    finally:
        locks.release_and_remove(lock, lock_path)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def _revision(conn) -> str | None:
    try:
        with conn.begin_nested():
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except DBAPIError as exc:
        if isinstance(exc, OperationalError) and "no such table" not in str(exc) and "does not exist" not in str(exc):
            raise
        return None


def is_current(engine: Engine) -> bool:
    """True when the database's schema is at the newest migration, as Alembic sees it."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision() == head
