"""The sandbox runs a job that `uses:` a reusable workflow of the same commit as GitHub does (GitHub docs, "Reusing
workflows"; REALITY.md: SGLang's PR Test Base calls `_pr-test-stage.yml` once per stage, and its jobs are named
`<caller job> / <called job> (<matrix>)`): the called jobs run with the call's `inputs`, the called file's `env:` and
not the caller's, the caller's `github` context; a skipped caller stays one skipped job; what needs the caller waits
for all of its jobs and reads their combined result; a re-run of failed jobs re-runs a failed called job, the called
jobs that need it, and the caller's dependents."""

from __future__ import annotations

import pytest

from tests.support.workflows import make_repo, run_of, texts, texts_of

CALLER = """\
name: PR Test Base
on: workflow_dispatch
env:
  CALLER_ONLY: from-the-caller
jobs:
  check:
    runs-on: [self-hosted]
    steps:
      - run: echo check
  stage-a:
    needs: check
    uses: ./.github/workflows/_stage.yml
    with:
      self_name: stage-a
      partitions: '[0, 1]'
      strict: ${{ needs.check.result == 'success' }}
  stage-b:
    needs: [check]
    if: ${{ false }}
    uses: ./.github/workflows/_stage.yml
    with:
      self_name: stage-b
      partitions: '[0]'
  finish:
    needs: [stage-a, stage-b]
    if: always()
    runs-on: [self-hosted]
    steps:
      - run: echo "stage-a was ${{ needs.stage-a.result }}, stage-b was ${{ needs.stage-b.result }}"
"""

STAGE = """\
name: PR Test Stage
on:
  workflow_call:
    inputs:
      self_name:
        type: string
        required: true
      partitions:
        type: string
        required: true
      strict:
        type: boolean
        default: false
      timeout:
        type: number
        default: 7
env:
  STAGE: ${{ inputs.self_name }}
jobs:
  run:
    name: ${{ inputs.self_name }} (${{ matrix.partition }})
    strategy:
      fail-fast: false
      matrix:
        partition: ${{ fromJson(inputs.partitions) }}
    runs-on: [self-hosted]
    timeout-minutes: ${{ inputs.timeout }}
    steps:
      - run: echo "job=$GITHUB_JOB stage=$STAGE caller=${CALLER_ONLY:-unset} workflow=$GITHUB_WORKFLOW"
      - run: echo "strict=${{ inputs.strict }} timeout=${{ inputs.timeout }} event=${{ github.event_name }}"
      - run: test "${{ matrix.partition }}" = 0 || test "$GITHUB_RUN_ATTEMPT" = 2
  report:
    needs: run
    if: always()
    runs-on: [self-hosted]
    steps:
      - run: echo "run was ${{ needs.run.result }}"
"""


def test_a_called_workflows_jobs_are_named_after_the_caller_and_run_with_its_inputs(state, tmp_path):
    make_repo(
        state, tmp_path, "o/calls", {".github/workflows/pr-test.yml": CALLER, ".github/workflows/_stage.yml": STAGE}
    )
    reads, read = [], state.actions._read_called
    state.actions._read_called = lambda repo, run, path: reads.append(path) or read(repo, run, path)
    run = run_of(state, "o/calls", "pr-test.yml", {})
    assert reads == [".github/workflows/_stage.yml"]  # two calls of one file: read once, when the run was planned
    jobs = {j.name: j for j in run.latest_jobs()}
    assert list(jobs) == [
        "check",
        "stage-a / stage-a (0)",
        "stage-a / stage-a (1)",
        "stage-a / report",
        "stage-b",
        "finish",
    ]
    assert {n: j.conclusion for n, j in jobs.items()} == {
        "check": "success",
        "stage-a / stage-a (0)": "success",
        "stage-a / stage-a (1)": "failure",  # fails on the first attempt
        "stage-a / report": "success",  # if: always()
        "stage-b": "skipped",  # a skipped caller is one job: its workflow is never called
        "finish": "success",
    }
    assert run.conclusion == "failure"
    first = texts_of(jobs["stage-a / stage-a (0)"])
    # github.job and GITHUB_JOB are the called job's id; the called file's env, not the caller's; the caller's
    # `github` context (the workflow's name, the event)
    assert "job=run stage=stage-a caller=unset workflow=PR Test Base" in first
    assert "strict=true timeout=7 event=workflow_dispatch" in first  # typed inputs: a default, a boolean from needs
    assert jobs["stage-a / stage-a (0)"].timeout_text == "7 minutes"  # the called job's timeout, from its inputs
    assert "run was failure" in texts_of(jobs["stage-a / report"])  # needs inside the called workflow
    assert "stage-a was failure, stage-b was skipped" in texts_of(jobs["finish"])  # all of a caller's jobs
    skipped = jobs["stage-b"]
    assert (skipped.runner_name, skipped.step_records) == (None, [])
    texts(run)  # every line of the run's log carries GitHub's timestamp

    before = {n: j.id for n, j in jobs.items()}
    state.actions.rerun(run, failed_only=True, actor="o")
    state.actions.wait(run.id, 120)
    again = {j.name: j for j in run.latest_jobs()}
    assert {n for n, j in again.items() if j.attempt == 2} == {"stage-a / stage-a (1)", "stage-a / report", "finish"}
    assert {n: again[n].id for n in ("check", "stage-a / stage-a (0)", "stage-b")} == {
        n: before[n] for n in ("check", "stage-a / stage-a (0)", "stage-b")
    }
    assert run.conclusion == "success"
    assert "stage-a was success, stage-b was skipped" in texts_of(again["finish"])
    assert "job=run stage=stage-a caller=unset workflow=PR Test Base" in texts_of(again["stage-a / stage-a (1)"])


@pytest.mark.parametrize(
    ("caller_with", "stage", "why"),
    [
        ("      self_name: x\n      partitions: '[0]'\n      extra: 1\n", STAGE, "Invalid input, extra is not defined"),
        (
            "      self_name: x\n      partitions: '[0]'\n",
            STAGE.replace("workflow_call:", "workflow_dispatch:"),
            "is not a reusable workflow",
        ),
        ("      self_name: x\n      partitions: '[0]'\n", None, "is not a reusable workflow"),  # no such file
    ],
    ids=["an-undeclared-input", "not-callable", "missing"],
)
def test_a_call_github_would_not_accept_fails_the_run_before_any_job(state, tmp_path, caller_with, stage, why):
    caller = f"""\
name: Calls
on: workflow_dispatch
jobs:
  stage:
    uses: ./.github/workflows/_stage.yml
    with:
{caller_with}"""
    files = {".github/workflows/calls.yml": caller} | ({".github/workflows/_stage.yml": stage} if stage else {})
    make_repo(state, tmp_path, "o/bad-call", files)
    run = run_of(state, "o/bad-call", "calls.yml", {})
    assert (run.conclusion, run.latest_jobs()) == ("failure", [])
    assert any(why in line for line in run.log), run.log


def test_inputs_of_the_wrong_type_or_missing_fail_the_caller_job(state, tmp_path):
    caller = """\
name: Calls
on: workflow_dispatch
jobs:
  typed:
    uses: ./.github/workflows/_stage.yml
    with:
      self_name: x
      partitions: '[0]'
      strict: not-a-boolean
  untyped:
    uses: ./.github/workflows/_stage.yml
    with:
      self_name: x
"""
    make_repo(
        state, tmp_path, "o/typed", {".github/workflows/calls.yml": caller, ".github/workflows/_stage.yml": STAGE}
    )
    run = run_of(state, "o/typed", "calls.yml", {})
    jobs = {j.name: j for j in run.latest_jobs()}
    assert {n: j.conclusion for n, j in jobs.items()} == {"typed": "failure", "untyped": "failure"}
    assert any("expected type: Boolean" in line for line in texts_of(jobs["typed"]))
    assert any(
        "Input partitions is required, but not provided while calling." in line for line in texts_of(jobs["untyped"])
    )


def test_what_the_sandbox_does_not_emulate_is_refused_not_guessed(state, tmp_path):
    """Another repository's reusable workflow, a called workflow that calls another, and one that declares outputs
    (not emulated: they would read as empty): refused loudly."""
    caller = """\
name: Calls
on: workflow_dispatch
jobs:
  remote:
    uses: octo/shared/.github/workflows/stage.yml@v1
"""
    make_repo(state, tmp_path, "o/remote", {".github/workflows/calls.yml": caller})
    run = run_of(state, "o/remote", "calls.yml", {})
    assert (run.conclusion, run.latest_jobs()) == ("failure", [])
    assert any("the sandbox does not evaluate a reusable workflow other than" in line for line in run.log), run.log

    nested = STAGE.replace(
        "  report:\n    needs: run\n", "  report:\n    needs: run\n    uses: ./.github/workflows/_more.yml\n"
    )
    caller = CALLER.replace("name: PR Test Base", "name: Nested")
    make_repo(state, tmp_path, "o/nested", {".github/workflows/n.yml": caller, ".github/workflows/_stage.yml": nested})
    run = run_of(state, "o/nested", "n.yml", {})
    assert (run.conclusion, run.latest_jobs()) == ("failure", [])
    assert any("a reusable workflow that calls another" in line for line in run.log), run.log

    with_outputs = STAGE.replace(
        "env:\n", "    outputs:\n      first:\n        value: ${{ jobs.run.outputs.x }}\nenv:\n", 1
    )
    make_repo(
        state, tmp_path, "o/outputs", {".github/workflows/o.yml": caller, ".github/workflows/_stage.yml": with_outputs}
    )
    run = run_of(state, "o/outputs", "o.yml", {})
    assert (run.conclusion, run.latest_jobs()) == ("failure", [])
    assert any("the outputs of a reusable workflow" in line for line in run.log), run.log


SGLANG_SHAPED = """\
name: PR Test Base
on: workflow_dispatch
jobs:
  check-changes:
    runs-on: [self-hosted]
    outputs:
      partitions: ${{ steps.plan.outputs.partitions }}
      leak: ${{ secrets.DEPLOY_TOKEN }}
    steps:
      - id: plan
        run: |
          echo 'partitions={"stage-a": {"arr": [0, 1, 2], "max_parallel": 3}}' >> "$GITHUB_OUTPUT"
  stage-a:
    needs: [check-changes]
    uses: ./.github/workflows/_pr-test-stage.yml
    with:
      self_name: stage-a
      partitions: ${{ needs.check-changes.outputs.partitions }}
  report:
    needs: [check-changes, stage-a]
    runs-on: [self-hosted]
    steps:
      - run: echo "leak=[${{ needs.check-changes.outputs.leak }}] stage-a=${{ needs.stage-a.result }}"
"""

SGLANG_STAGE = """\
name: PR Test Stage
on:
  workflow_call:
    inputs:
      self_name:
        type: string
        required: true
      partitions:
        type: string
        required: true
jobs:
  run:
    name: ${{ inputs.self_name }} (${{ matrix.partition }})
    strategy:
      fail-fast: false
      max-parallel: ${{ fromJson(inputs.partitions)[inputs.self_name].max_parallel }}
      matrix:
        partition: ${{ fromJson(inputs.partitions)[inputs.self_name].arr }}
    runs-on: [self-hosted]
    steps:
      - run: echo "partition ${{ matrix.partition }} of ${{ strategy.job-total }}"
"""


def test_sglangs_partitions_flow_from_a_jobs_outputs_through_the_call_into_the_matrix(state, tmp_path):
    """SGLang's pattern (pr-test.yml, _pr-test-stage.yml): check-changes writes the partitions as a job output
    (`GITHUB_OUTPUT`, `jobs.<id>.outputs`), each stage passes it on in `with:`, and the called job's matrix is
    `fromJson(inputs.partitions)[inputs.self_name].arr`. An output holding a secret is not passed on (GitHub docs,
    "Passing information between jobs")."""
    state.actions.secrets = {"DEPLOY_TOKEN": "s3cr3t-value"}
    files = {".github/workflows/pr-test.yml": SGLANG_SHAPED, ".github/workflows/_pr-test-stage.yml": SGLANG_STAGE}
    make_repo(state, tmp_path, "o/sglang-shaped", files)
    run = run_of(state, "o/sglang-shaped", "pr-test.yml", {})
    jobs = {j.name: j for j in run.latest_jobs()}
    assert list(jobs) == [
        "check-changes",
        "stage-a / stage-a (0)",
        "stage-a / stage-a (1)",
        "stage-a / stage-a (2)",
        "report",
    ]
    assert run.conclusion == "success", texts(run)
    assert "partition 2 of 3" in texts_of(jobs["stage-a / stage-a (2)"])
    assert "leak=[] stage-a=success" in texts_of(jobs["report"])
    assert "##[warning]Skip output leak since it may contain secret." in texts_of(jobs["check-changes"])
