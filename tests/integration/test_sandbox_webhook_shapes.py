"""The webhooks the sandbox generates (workflow_run, workflow_job) have the shape of GitHub's published
examples (tests/fixtures/github/webhooks, from octokit/webhooks): every key, with a value of the same JSON
type -- not key names only."""

from __future__ import annotations

import json
import subprocess

import pytest

from sandbox import SandboxState
from tests.support import FIXTURES
from tests.support.shapes import shape_mismatches

WORKFLOW = """\
name: Shapes
on: workflow_dispatch
jobs:
  lint:
    runs-on: [self-hosted]
    steps:
      - uses: actions/checkout@v4
      - run: echo linted
      - run: exit 1
"""


@pytest.fixture
def finished(tmp_path):
    src = tmp_path / "src"
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    (src / ".github/workflows").mkdir(parents=True)
    (src / ".github/workflows/shapes.yml").write_text(WORKFLOW)
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(src), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "w"], check=True
    )
    state = SandboxState(tmp_path / "gh")
    state.add_user("octo-org")
    state.create_repo("octo-org/octo-repo", source=src)
    state.actions.base_url = "http://127.0.0.1:9"
    run = state.actions.wait(state.start_run("octo-org/octo-repo", "shapes.yml", "main", event="workflow_dispatch"), 60)
    assert run.conclusion == "failure"
    yield state, run
    state.actions.shutdown()


def example(name: str) -> dict:
    return json.loads((FIXTURES / "github" / "webhooks" / name).read_text())


def test_workflow_run_completed_has_the_published_examples_shape(finished):
    state, run = finished
    payload = state.actions.event_payload(run, "completed")
    assert shape_mismatches(payload, example("workflow_run.completed.json"), optional=("organization",)) == []


def test_workflow_job_completed_has_the_published_examples_shape(finished):
    state, run = finished
    payload = state.actions.job_payload(run, run.jobs[0], "completed")
    published = example("workflow_job.completed.failure.with-organization.json")
    assert shape_mismatches(payload, published, optional=("organization",)) == []
    steps = payload["workflow_job"]["steps"]
    assert [s["name"] for s in steps] == [
        "Set up job",
        "Run actions/checkout@v4",
        "Run echo linted",
        "Run exit 1",
        "Complete job",
    ]
    assert [s["conclusion"] for s in steps] == ["success", "success", "success", "failure", "success"]


def test_the_comparison_reads_value_types_not_key_names_only():
    published = {"id": 1, "name": "x", "steps": [{"number": 1}], "labels": ["a"], "run": {"ok": True}, "gone": None}
    assert (
        shape_mismatches({"id": 1, "name": "y", "steps": [], "labels": [], "run": {"ok": False}, "gone": 3}, published)
        == []
    )
    wrong = {"id": "1", "name": "y", "steps": [{"number": "1"}], "labels": [2], "run": {"ok": "true"}}
    assert shape_mismatches(wrong, published) == [
        "id: string != number",
        "steps[0].number: string != number",
        "labels[0]: number != string",
        "run.ok: string != boolean",
        "gone: missing",
    ]
