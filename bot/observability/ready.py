"""Readiness: the store answers, its schema is the one this code expects, the job queue can be read, the policies
loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from bot.adapters.store.db import HEAD_REVISION


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None)
    message = str(orig if orig is not None else exc).strip()
    return message.splitlines()[0] if message else type(exc).__name__


def policy_status(directory: Path) -> dict[str, Any]:
    """What loading the policies directory gives: how many policy files, of which repositories (a repository may
    have several), or the problems (checked once, at start-up)."""
    from bot.adapters.policy_files import load_dir
    from bot.domain.errors import RevertBisectError

    try:
        loaded = load_dir(directory)
    except (RevertBisectError, OSError) as exc:
        return {"ok": False, "dir": str(directory), "error": str(exc)}
    status: dict[str, Any] = {
        "ok": True,
        "dir": str(directory),
        "count": sum(len(r.policies) for r in loaded.values()),
        "repositories": sorted(loaded),
    }
    if not loaded:
        status["note"] = "no policies: every command is answered as not configured for its repository"
    return status


def check(engine: Engine, policies: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(ready, body). Ready: the store answers SELECT 1, alembic_version is HEAD_REVISION, the job queue (the `jobs`
    table) answers a read, the policies loaded."""
    checks: dict[str, dict[str, Any]] = {}
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            checks["store"] = {"ok": True, "url": engine.url.render_as_string(hide_password=True)}
            try:
                revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            except SQLAlchemyError as exc:
                conn.rollback()  # PostgreSQL refuses the next statement of a failed transaction
                checks["schema"] = {"ok": False, "expected": HEAD_REVISION, "revision": None, "error": _reason(exc)}
            else:
                checks["schema"] = {"ok": revision == HEAD_REVISION, "expected": HEAD_REVISION, "revision": revision}
                if revision != HEAD_REVISION:
                    checks["schema"]["error"] = (
                        f"the store is at revision {revision}, this code needs {HEAD_REVISION} (run the migrations)"
                    )
            try:
                conn.execute(text("SELECT 1 FROM jobs LIMIT 1"))
                checks["queue"] = {"ok": True}
            except SQLAlchemyError as exc:
                checks["queue"] = {"ok": False, "error": _reason(exc)}
    except SQLAlchemyError as exc:
        checks["store"] = {"ok": False, "url": engine.url.render_as_string(hide_password=True), "error": _reason(exc)}
        checks.setdefault(
            "schema", {"ok": False, "expected": HEAD_REVISION, "error": "not checked: the store is unreachable"}
        )
        checks.setdefault("queue", {"ok": False, "error": "not checked: the store is unreachable"})
    checks["policies"] = policies
    failed = [name for name, result in checks.items() if not result.get("ok")]
    return not failed, {"status": "not ready" if failed else "ready", "failed": failed, "checks": checks}
