"""Opening the store: default location, engine, and migrations to head."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from platformdirs import user_data_dir
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError

from bot.errors import StoreUnavailable

MIGRATIONS = Path(__file__).with_name("migrations")


def default_url() -> str:
    data = Path(user_data_dir("revert-bisect", appauthor=False))
    return f"sqlite:///{data / 'revert-bisect.db'}"


def _alembic_config() -> Config:
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
        with engine.begin() as conn:
            cfg = _alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    except OperationalError as exc:
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise StoreUnavailable(f"cannot reach the store at {engine.url.render_as_string(hide_password=True)}: {reason}") from exc
    return engine


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


def is_current(engine: Engine) -> bool:
    """True when the database's schema is at the newest migration."""
    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision() == head
