"""Failure modes, one class each; their message is the one-line text a user sees."""


class RevertBisectError(Exception):
    """Base of every expected failure; str(exc) is shown to the user as is."""

    exit_code = 2


class StoreUnavailable(RevertBisectError):
    pass


class RepoError(RevertBisectError):
    """The repository or a revision in it is not what the command needs."""


class CommandError(RevertBisectError):
    """The test command cannot be run at all."""


class NotFound(RevertBisectError):
    pass


class ForgeError(RevertBisectError):
    """The forge (GitHub) or the clone fetched from it refused or failed a request."""
