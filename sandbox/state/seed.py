"""A sandbox seeded from a scenario (scenarios.mamba_track_boundary's scenario.json), and the runner machine
the bot's step workflow runs on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .. import gitstore
from ..actions import machine
from .store import PERMISSIONS, SandboxState

NIGHTLY_WORKFLOW = ".github/workflows/nightly-test.yml"
STEP_WORKFLOW = ".github/workflows/revert-bisect-step.yml"


@dataclass
class Seeded:
    repo: str
    maintainer: str
    tokens: dict[str, str]  # login -> token
    scenario: dict


def seed_from_scenario(
    state: SandboxState,
    scenario_dir: Path | str,
    *,
    maintainer: str = "sandbox-maintainer",
    bot: str = "revert-bisect-bot",
) -> Seeded:
    """Seed `state` from a scenario written by `scenarios.mamba_track_boundary` (its scenario.json).

    The repository is cloned into the sandbox's storage; each commit of the scenario becomes a merged
    pull request (its number from the scenario, merge_commit_sha the commit); the follow-up becomes an
    issue (or PR); authors get write permission, `maintainer` maintain and `bot` write. Each user gets
    the token `sandbox-token-<login>`."""
    scenario_dir = Path(scenario_dir)
    data = json.loads((scenario_dir / "scenario.json").read_text())
    slug, branch = data["repo_slug"], data.get("default_branch", "main")
    source = Path(data["repo"])
    if not source.is_absolute():
        source = scenario_dir / source
    tokens: dict[str, str] = {}

    def user(login: str, permission: str, name: str | None = None, email: str | None = None) -> None:
        existing = state.users.get(login)
        state.add_user(
            login,
            name=name or (existing.name if existing else None),
            email=email or (existing.email if existing else None),
            token=f"sandbox-token-{login}",
        )
        if existing is not None:
            existing.name, existing.email = name or existing.name, email or existing.email
        tokens[login] = f"sandbox-token-{login}"
        if PERMISSIONS.index(permission) < PERMISSIONS.index(repo.permissions.get(login, "none")):
            state.set_permission(slug, login, permission)

    with state.lock:
        repo = state.create_repo(slug, default_branch=branch, source=source)
        owner = slug.split("/")[0]
        user(owner, "admin")
        user(maintainer, "maintain", name="Sandbox Maintainer", email=f"{maintainer}@sandbox.invalid")
        user(bot, "write", name="revert-bisect", email=f"{bot}@sandbox.invalid")
        # squash merges are committed by GitHub itself: `web-flow`
        state.add_user("web-flow", name="GitHub", email="noreply@github.com")
        for pr in data["prs"]:
            user(pr["author"], "write", pr.get("author_name"), pr.get("author_email"))
        follow = data.get("followup") or None
        if follow:
            user(follow["author"], "write", follow.get("author_name"), follow.get("author_email"))
        for pr in data["prs"]:
            parents = gitstore.commit(repo.path, pr["sha"])["parents"]
            state.add_pull(
                slug,
                number=pr["number"],
                title=pr["title"],
                body=pr.get("body"),
                user=pr["author"],
                head=f"{pr['author']}/pr-{pr['number']}",
                base=branch,
                merged=True,
                merge_commit_sha=pr["sha"],
                head_sha=pr["sha"],
                base_sha=parents[0] if parents else None,
                merged_at=pr.get("merged_at"),
                created_at=pr.get("merged_at"),
            )
        if follow:
            if follow.get("kind", "issue") == "pr":
                state.add_pull(
                    slug,
                    number=follow["number"],
                    title=follow["title"],
                    body=follow.get("body"),
                    user=follow["author"],
                    head=f"{follow['author']}/fix-{follow['number']}",
                    labels=follow.get("labels", ()),
                    created_at=follow.get("created_at"),
                )
            else:
                state.add_issue(
                    slug,
                    number=follow["number"],
                    title=follow["title"],
                    body=follow.get("body"),
                    user=follow["author"],
                    labels=follow.get("labels", ()),
                    state=follow.get("state", "open"),
                    created_at=follow.get("created_at"),
                )
        # the nightly workflow and the step workflow run their own steps, on a runner machine set up as the step
        # workflow's header asks (python3 with the libraries a GPU box has installed, uv)
        if state.actions.workflow(repo, STEP_WORKFLOW) is not None:
            step_runner_machine(state)
    return Seeded(slug, maintainer, tokens, data)


def step_runner_machine(state: SandboxState) -> None:
    """The emulated runner becomes the machine the step workflow (runners/github/revert-bisect-step.yml)
    asks for (sandbox/actions/machine.py): the workflow's own steps -- install into the runner package's venv,
    `$REVERT_BISECT_RUNNER_VENV/bin/python -m runners.step`, upload -- run on it as written, with one runner
    cache (clones, worktree slots, environments) and the runner package's venvs kept across runs, as on a real
    self-hosted runner machine."""
    state.actions.runner_env.update(machine.step_runner_env(state.root / "_runner-machine"))
    state.actions.runner_env["REVERT_BISECT_RUNNER_CACHE"] = str(state.root / "_runner-cache")
