"""The sandbox's workflow-file reader and `${{ }}` expression subset (sandbox/workflow.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sandbox.actions import workflow as wf
from sandbox.actions.workflow import ExpressionError, InputError, Unsupported

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
    # a missing property is null, read as '' (GitHub's behaviour, not a refusal)
    assert wf.evaluate("${{ inputs.nope }}", c) is None and wf.evaluate("x${{ inputs.nope }}", c) == "x"
    assert wf.evaluate("${{ secrets.X }}", {**c, "secrets": {}}) is None  # an unset secret
    # what the sandbox does not evaluate is refused, naming it -- never read as an empty string
    for text, named in (
        ("${{ hashFiles('**/x.lock') }}", "hashFiles()"),
        ("${{ matrix.gpu }}", "matrix"),  # a job's context, and `c` is no job's
        ("${{ needs.build.outputs.x }}", "needs"),
        ("${{ jobs.build.result }}", "jobs"),
        ("${{ github.event.commits.*.id }}", "filter"),
        ("${{ }}", "empty expression"),
        ("${{ inputs.who = 'x' }}", "="),
        ("${{ format('{0}' }}", "expected ')'"),
    ):
        with pytest.raises(Unsupported, match=re.escape(named)):
            wf.evaluate(text, c)
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


def test_expressions_as_github_evaluates_them():
    """Operators, literals and functions as GitHub's expression reference defines them."""
    c = {
        **ctx(who="ada", n="3", labels='["self-hosted","gpu"]'),
        "github": {"token": "ghs_job1", "event_name": "workflow_dispatch", "ref": "refs/heads/main"},
        "secrets": {"GITHUB_TOKEN": "ghs_job1", "DEPLOY": "s3cret"},
        "env": {"MODE": "fast"},
        "steps": {"build": {"outcome": "success", "outputs": {"path": "dist/"}}},
        "job": {"status": "success"},
    }

    def ev(text):
        return wf.evaluate("${{ " + text + " }}", c)

    assert ev("github.token") == "ghs_job1" and ev("secrets.GITHUB_TOKEN") == "ghs_job1"
    assert ev("secrets.DEPLOY") == "s3cret" and ev("env.MODE") == "fast" and ev("steps.build.outputs.path") == "dist/"
    # == and != : strings case-insensitively, other types as numbers, objects by identity
    assert ev("inputs.who == 'ADA'") is True and ev("inputs.who != 'ada'") is False
    assert ev("inputs.n == 3") is True and ev("'' == 0") is True and ev("null == 0") is True and ev("true == 1")
    assert ev("'abc' == 0") is False and ev("fromJSON(inputs.labels) == fromJSON(inputs.labels)") is False
    assert ev("inputs.n > 2") is True and ev("inputs.n <= 2") is False
    # && and || give an operand, not a boolean; ! a boolean
    assert ev("inputs.who && 'yes'") == "yes" and ev("inputs.nope && 'yes'") is None
    assert ev("inputs.nope || 'fallback'") == "fallback" and ev("0 || ''") == ""
    assert ev("!inputs.nope") is True and ev("!(inputs.who == 'ada')") is False and ev("!0") is True
    assert ev("github.event_name == 'workflow_dispatch' && 'dispatched' || 'other'") == "dispatched"
    assert ev("0x10") == 16 and ev("1.5e1") == 15 and ev("-2") == -2 and ev("NULL") is None
    # functions
    assert ev("format('{0}-{1} {{literal}}', inputs.who, 7)") == "ada-7 {literal}"
    with pytest.raises(ExpressionError, match="format string is invalid"):
        ev("format('{1}', 'only one')")
    assert ev("contains(fromJSON(inputs.labels), 'GPU')") is True and ev("contains('Hello', 'ell')") is True
    assert ev("contains(fromJSON(inputs.labels), 'cpu')") is False
    assert ev("startsWith(github.ref, 'REFS/heads/')") is True and ev("endsWith(github.ref, '/main')") is True
    assert ev("join(fromJSON(inputs.labels), ', ')") == "self-hosted, gpu"
    assert ev("toJSON(fromJSON(inputs.labels))") == '[\n  "self-hosted",\n  "gpu"\n]'
    assert ev("fromJSON('{\"a\": [1, 2]}').a[1]") == 2 and ev("fromJSON(inputs.n)") == 3
    # status functions read the job's status
    assert ev("success()") is True and ev("failure()") is False and ev("always()") and not ev("cancelled()")
    failed = {**c, "job": {"status": "failure"}}
    assert wf.expression("failure() && steps.build.outcome == 'success'", failed) is True


def test_step_conditions_wrap_success_unless_they_name_a_status_function():
    ok, failed, cancelled = ({**ctx(who="ada"), "job": {"status": s}} for s in ("success", "failure", "cancelled"))
    assert wf.condition(None, ok) and not wf.condition(None, failed)
    assert wf.condition("inputs.who == 'ada'", ok) and not wf.condition("inputs.who == 'ada'", failed)
    assert wf.condition("${{ inputs.who == 'ada' }}", ok) and not wf.condition("inputs.who == 'bob'", ok)
    assert wf.condition("always()", failed) and wf.condition("${{ always() }}", cancelled)
    assert wf.condition("failure() || cancelled()", cancelled) and not wf.condition("failure()", ok)
    assert wf.condition("!cancelled()", failed) and not wf.condition("success()", cancelled)
    with pytest.raises(Unsupported, match="hashFiles"):
        wf.condition("hashFiles('x') != ''", ok)


def _entries(matrix_yaml: str) -> list[dict]:
    return wf.matrix_entries({"strategy": {"matrix": yaml.safe_load(matrix_yaml)}}, {})


def test_matrix_include_extends_what_it_does_not_overwrite_else_adds_a_combination():
    """GitHub docs' own example ("Running variations of jobs in a workflow", expanding or adding matrix
    configurations), with the result the docs give."""
    entries = _entries(
        """\
fruit: [apple, pear]
animal: [cat, dog]
include:
  - color: green
  - color: pink
    animal: cat
  - fruit: apple
    shape: circle
  - fruit: banana
  - fruit: banana
    animal: cat
"""
    )
    assert entries == [
        {"fruit": "apple", "animal": "cat", "color": "pink", "shape": "circle"},
        {"fruit": "apple", "animal": "dog", "color": "green", "shape": "circle"},
        {"fruit": "pear", "animal": "cat", "color": "pink"},
        {"fruit": "pear", "animal": "dog", "color": "green"},
        {"fruit": "banana"},
        {"fruit": "banana", "animal": "cat"},
    ]
    # an include that fits one original combination extends only it; one that fits none adds a combination
    assert _entries("os: [windows, ubuntu]\nnode: [14, 16]\ninclude:\n  - {os: windows, node: 16, npm: 6}\n") == [
        {"os": "windows", "node": 14},
        {"os": "windows", "node": 16, "npm": 6},
        {"os": "ubuntu", "node": 14},
        {"os": "ubuntu", "node": 16},
    ]
    assert len(_entries("os: [w, u, m]\nversion: [12, 14, 16]\ninclude:\n  - {os: w, version: 17}\n")) == 10
    # without vectors, every include entry is a combination of its own
    assert _entries("include:\n  - {part: 0}\n  - {part: 1, gpu: h100}\n") == [{"part": 0}, {"part": 1, "gpu": "h100"}]


def test_matrix_exclude_drops_partial_matches_before_include_adds_back():
    """GitHub docs: "An excluded configuration only has to be a partial match for it to be excluded" (nine of
    twelve jobs in their example); "All include combinations are processed after exclude"."""
    entries = _entries(
        """\
os: [macos-latest, windows-latest]
version: [12, 14, 16]
environment: [staging, production]
exclude:
  - os: macos-latest
    version: 12
    environment: production
  - os: windows-latest
    version: 16
"""
    )
    assert len(entries) == 9
    assert {"os": "macos-latest", "version": 12, "environment": "production"} not in entries
    assert not any(e["os"] == "windows-latest" and e["version"] == 16 for e in entries)
    back = _entries("a: [1, 2]\nexclude:\n  - {a: 2}\ninclude:\n  - {a: 2, b: x}\n")
    assert back == [{"a": 1}, {"a": 2, "b": "x"}]


def test_a_matrix_github_would_refuse_is_refused():
    with pytest.raises(ExpressionError, match="256"):
        _entries("a: " + str(list(range(17))) + "\nb: " + str(list(range(16))) + "\n")  # 272 jobs
    with pytest.raises(ExpressionError, match="no combination left after exclude"):
        _entries("a: [1]\nexclude:\n  - {a: 1}\n")
    with pytest.raises(ExpressionError, match="at least one vector"):
        _entries("include: []\n")
    with pytest.raises(ExpressionError, match="list of mappings"):
        _entries("a: [1]\ninclude: [1, 2]\n")
    with pytest.raises(Unsupported, match="from an expression"):
        wf.matrix_entries({"strategy": {"matrix": "${{ fromJSON(needs.plan.outputs.matrix) }}"}}, {})
