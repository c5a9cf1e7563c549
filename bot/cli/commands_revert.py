"""`revert-bisect revert`: revert a culprit on a new branch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err, out
from bot.domain.errors import RevertBisectError

ALREADY_REVERTED = 10  # `revert`: CULPRIT is reverted on ONTO already (not a code of EXIT_CODES)
REVERT_EXIT_HELP = """
Exit codes: 0 the revert is on the new branch; 10 CULPRIT is already reverted on ONTO (a
`This reverts commit` line, a `Revert "<subject>"` subject, or its inverse patch, not
re-landed since): nothing was changed; 2 bad input, or a conflict.
"""


def revert(
    repo: Annotated[Path, typer.Option(metavar="PATH", help="The git repository.")],
    culprit: Annotated[str, typer.Option(metavar="SHA", help="The commit to revert.")],
    onto: Annotated[
        str | None, typer.Option(metavar="REF", help="Where the revert goes (default: the default branch head).")
    ] = None,
    branch: Annotated[
        str | None, typer.Option(metavar="NAME", help="The new branch (default: revert-bisect/revert-<sha>).")
    ] = None,
    reason: Annotated[str | None, typer.Option(metavar="TEXT", help="Why, appended to the commit message.")] = None,
) -> None:
    """Revert CULPRIT on top of ONTO on a new branch; a conflict, or a revert already on ONTO, changes nothing."""
    from bot.adapters.git.repo import GitRepo
    from bot.adapters.git.revert import AlreadyReverted, create_revert

    try:
        git_repo = GitRepo(repo)
        result = create_revert(git_repo, culprit, onto or git_repo.default_branch(), branch, reason)
    except AlreadyReverted as exc:  # an answer, not an error: its own exit code for scripts
        out.print(str(exc), highlight=False, soft_wrap=True)
        raise typer.Exit(ALREADY_REVERTED) from None
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(f"{result.sha} on branch {result.branch}")
    out.print(result.diffstat, highlight=False)
