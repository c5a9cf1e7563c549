"""The service's settings: environment variables `REVERT_BISECT_*`, read when the app is built (never at import)."""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_cache_dir
from pydantic import SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

PLACEHOLDERS = {"", "changeme", "change-me", "secret", "xxx", "todo"}


class BotSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REVERT_BISECT_", extra="ignore")

    webhook_secret: SecretStr = SecretStr("")
    db: str | None = None  # SQLAlchemy URL; None: SQLite in the user data directory
    policies: Path = Path("policies")
    max_body_bytes: int = 10 * 1024 * 1024
    github_timeout_s: int = (
        15  # seconds per GitHub request (PyGithub takes whole seconds); a slower answer is a timeout, retried
    )
    job_lease_s: float = 60.0  # a job whose worker stops renewing (a killed replica) is retried after this
    # /healthz fails when a worker loop has not beaten for this long: it beats each turn, and each second while a
    # bisection waits for its steps, so only a loop stuck in one call (a hung clone, a request without timeout) ages
    worker_stuck_s: float = 600.0
    local: bool = False  # development on loopback: a missing secret is tolerated (every delivery is refused)
    github_url: str = "https://api.github.com"  # GitHub Enterprise: https://HOST/api/v3; the sandbox: its base URL
    github_git_url: str | None = None  # where repositories are cloned from (default: github.com, or the API host)
    github_token: SecretStr = SecretStr("")  # token auth, or:
    github_app_id: int | None = None  # GitHub App auth: the app's id and private key (PEM file)
    github_app_private_key: Path | None = None
    workspace: Path | None = None  # clones of watched repositories (default: the user cache directory)
    # The dashboard and its JSON API: open on loopback; elsewhere `Authorization: Bearer <token>` or /login?token=...
    dashboard_token: SecretStr | None = None

    @model_validator(mode="after")
    def _real_secret(self) -> BotSettings:
        if not self.local and self.webhook_secret.get_secret_value().strip().lower() in PLACEHOLDERS:
            raise ValueError(
                "REVERT_BISECT_WEBHOOK_SECRET is unset or a placeholder: "
                "set the secret configured on the GitHub App's webhook"
            )
        return self


def default_workspace(settings: BotSettings) -> Path:
    """Where the bot keeps its clones, `<workspace>/<owner>__<repo>`.

    settings.workspace, else the user cache directory.
    """
    return settings.workspace or Path(user_cache_dir("revert-bisect", appauthor=False)) / "clones"
