"""A bisection's document (bot.service.document) as the CLI gives it, `bisect --json` and `status ID --json` alike:
on the range git gives when the repository is at hand (else the one recorded when it started), the commits git
names, the remedies in the CLI's flags."""

from __future__ import annotations

import git

from bot.adapters.git.repo import GitRepo
from bot.cli.wording import said
from bot.domain.bisect.model import Problem
from bot.domain.errors import RevertBisectError
from bot.domain.outcome import BisectionOutcome
from bot.ports import Git
from bot.ports.store import BisectionRecord
from bot.service.describe import config_of, describe, recorded_range
from bot.service.document import BisectionDocument


def words(outcome: BisectionOutcome) -> str:
    """The outcome's message with its remedy in the CLI's flags."""
    return said(outcome.message, outcome.reason, outcome.facts)


def document(row: BisectionRecord, problem: Problem, repo: Git) -> BisectionDocument:
    """The document of a bisection run here: on its range, `repo` naming the commits."""
    return describe(row, problem, words, repo.subjects)


def stored(row: BisectionRecord) -> BisectionDocument:
    """The document of a stored bisection: as `bisect` wrote it when its repository is at hand (git's range and
    subjects), else on the range recorded when it started."""
    try:
        repo = GitRepo(row.repo)
        graph = repo.range_graph(row.good, row.bad)
    except (RevertBisectError, git.GitCommandError):  # moved, deleted, or no longer has the commits
        return describe(row, recorded_range(row), words)
    return document(row, Problem(graph, row.good, row.bad, config_of(row).settings()), repo)
