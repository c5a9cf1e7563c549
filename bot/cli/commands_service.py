"""`revert-bisect serve` (the webhook service) and `revert-bisect check-policy` (its policy files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err, out
from bot.domain.errors import RevertBisectError


def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store (default: $REVERT_BISECT_DB, else SQLite in the user data directory)."
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="REVERT_BISECT_LOG_FORMAT",
            help="Log lines on stderr: json (one object per line) or text.",
        ),
    ] = "json",
) -> None:
    """The webhook service: POST /webhooks/github (secret from $REVERT_BISECT_WEBHOOK_SECRET); GET /healthz,
    /readyz, /metrics."""
    import uvicorn
    from pydantic import ValidationError

    from bot.app import create_app
    from bot.observability.logs import FORMATS, setup_logging
    from bot.settings import BotSettings

    if log_format not in FORMATS:
        err.print(
            f"revert-bisect: error: --log-format {log_format!r}: use one of {', '.join(FORMATS)}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    setup_logging(log_format)
    try:
        settings = BotSettings(**({"db": db} if db else {}))
        application = create_app(settings)
    except ValidationError as exc:
        err.print(
            f"revert-bisect: error: {exc.errors()[0]['msg'].removeprefix('Value error, ')}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    # log_config=None: uvicorn's own loggers go through ours (same format, same redaction).
    uvicorn.run(application, host=host, port=port, log_level="warning", log_config=None)


def check_policy(
    paths: Annotated[list[Path], typer.Argument(help="Policy files, or directories of *.yaml policies.")],
) -> None:
    """Validate policy files: every problem is reported as file:line: key: why."""
    from bot.adapters.policy_files import PolicyError, load, load_dir

    failed = False
    for path in paths:
        try:
            loaded = load_dir(path) if path.is_dir() else {"": load(path)}
        except PolicyError as exc:
            err.print(str(exc), highlight=False, soft_wrap=True)
            failed = True
            continue
        for policy in loaded.values():
            out.print(f"{path}: ok: {policy.repository}, {len(policy.tests)} test(s), mode {policy.mode}")
    raise typer.Exit(2 if failed else 0)
