"""The sandbox's workflow-file reader and `${{ }}` expression subset (sandbox/workflow.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.actions import workflow as wf
from sandbox.actions.workflow import ExpressionError, InputError

STEP_WORKFLOW = Path(__file__).resolve().parents[2] / "runners" / "github" / "revert-bisect-step.yml"

DISPATCHED = """\
name: Dispatched
run-name: "go ${{ inputs.who }}"
on:
  push:
  workflow_dispatch:
    inputs:
      who: {required: true, type: string}
      mode: {type: choice, options: [fast, slow], default: fast}
      flag: {type: boolean, default: true}
      count: {type: number, default: 3}
      note: {type: string}
concurrency: top-${{ inputs.who }}
jobs:
  build:
    name: Build it
    runs-on: [self-hosted, linux]
    timeout-minutes: 7
    steps:
      - run: make
      - uses: actions/upload-artifact@v4
        with: {name: out, path: dist/}
      - uses: actions/checkout@v4
  second:
    runs-on: ubuntu-latest
"""


def ctx(**inputs) -> dict:
    return {
        "inputs": dict(inputs),
        "github": {"run_id": "42", "event": {"inputs": dict(inputs)}},
        "runner": {"temp": "/tmp/run-42"},
        "vars": {"PACKAGE": "pkg==1"},
    }


def test_parse_reads_what_the_emulation_honours():
    spec = wf.parse(DISPATCHED)
    assert spec.name == "Dispatched" and spec.run_name == "go ${{ inputs.who }}"
    assert spec.triggers == ("push", "workflow_dispatch")
    assert list(spec.inputs) == ["who", "mode", "flag", "count", "note"]
    assert spec.inputs["who"].required and spec.inputs["mode"].options == ("fast", "slow")
    assert (spec.inputs["flag"].default, spec.inputs["count"].default, spec.inputs["note"].default) == (
        "true",
        "3",
        None,
    )
    assert spec.job_id == "build" and spec.job["timeout-minutes"] == 7
    assert spec.concurrency == "top-${{ inputs.who }}"
    assert [s["with"]["name"] for s in spec.uploads] == ["out"]


def test_parse_without_inputs_and_not_yaml():
    spec = wf.parse("on:\n  workflow_dispatch:\njobs:\n  a:\n    runs-on: x\n    concurrency: {group: g}\n")
    assert spec.triggers == ("workflow_dispatch",) and spec.inputs == {}
    assert spec.concurrency == {"group": "g"}  # the first job's when the workflow has none
    assert wf.parse("on: workflow_dispatch\n").triggers == ("workflow_dispatch",)
    assert wf.parse("- a list") is None and wf.parse("a: [unclosed") is None


def test_dispatch_inputs_like_github():
    spec = wf.parse(DISPATCHED)
    assert wf.dispatch_inputs(spec, {"who": "ada"}) == {"who": "ada", "mode": "fast", "flag": "true", "count": "3"}
    with pytest.raises(InputError, match=r"^Unexpected inputs provided: \[\"name\"\]$"):
        wf.dispatch_inputs(spec, {"who": "ada", "name": "x"})
    with pytest.raises(InputError, match=r"^Required input 'who' not provided$"):
        wf.dispatch_inputs(spec, {"mode": "slow"})
    with pytest.raises(InputError, match="not in the list of allowed values"):
        wf.dispatch_inputs(spec, {"who": "ada", "mode": "medium"})
    with pytest.raises(InputError, match="25"):
        wf.dispatch_inputs(None, {f"i{n}": "x" for n in range(26)})
    assert wf.dispatch_inputs(None, {"anything": "goes"}) == {"anything": "goes"}  # no file: bound by path only
    no_inputs = wf.parse("on:\n  workflow_dispatch:\n")
    assert wf.dispatch_inputs(no_inputs, {}) == {}
    with pytest.raises(InputError, match=r"Unexpected inputs provided: \[\"a\"\]"):
        wf.dispatch_inputs(no_inputs, {"a": "1"})


def test_typed_inputs():
    spec = wf.parse(DISPATCHED)
    typed = wf.typed_inputs(spec, {"who": "ada", "flag": "false", "count": "3"})
    assert typed == {"who": "ada", "flag": False, "count": 3}


def test_expressions():
    c = ctx(runs_on='["self-hosted", "gpu"]', minutes="5", spec='{"a": {"b": [1, 2]}}', who="ada")
    assert wf.evaluate("${{ inputs.who }}", c) == "ada"
    assert wf.evaluate("${{ github.event.inputs.who }}", c) == "ada"
    assert wf.evaluate("${{ INPUTS.Who }}", c) == "ada"  # contexts are case-insensitive
    assert wf.evaluate("${{ fromJSON(inputs.runs_on) }}", c) == ["self-hosted", "gpu"]  # keeps its type
    assert wf.evaluate(" ${{ fromJSON(inputs.minutes) }} ", c) == 5
    assert wf.evaluate("${{ fromJSON(inputs.spec).a.b }}", c) == [1, 2]
    assert wf.evaluate("${{ fromJSON(inputs.spec).a['b'][1] }}", c) == 2
    assert wf.evaluate("${{ runner.temp }}/out/", c) == "/tmp/run-42/out/"
    assert wf.evaluate("run ${{ github.run_id }} of ${{ inputs.who }}", c) == "run 42 of ada"
    assert wf.evaluate("${{ vars.PACKAGE }}|${{ vars.UNSET }}", c) == "pkg==1|"
    assert wf.evaluate("${{ 'it''s' }}", c) == "it's"
    assert wf.evaluate("n=${{ fromJSON(inputs.minutes) }} l=${{ fromJSON(inputs.runs_on) }}", c) == "n=5 l=Array"
    # what the subset does not know is an empty string
    for text in (
        "${{ inputs.nope }}",
        "${{ github.token }}",
        "${{ inputs.who == 'ada' }}",
        "${{ format('{0}', inputs.who) }}",
        "${{ secrets.X }}",
        "${{ }}",
    ):
        assert wf.evaluate(text, c) == "", text
    assert wf.evaluate({"a": ["${{ inputs.who }}", 3]}, c) == {"a": ["ada", 3]}
    with pytest.raises(ExpressionError):
        wf.evaluate("${{ fromJSON(inputs.who) }}", c)


def test_labels_timeout_concurrency_and_step_conditions():
    assert wf.labels("self-hosted") == ["self-hosted"]
    assert wf.labels(["self-hosted", "gpu"]) == ["self-hosted", "gpu"]
    assert wf.labels({"group": "g", "labels": "big"}) == ["big"]
    assert wf.labels("") == [] and wf.labels(None) == []
    assert wf.timeout_minutes(None) == 360 and wf.timeout_minutes(5) == 5 and wf.timeout_minutes("2.5") == 2.5
    with pytest.raises(ExpressionError):
        wf.timeout_minutes("soon")
    c = ctx(step="s1")
    assert wf.concurrency(None, c) == (None, False)
    assert wf.concurrency("g-${{ inputs.step }}", c) == ("g-s1", False)
    assert wf.concurrency({"group": "g-${{ inputs.step }}", "cancel-in-progress": True}, c) == ("g-s1", True)
    assert wf.concurrency({"group": "g", "cancel-in-progress": "${{ 'true' }}"}, c) == ("g", True)
    assert wf.step_runs(None, "success") and not wf.step_runs(None, "failure")
    assert wf.step_runs("always()", "failure") and wf.step_runs("${{ always() }}", "cancelled")
    assert wf.step_runs("failure()", "failure") and not wf.step_runs("failure()", "success")


def test_the_real_step_workflow_reads_as_intended():
    spec = wf.parse(STEP_WORKFLOW.read_text())
    assert "workflow_dispatch" in spec.triggers
    assert set(spec.inputs) == {"bisection", "step", "sha", "test", "spec", "runs_on", "timeout_minutes", "correlation"}
    assert all(i.required for i in spec.inputs.values())
    inputs = {
        "bisection": "b1",
        "step": "s7",
        "sha": "abc",
        "test": "kl",
        "spec": "{}",
        "runs_on": '["self-hosted", "4-gpu-h100"]',
        "timeout_minutes": "5",
        "correlation": "c-9",
    }
    c = ctx(**inputs)
    assert wf.evaluate(spec.job["runs-on"], c) == ["self-hosted", "4-gpu-h100"]
    assert wf.evaluate(spec.job["timeout-minutes"], c) == 5
    assert wf.concurrency(spec.concurrency, c) == ("revert-bisect-step-s7-c-9", False)
    assert "[c-9]" in wf.evaluate(spec.run_name, c)
    (upload,) = spec.uploads
    assert wf.evaluate(upload["with"], c)["name"] == "revert-bisect-step-s7"
    assert wf.evaluate(upload["with"], c)["path"] == "/tmp/run-42/revert-bisect/"
    assert wf.step_runs(upload.get("if"), "failure")
