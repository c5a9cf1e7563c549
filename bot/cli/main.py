"""`revert-bisect`: the command line."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from bot.cli.commands_bisect import EXIT_HELP, bisect
from bot.cli.commands_changes import changes
from bot.cli.commands_demo import demo, sandbox
from bot.cli.commands_plan import step_plan
from bot.cli.commands_revert import REVERT_EXIT_HELP, revert
from bot.cli.commands_service import check_policy, serve
from bot.cli.commands_status import status
from bot.cli.help import Group

# rich_markup_mode=None: Click's plain help, which wraps every line to the terminal; rich's panels cut
# option help off mid-word ("--descend-merges…") at 80 columns.
app = typer.Typer(
    cls=Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find the commit that broke a test: parallel, flake-aware `git bisect run`.",
)


def _version(value: bool) -> None:
    if value:
        import importlib.metadata  # here: every other command starts without it

        try:
            version = importlib.metadata.version("revert-bisect")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed: pip install -e .)"
        typer.echo(f"revert-bisect {version}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


# The commands, in the order the help lists them.
app.command(epilog=EXIT_HELP)(bisect)
app.command()(status)
app.command(epilog=REVERT_EXIT_HELP)(revert)
app.command()(serve)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})(
    sandbox
)
app.command("check-policy")(check_policy)
app.command("step-plan")(step_plan)
app.command()(changes)
app.command()(demo)


def main() -> None:
    app(prog_name="revert-bisect")


if __name__ == "__main__":
    sys.exit(main())
