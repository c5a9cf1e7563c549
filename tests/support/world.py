"""The world an end-to-end test runs in: the scenario in the sandbox and the bot on loopback, and what
the tests do to it (comments delivered as GitHub's signed webhooks, reads of the sandbox that fail loudly)."""

import json
import logging
import time
import uuid
from pathlib import Path

import httpx

from bot.app import create_app
from bot.ingress.webhooks.signature import sign
from bot.observability.logs import ContextFilter, RedactFilter, TextFormatter
from bot.settings import BotSettings
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support import ROOT
from tests.support.net import serving
from tests.support.sandbox import HTTP, BotWatch, github_get, wait_for

SECRET = "story-secret-" + uuid.uuid4().hex

# The miniature's KL test declared deterministic, as a team whose test never flakes declares it (`--flake-rate 0`'s
# policy key): a story about what the bot writes, not about how it searches, then spends about 7 runs on the bisect
# runner instead of 17 (under `auto` the culprit's parent is read until a culprit failing 70% of the time would have
# shown there, and the culprit is re-run). The search under `auto` is the webhook-only story's, the App story's and
# the demo's; these stories' subjects (guards, modes, faults, outages, re-lands, the dashboard) are the same either way.
DECLARED_DETERMINISTIC = ("bisect:\n", "bisect:\n  flake_rate: 0\n")


def policies_with(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """A copy of the project's policies (under `tmp_path`) with example.yaml, the miniature's policy, edited: each
    (old, new) replaces the first `old`, which must be there."""
    import shutil

    policies = tmp_path / "policies"
    shutil.copytree(ROOT / "policies", policies)
    example = policies / "example.yaml"
    text = example.read_text()
    for old, new in edits:
        assert old in text, f"policies/example.yaml has no {old!r}"
        text = text.replace(old, new, 1)
    example.write_text(text)
    return policies


def sandbox_and_bot(
    tmp_path,
    policies: Path = ROOT / "policies",
    app_key: str | None = None,
    scenario_kw: dict | None = None,
    **settings_extra,
):
    """The scenario in the sandbox and the bot (in this process) on loopback; with `app_key`, the bot
    authenticates as GitHub App 4242 (that key's public half registered), else with its token. `scenario_kw`: the
    scenario's build arguments besides the stories' own (24 commits, seed 3)."""
    scenario = build(tmp_path / "scenario", **{"commits": 24, "seed": 3, **(scenario_kw or {})})
    state = SandboxState(tmp_path / "sandbox")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    auth = dict(github_token=seeded.tokens["revert-bisect-bot"])
    if app_key:
        from cryptography.hazmat.primitives import serialization

        public = (
            serialization.load_pem_private_key(app_key.encode(), None)
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
        state.register_app(4242, public, [seeded.repo])
        state.set_permission(seeded.repo, state.apps.apps[4242].bot_login, "write")
        (tmp_path / "app.pem").write_text(app_key)
        auth = dict(github_app_id=4242, github_app_private_key=tmp_path / "app.pem")
    base, stop_sandbox = run_in_thread(state)
    server = {"stop": stop_sandbox}

    def take_github_away() -> None:  # the sandbox stops: connections to it are refused
        server["stop"]()
        server["stop"] = lambda: None

    def bring_github_back() -> None:  # on the same port, with the same state
        _, server["stop"] = run_in_thread(state, port=int(base.rsplit(":", 1)[1]))

    settings = BotSettings(
        webhook_secret=SECRET,
        db=f"sqlite:///{tmp_path / 'bot.db'}",
        policies=policies,
        github_url=base,
        workspace=tmp_path / "clones",
        **auth,
        **settings_extra,
    )
    stop_log = _log_to(tmp_path / "bot.log")
    bot_serving = serving(create_app(settings))  # on a socket bound before uvicorn starts (port 0)
    bot_server = bot_serving.__enter__()
    bot = bot_server.url
    try:
        health = "no answer"
        for _ in range(100):
            try:
                answer = HTTP.get(bot + "/healthz", timeout=1)
                health = f"{answer.status_code} {answer.text}"
                if answer.status_code == 200 and answer.json()["worker"]:
                    break
            except httpx.HTTPError as exc:
                health = f"no answer ({type(exc).__name__})"
            time.sleep(0.1)
        else:
            raise AssertionError(f"the bot's worker did not come up: /healthz said {health} (log: {tmp_path}/bot.log)")
        watch = BotWatch(settings.db, bot_server.thread.is_alive, [tmp_path / "bot.log"])
        yield dict(
            scenario=scenario,
            state=state,
            seeded=seeded,
            base=base,
            bot=bot,
            tmp=tmp_path,
            watch=watch,
            take_github_away=take_github_away,
            bring_github_back=bring_github_back,
        )
    finally:
        bot_serving.__exit__(None, None, None)
        server["stop"]()
        stop_log()


def _log_to(path: Path):
    """The in-process bot's log lines (INFO and up, redacted as the service's own) also in `path`, for the
    tail a failed wait shows. Returns the function that takes the handler off again."""
    handler = logging.FileHandler(path)
    handler.addFilter(
        lambda record: record.name.startswith("revert_bisect") or record.levelno >= logging.WARNING
    )  # not every HTTP request
    handler.addFilter(ContextFilter())
    handler.addFilter(RedactFilter())
    handler.setFormatter(TextFormatter())
    ours, root = logging.getLogger("revert_bisect"), logging.getLogger()
    level = ours.level
    ours.setLevel(logging.INFO)
    root.addHandler(handler)

    def remove() -> None:
        root.removeHandler(handler)
        ours.setLevel(level)
        handler.close()

    return remove


def command_near_the_culprit(scenario) -> str:
    """`/revert-bisect` over the four commits around the culprit (GOOD two before it, BAD the one after), for a
    story whose point is what the bot does once it has found: the search over the whole range is the command
    story's and the scheduled run's to prove, and every commit searched is a test process importing torch."""
    i = scenario.culprit_index
    good, bad = scenario.shas[max(i - 2, 0)], scenario.shas[min(i + 1, len(scenario.shas) - 1)]
    return f"/revert-bisect decode-cache-hit good={good[:12]} bad={bad[:12]}"


def gh(world, method, path, token_of="sandbox-maintainer", **kw):
    token = world["seeded"].tokens[token_of]
    return HTTP.request(method, world["base"] + path, headers={"Authorization": f"token {token}"}, timeout=10, **kw)


def deliver_comment(world, user: str, body: str, number: int, delivery: str | None = None) -> dict:
    """Post the comment on the sandbox as `user`, then deliver GitHub's recorded payload for it, signed
    (as X-GitHub-Delivery `delivery`, default a fresh one)."""
    repo = world["seeded"].repo
    comment = gh(world, "POST", f"/repos/{repo}/issues/{number}/comments", token_of=user, json={"body": body}).json()
    deliver_webhook(world, comment, user, body, number, delivery)
    return comment


def deliver_webhook(world, comment: dict, user: str, body: str, number: int, delivery: str | None = None) -> None:
    """GitHub's recorded issue_comment payload for `comment` (already on the sandbox), signed, to the bot."""
    repo = world["seeded"].repo
    payload = json.loads((ROOT / "tests/fixtures/github/webhooks/issue_comment.created.json").read_text())
    payload["repository"]["full_name"] = repo
    payload["issue"]["number"] = number
    payload["comment"].update(id=comment["id"], body=body, user={**payload["comment"]["user"], "login": user})
    raw = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(SECRET.encode(), raw),
        "Content-Type": "application/json",
    }
    answer = HTTP.post(world["bot"] + "/webhooks/github", content=raw, headers=headers, timeout=10)
    assert answer.status_code == 202, answer.text


def open_reverts(world):
    pulls = github_get(
        world["base"],
        world["seeded"].tokens["sandbox-maintainer"],
        f"/repos/{world['seeded'].repo}/pulls",
        state="open",
    )
    return [p for p in pulls if p["title"].startswith("Revert ")]


def published_reverts(world, timeout: float = 180):
    """The open revert PRs once the bot has no job left: the PR is opened before its labels, reviewers and
    comments are written, so a test that reads those waits for the job that writes them to end."""
    watch = world["watch"]
    return wait_for(lambda: watch.settled() and open_reverts(world), timeout=timeout, bot=watch)


def comments(world, number):
    return github_get(
        world["base"],
        world["seeded"].tokens["sandbox-maintainer"],
        f"/repos/{world['seeded'].repo}/issues/{number}/comments",
        per_page=100,
    )
