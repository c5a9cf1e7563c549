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


WORKFLOWS_DIR = ".github/workflows/"


class WorkflowPushRefused(ForgeError):
    """GitHub refused the push: it creates or changes a file under .github/workflows/ and the credentials lack the
    `workflows` permission (a GitHub App) or the `workflow` scope (a token)."""

    def __init__(self, branch: str, reason: str, path: str):
        self.branch, self.reason, self.path = branch, reason, path
        self.summary = (
            f"GitHub refused the push of {branch}: the revert changes {path}, a workflow file, and the bot's "
            "credentials lack the `workflows` permission (GitHub App) or the `workflow` scope (token)"
        )
        super().__init__(self.summary)

    def workflow_files(self, files: list[str]) -> list[str]:
        return sorted({f for f in files if f.startswith(WORKFLOWS_DIR)} | {self.path})
