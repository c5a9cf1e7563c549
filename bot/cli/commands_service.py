"""`revert-bisect serve` (the webhook service) and `revert-bisect check-policy` (its policy files)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err, out
from bot.domain.errors import RevertBisectError


def serve(
    host: Annotated[str, typer.Option(metavar="ADDRESS", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, metavar="PORT", help="Port to listen on.")] = 8080,
    db: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="SQLAlchemy URL of the store (default: $REVERT_BISECT_DB, else SQLite in the user data directory).",
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="REVERT_BISECT_LOG_FORMAT",
            metavar="FORMAT",
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
    died: list[str] = []
    server: uvicorn.Server | None = None

    def worker_died(reason: str) -> None:  # on the dead loop's thread: the server stops, then this process exits 1
        died.append(reason)
        if server is not None:
            server.should_exit = True

    try:
        settings = BotSettings(**({"db": db} if db else {}))
        application = create_app(settings, on_worker_death=worker_died)
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
    server = uvicorn.Server(uvicorn.Config(application, host=host, port=port, log_level="warning", log_config=None))
    server.run()
    if died:
        # Not restarted in process: a supervisor (systemd Restart=, Kubernetes) starts a clean one.
        err.print(
            f"revert-bisect: error: a worker loop stopped ({died[0]}); exiting so that the service is restarted",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)


def check_policy(
    paths: Annotated[
        list[Path], typer.Argument(metavar="PATH", help="Policy files, or directories of *.yaml policies.")
    ],
) -> None:
    """Validate policy files: every problem is reported as file:line: key: why. The files given are checked together,
    as the bot loads its directory: several policies of one repository must not declare one test id or watch one
    workflow twice, and must agree on `commands`."""
    from bot.adapters.policy_files import check_files

    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.yaml"))
            if not found:
                out.print(f"{path}: no *.yaml policies in this directory", highlight=False, markup=False)
            files.extend(found)
        else:
            files.append(path)
    loaded, problems = check_files(files)
    for file, policy in loaded.items():
        out.print(
            f"{file}: ok: {policy.repository}, {len(policy.tests)} test(s), mode {policy.mode}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
    for problem in problems:
        err.print(problem, highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(2 if problems else 0)
