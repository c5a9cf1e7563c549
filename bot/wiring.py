"""Which handler serves which job in this deployment: built from settings at start-up."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from bot.adapters.dispatch.actions import GitHubActionsBackend, Limits
from bot.adapters.dispatch.local_pool import LocalPool, worktree_root
from bot.adapters.git.clones import GIT_CLONES
from bot.adapters.github.app_auth import AppCredentials
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.policy_files import load_dir
from bot.adapters.store.flakes import Flakes
from bot.adapters.store.holds import Holds
from bot.adapters.store.series import SeriesOrigins, SeriesPoints
from bot.adapters.store.store import Store
from bot.domain.policy import Test
from bot.ingress.jobs.command import CommandJob
from bot.ingress.jobs.nightly import NightlyJob
from bot.ingress.jobs.series import SYNC_AT_START, Alongside, SeriesJob, SeriesSync
from bot.ingress.jobs.slowdowns import AfterIntake, SlowdownJob
from bot.ingress.worker import Handler
from bot.observability.github_api import install as install_github_api
from bot.ports import BackendFor, CiReads, Git
from bot.service.backends import step_inputs
from bot.service.bisections import Bisections
from bot.service.reland import RevertMerged
from bot.service.run_reading import Kept
from bot.service.slowdowns import Slowdowns
from bot.settings import BotSettings, default_workspace
from runners.spec import Backend, StepSpec
from runners.step import Request


def backends_over(ci_for: Callable[[str], CiReads]) -> BackendFor:
    """Where a policy's test runs its steps (bot.ports.BackendFor): the local pool, or the step workflow on the
    repository's self-hosted runners, whose runs `ci_for(repository)` dispatches and reads."""

    def backend_for(
        test: Test, workers: int, repo: Git, repo_slug: str, clone_url: str, branch: str, bisection_id: int
    ) -> Backend:
        runner = test.runner
        if runner.backend == "local":
            return LocalPool(repo, workers, worktree_root(repo.path))
        metric = test.metric

        def inputs_for(spec: StepSpec, correlation: str) -> dict[str, str]:
            request = Request(
                clone_url,
                spec,
                bisection_id,
                test.id,
                metric.name if metric else None,
                metric.threshold if metric else None,
            )
            return step_inputs(request, runner.labels, runner.timeout_minutes, correlation)

        limits = Limits(
            poll_s=runner.poll_seconds,
            queue_timeout_s=runner.queue_timeout_minutes * 60,
            find_timeout_s=runner.find_timeout_seconds,
        )
        return GitHubActionsBackend(
            ci_for(repo_slug).actions(runner.workflow), branch, inputs_for, runner.parallelism, runner.labels, limits
        )

    return backend_for


def handlers(settings: BotSettings, engine: Engine) -> dict[str, Handler]:
    """The job handlers; none without a GitHub token (the service then only records deliveries)."""
    token = settings.github_token.get_secret_value()
    if not token and not settings.github_app_id:
        return {}
    policies = load_dir(settings.policies)
    api = settings.github_url.rstrip("/")
    git_base = (settings.github_git_url or ("https://github.com" if api == "https://api.github.com" else api)).rstrip(
        "/"
    )
    workspace = default_workspace(settings)
    public = api == "https://api.github.com"
    install_github_api()  # before the first client: each counts its requests (revert_bisect_github_api_* in /metrics)
    forges: dict[str, GitHubForge] = {}
    if settings.github_app_id:
        app = AppCredentials.from_file(
            settings.github_app_id,
            settings.github_app_private_key,
            api,
            throttle=public,
            timeout=settings.github_timeout_s,
        )
        client_for, token_for = app.client, app.token  # an installation token per repository, refreshed by PyGithub
    else:
        gh = connect(api, token, throttle=public, timeout=settings.github_timeout_s)
        client_for, token_for = (lambda repo: gh), (lambda repo: token)

    def forge_for(repo: str) -> GitHubForge:
        if repo not in forges:
            forges[repo] = GitHubForge(client_for(repo), repo)
        return forges[repo]

    store = Store(engine)
    bisections = Bisections(  # the service gets the store's ports (bot.ports.store), here the SQLAlchemy store
        store,
        Holds(engine),
        backends_over(forge_for),
        GIT_CLONES,
        workspace,
        policies,
        clone_url=lambda repo: f"{git_base}/{repo}.git",
        token=token_for,
    )
    series = SeriesPoints(engine)
    kept = Kept()  # a run read once per process: by the series' sync and the red-test intake of its delivery
    return {
        "command": CommandJob(policies, forge_for, bisections),
        # a completed run of a watched workflow: the benchmarks' series read (green or red), then the red-test intake
        # and, after the intake, the series' new slowdowns bisected and acted on (`on_slowdown`)
        "nightly_failure": Alongside(
            SeriesJob(policies, forge_for, series, kept),
            AfterIntake(
                NightlyJob(policies, forge_for, bisections, Flakes(engine), kept=kept),
                SlowdownJob(policies, forge_for, Slowdowns(bisections, series, SeriesOrigins(engine))),
            ),
        ),
        SYNC_AT_START: SeriesSync(policies, forge_for, series),  # run once at start (bot.app): a new policy's backfill
        # a merged revert of the bot's: the culprit PR is told how to re-land it (the route of `pull_request`
        # `closed` to it is bot.ingress.webhooks.routes')
        "revert_merged": RevertMerged(store, forge_for),
    }
