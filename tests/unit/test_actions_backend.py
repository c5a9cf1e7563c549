"""The GitHub Actions backend's decisions, against a scripted Actions port and a fake clock.

(tests/test_actions_e2e.py runs the same backend against the sandbox's emulated runner.)"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bot.adapters.dispatch.actions import Dispatched, GitHubActionsBackend, Limits
from bot.adapters.github.actions import RunState
from runners import result as result_json
from runners.spec import StepResult, StepSpec

SHA = "a" * 40
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"


@dataclass
class FakeActions:
    """Runs keyed by id; `states` scripts what each poll sees; `answer` what dispatch does."""

    answer: str = "details"  # details | 204 | error | refused
    states: dict[int, list[tuple[str, str | None]]] = field(default_factory=dict)
    artifacts: dict[int, bytes] = field(default_factory=dict)
    titles: dict[int, str] = field(default_factory=dict)
    cancelled: list[int] = field(default_factory=list)
    dispatched: list[dict] = field(default_factory=list)
    next_id: int = 100
    polls: int = 0

    def dispatch(self, ref, inputs):
        self.dispatched.append(inputs)
        if self.answer == "refused":
            raise RuntimeError('422 Unexpected inputs provided: ["spec"]')
        self.next_id += 1
        self.titles[self.next_id] = f"step [{inputs['correlation']}]"
        if self.answer == "error":
            raise Dispatched("502 Bad Gateway")
        return self.next_id if self.answer == "details" else None

    def find_runs(self, marker, since):
        return sorted(i for i, t in self.titles.items() if marker in t)

    def state(self, run_id):
        self.polls += 1
        script = self.states.setdefault(run_id, [("completed", "success")])
        status, conclusion = script.pop(0) if len(script) > 1 else script[0]
        return RunState(run_id, status, conclusion, f"https://gh/runs/{run_id}", ("self-hosted", "gpu"), "gpu-7")

    def artifact_file(self, run_id, artifact, member):
        assert artifact.startswith("revert-bisect-step-") and member == "result.json"
        return self.artifacts.get(run_id)

    def cancel(self, run_id):
        self.cancelled.append(run_id)
        return True


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def backend(actions, clock=None, parallelism=2, **limits) -> GitHubActionsBackend:
    inputs = lambda spec, correlation: {"step": str(spec.step_id), "correlation": correlation}  # noqa: E731
    limits = {"poll_s": 0.0, **limits}
    return GitHubActionsBackend(
        actions, "main", inputs, parallelism, ["self-hosted", "gpu"], Limits(**limits), clock or Clock()
    )


def artifact(step_id: int, sha: str = SHA, exit_code: int = 1, metric: float | None = 0.0065) -> bytes:
    now = datetime.now(UTC)
    res = StepResult(step_id, sha, exit_code, metric, None, "gpu-7", 12.0, "log", now, now, "k1", True)
    return json.dumps(result_json.to_json(res, "avg_kl_div", 0.002)).encode()


def spec(step_id: int = 1) -> StepSpec:
    return StepSpec(step_id, SHA, ("{runner_python}", "-m", "probe"))


def test_a_finished_run_gives_its_artifacts_result_and_frees_a_slot():
    fake = FakeActions()
    b = backend(fake)
    b.submit(spec(1))
    assert b.free == 1
    fake.artifacts[101] = artifact(1)
    [got] = b.wait(0)
    assert (got.exit_code, got.metric, got.infra_reason, got.env_key, got.env_reused) == (1, 0.0065, None, "k1", True)
    assert "https://gh/runs/101" in got.runner and b.free == 2


def test_every_unusable_ending_is_infra_with_its_reason():
    fake = FakeActions()
    b = backend(fake, parallelism=8)
    endings = {
        1: ("completed", "cancelled"),
        2: ("completed", "timed_out"),
        3: ("completed", "success"),
        4: ("completed", "failure"),
        5: ("completed", "startup_failure"),
    }
    for step_id, state in endings.items():
        b.submit(spec(step_id))
        fake.states[100 + step_id] = [state]
    fake.artifacts[104] = b'{"schema": 1, "step_id": 4}'  # 3 has none at all
    got = {r.step_id: r for r in b.wait(0)}
    assert all(r.exit_code is None and r.metric is None for r in got.values())
    assert "was cancelled on GitHub" in got[1].infra_reason
    assert "timed out on gpu-7" in got[2].infra_reason
    assert "without the artifact revert-bisect-step-3/result.json" in got[3].infra_reason
    assert "invalid result.json" in got[4].infra_reason and "lacks" in got[4].infra_reason
    assert "concluded startup_failure" in got[5].infra_reason


def test_a_result_for_another_commit_is_refused():
    fake = FakeActions()
    b = backend(fake)
    b.submit(spec(1))
    fake.artifacts[101] = artifact(1, sha="b" * 40)
    [got] = b.wait(0)
    assert "invalid result.json" in got.infra_reason and "not aaaaaaaaaaaa" in got.infra_reason


def test_a_run_no_runner_picks_up_waits_visibly_then_is_given_up_and_cancelled():
    fake, clock = FakeActions(), Clock()
    b = backend(fake, clock, queue_timeout_s=600)
    b.submit(spec(1))
    fake.states[101] = [("queued", None)]
    assert b.wait(0) == []
    clock.t = 300
    assert b.wait(0) == []
    assert b.waiting() == {1: "queued 5 min for a runner labelled self-hosted, gpu"}
    clock.t = 601
    [got] = b.wait(0)
    assert "no runner labelled self-hosted, gpu started run 101 within 10 min" in got.infra_reason
    assert fake.cancelled == [101] and b.waiting() == {}


def test_a_204_dispatch_is_found_by_its_run_name():
    fake = FakeActions(answer="204")
    b = backend(fake)
    b.submit(spec(1))
    assert b.waiting() == {1: "dispatched; waiting for GitHub to create the run"}
    fake.artifacts[101] = artifact(1)
    assert b.wait(0) == []  # this poll finds the run
    [got] = b.wait(0)
    assert got.exit_code == 1 and fake.dispatched[0]["correlation"] in fake.titles[101]


def test_an_uncertain_dispatch_is_found_or_redispatched_and_duplicates_are_cancelled():
    fake, clock = FakeActions(answer="error"), Clock()
    b = backend(fake, clock, find_timeout_s=60)
    b.submit(spec(1))
    correlation = fake.dispatched[0]["correlation"]
    fake.titles.clear()  # the 502 was real: no run was created
    assert b.wait(0) == []
    clock.t = 61
    fake.answer = "details"
    assert b.wait(0) == [] and len(fake.dispatched) == 2 and fake.dispatched[1]["correlation"] == correlation
    fake.titles[150] = f"step [{correlation}]"  # ... and a late duplicate of it
    fake.artifacts[102] = artifact(1)
    [got] = b.wait(0)
    assert got.exit_code == 1
    b2 = backend(FakeActions(answer="204"))
    b2.submit(spec(2))
    dup = b2.actions
    dup.titles[999] = dup.titles[101]  # two runs carry the correlation: the first is adopted, the other cancelled
    dup.artifacts[101] = artifact(2)
    b2.wait(0)
    assert dup.cancelled == [999]


def test_a_dispatch_that_never_shows_up_is_infra_after_the_redispatches():
    fake, clock = FakeActions(answer="error"), Clock()
    fake.titles = _Nothing()
    b = backend(fake, clock, find_timeout_s=10, redispatch=1)
    b.submit(spec(1))
    clock.t = 11
    assert b.wait(0) == [] and len(fake.dispatched) == 2
    clock.t = 22
    [got] = b.wait(0)
    assert "dispatched 2 times and no run appeared" in got.infra_reason


def test_the_policys_runner_gives_the_backend_its_waits():
    """poll_seconds, queue_timeout_minutes and find_timeout_seconds (120 s unless the policy says) reach the backend."""
    from bot.adapters.policy_files import parse
    from bot.wiring import backends_over

    class Ci:
        def actions(self, workflow):
            return FakeActions()

    def limits_of(runner: str) -> Limits:
        text = f"""repository: o/r
watch: [{{workflow: .github/workflows/nightly.yml}}]
tests:
  - id: t
    match: t
    probe: {{name: command, command: [./t]}}
    runner: {{backend: github_actions, labels: [gpu], {runner}}}
"""
        test = parse(text, "p.yaml").tests[0]
        return backends_over(lambda slug: Ci())(test, 1, None, "o/r", "https://x", "main", 1).limits

    assert limits_of("poll_seconds: 2") == Limits(poll_s=2, queue_timeout_s=3600, find_timeout_s=120)
    assert limits_of("queue_timeout_minutes: 5, find_timeout_seconds: 10") == Limits(
        poll_s=15, queue_timeout_s=300, find_timeout_s=10
    )


class _Nothing(dict):
    def __setitem__(self, key, value):
        pass


def test_a_refused_dispatch_says_why():
    b = backend(FakeActions(answer="refused"))
    b.submit(spec(1))
    [got] = b.wait(0)
    assert "dispatch of the step workflow refused" in got.infra_reason and "Unexpected inputs" in got.infra_reason


def test_cancel_and_close_cancel_the_runs_and_drop_their_results():
    fake = FakeActions()
    b = backend(fake)
    b.submit(spec(1))
    b.submit(spec(2))
    fake.states[101] = fake.states[102] = [("in_progress", None)]
    b.cancel([1])
    assert fake.cancelled == [101] and b.free == 1
    b.close()
    assert fake.cancelled == [101, 102] and b.wait(0) == []


def test_github_hiccups_while_polling_are_retried_at_the_next_poll():
    fake = FakeActions()
    b = backend(fake)
    b.submit(spec(1))
    calls = []
    real = fake.state

    def flaky(run_id):
        calls.append(run_id)
        if len(calls) == 1:
            raise ConnectionError("reset by peer")
        return real(run_id)

    fake.state = flaky
    fake.artifacts[101] = artifact(1)
    assert b.wait(0) == []
    [got] = b.wait(0)
    assert got.exit_code == 1


def _deliver(tmp_path, event: str, body: bytes) -> int:
    from fastapi.testclient import TestClient

    from bot.app import create_app
    from bot.ingress.webhooks.signature import sign
    from bot.settings import BotSettings

    secret = "wake-test-" + "x" * 24
    app = create_app(BotSettings(webhook_secret=secret, db=f"sqlite:///{tmp_path / 'bot.db'}"), handlers={})
    with TestClient(app) as client:
        return client.post(
            "/webhooks/github",
            content=body,
            headers={
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": f"wake-{hash(body)}",
                "X-Hub-Signature-256": sign(secret.encode(), body),
            },
        ).status_code


def _waiting(b: GitHubActionsBackend, fake: FakeActions):
    """A thread in b.wait(None), started once the backend has polled its run (so only a wake can end it early)."""
    import threading

    got: list = []
    waiter = threading.Thread(target=lambda: got.extend(b.wait(None)), daemon=True)
    waiter.start()
    for _ in range(1000):
        if fake.polls:
            break
        waiter.join(0.01)
    assert fake.polls == 1
    return waiter, got


def test_a_webhook_about_the_run_wakes_its_backend_at_once(tmp_path):
    """Polling is the floor (here every 600 s); a workflow_job delivery about that run ends the wait now (well
    within a minute, the bot's app started and migrated on a loaded machine included)."""
    import time

    payload = json.loads((FIXTURES / "workflow_job.completed.failure.with-organization.json").read_bytes())
    fake = FakeActions(next_id=payload["workflow_job"]["run_id"] - 1)
    b = GitHubActionsBackend(fake, "main", lambda spec, c: {"correlation": c}, 1, ["self-hosted"], Limits(poll_s=600))
    b.submit(spec(1))
    run_id = payload["workflow_job"]["run_id"]
    fake.states[run_id] = [("in_progress", None)]
    waiter, got = _waiting(b, fake)
    fake.states[run_id] = [("completed", "success")]
    fake.artifacts[run_id] = artifact(1)
    t0 = time.monotonic()
    assert _deliver(tmp_path, "workflow_job", json.dumps(payload).encode()) == 202
    waiter.join(60)
    assert not waiter.is_alive() and time.monotonic() - t0 < 60 and got[0].exit_code == 1


def test_a_webhook_about_another_run_wakes_nothing(tmp_path):
    """SGLang's repository sends thousands of workflow events a day: one about another run costs no poll."""
    payload = json.loads((FIXTURES / "workflow_run.completed.json").read_bytes())
    fake = FakeActions(next_id=payload["workflow_run"]["id"] + 10)
    b = GitHubActionsBackend(fake, "main", lambda spec, c: {"correlation": c}, 1, ["self-hosted"], Limits(poll_s=60))
    b.submit(spec(1))
    fake.states[fake.next_id] = [("in_progress", None)]
    waiter, _ = _waiting(b, fake)
    assert _deliver(tmp_path, "workflow_run", json.dumps(payload).encode()) == 202
    waiter.join(1.0)
    assert waiter.is_alive() and fake.polls == 1
    b.close()  # nothing left to wait for: the waiting thread returns at once
    waiter.join(10)
    assert not waiter.is_alive()


def test_a_workflow_run_titled_with_the_correlation_wakes_a_step_whose_run_is_not_known_yet():
    from bot.adapters.dispatch.actions import wake_for
    from bot.ports import RunEvent

    fake = FakeActions(answer="204")
    b = backend(fake)
    b.submit(spec(1))
    correlation = fake.dispatched[0]["correlation"]
    assert wake_for(RunEvent(999, "revert-bisect step [someone-else]")) == 0
    assert wake_for(RunEvent(101, f"revert-bisect step 1 [{correlation}]")) == 1


def test_an_unchanged_run_is_polled_ever_less_often_and_a_change_polls_at_poll_s_again():
    clock = Clock()
    fake = FakeActions()
    b = backend(fake, clock, poll_s=15, idle_poll_s=120)
    b.submit(spec(1))
    fake.states[101] = [("queued", None)] * 8 + [("in_progress", None)] * 20
    times = []
    for _ in range(9):
        clock.t = b._flights[1].due
        b.wait(0)
        times.append(b._flights[1].interval)
    assert times[:5] == [15, 30, 60, 120, 120]
    assert times[-1] == 15  # in_progress: the run moved
