"""The sandbox's runner runs a workflow file's own steps as GitHub's runner does (sandbox/actions/steps.py):
`run:` through bash -e with the step's env and working-directory, actions/checkout and
actions/upload-artifact emulated, expressions evaluated as GitHub does or refused loudly, and the job log
written in GitHub's format. The real step workflow (runners/github/revert-bisect-step.yml) runs as a
repository installs it: its install step, its STEP_SPEC mapping and its --out path."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path

from bot.service.backends import step_inputs
from runners.envs import EnvSpec
from runners.spec import StepSpec
from runners.step import RUNNER_PYTHON, Request
from sandbox import gitstore
from sandbox.actions.render import render_job
from sandbox.render import Renderer
from sandbox.server import run_in_thread
from sandbox.state import step_runner_machine
from tests.support.workflows import make_repo, run_of, texts, texts_of

STEP_WORKFLOW = Path(__file__).resolve().parents[2] / "runners" / "github" / "revert-bisect-step.yml"

STEPS_YML = """\
name: Steps
on:
  workflow_dispatch:
    inputs:
      who: {required: true, type: string}
env:
  TOP: top-${{ inputs.who }}
jobs:
  build:
    runs-on: [self-hosted]
    env:
      JOB_LEVEL: ${{ env.TOP }}/job
    steps:
      - uses: actions/checkout@v4
      - id: first
        name: First step
        env:
          MAPPED: ${{ github.token }}
          SAME: ${{ inputs.who == 'ADA' && 'same' || 'different' }}
          LABEL: ${{ format('{0}-{1}', github.event_name, inputs.who) }}
        run: |
          echo "env $TOP $JOB_LEVEL $SAME $LABEL"
          echo "input=${INPUT_WHO:-unset} token=${GITHUB_TOKEN:-unset} mapped=$MAPPED"
          echo "workspace has $(cat data/value.txt)"
          echo "answer=42" >> "$GITHUB_OUTPUT"
          echo "FROM_ENV_FILE=carried" >> "$GITHUB_ENV"
          mkdir -p out && echo "${{ inputs.who }}" > out/who.txt
      - name: In a directory
        working-directory: data
        run: echo "pwd=$(basename "$PWD") ${{ steps.first.outputs.answer }} ${{ steps.first.outcome }} $FROM_ENV_FILE"
      - name: Python shell
        shell: python
        run: |
          import os
          print("python says", os.environ["TOP"])
      - name: Fails half way
        run: |
          echo before
          false
          echo never printed
      - name: Skipped after a failure
        run: echo skipped
      - name: Only on failure
        if: failure()
        run: echo "the job failed; ${{ toJSON(job.status) }}"
      - name: Upload
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: out-${{ inputs.who }}
          path: out/
          if-no-files-found: error
"""


def test_a_workflows_own_steps_run_as_githubs_runner_runs_them(state, tmp_path):
    make_repo(state, tmp_path, "o/steps", {".github/workflows/steps.yml": STEPS_YML, "data/value.txt": "v1\n"})
    run = run_of(state, "o/steps", "steps.yml", {"who": "ada"})
    lines = texts(run)
    text = "\n".join(lines)
    assert run.conclusion == "failure", text
    # the run: step's header as the runner writes it: its first line, its script, its shell, its env
    at = lines.index('##[group]Run echo "env $TOP $JOB_LEVEL $SAME $LABEL"')
    assert lines[at + 1 : at + 8] == [
        'echo "env $TOP $JOB_LEVEL $SAME $LABEL"',
        'echo "input=${INPUT_WHO:-unset} token=${GITHUB_TOKEN:-unset} mapped=$MAPPED"',
        'echo "workspace has $(cat data/value.txt)"',
        'echo "answer=42" >> "$GITHUB_OUTPUT"',
        'echo "FROM_ENV_FILE=carried" >> "$GITHUB_ENV"',
        'mkdir -p out && echo "ada" > out/who.txt',
        lines[at + 7],
    ]
    assert re.fullmatch(r"shell: \S*bash -e \{0\}", lines[at + 7])
    assert lines[at + 8 : at + 15] == [
        "env:",
        "  TOP: top-ada",
        "  JOB_LEVEL: top-ada/job",
        "  MAPPED: ***",  # the job's token, masked as GitHub masks it
        "  SAME: same",  # strings compare case-insensitively
        "  LABEL: workflow_dispatch-ada",
        "##[endgroup]",
    ]
    # its output follows the group; GitHub sets no INPUT_* and no GITHUB_TOKEN for a run: step
    assert lines[at + 15 : at + 18] == [
        "env top-ada top-ada/job same workflow_dispatch-ada",
        "input=unset token=unset mapped=***",
        "workspace has v1",  # actions/checkout put the commit in the workspace
    ]
    assert run.jobs[0].token not in text
    # working-directory, the steps context (outputs, outcome), GITHUB_ENV carried to later steps
    assert "pwd=data 42 success carried" in lines
    assert "python says top-ada" in lines
    # bash -e stops the script at `false`; the failure as the runner writes it; later steps skipped
    assert "before" in lines and "never printed" not in lines
    assert "##[error]Process completed with exit code 1." in lines
    assert "skipped" not in lines
    # if: failure(); toJSON quotes a string, and the script is written with the value in it
    assert 'echo "the job failed; "failure""' in lines and "the job failed; failure" in lines
    # upload-artifact (if: always()) zips the workspace path
    (artifact,) = run.artifacts
    assert artifact.name == "out-ada"
    assert zipfile.ZipFile(io.BytesIO(artifact.data)).read("who.txt") == b"ada\n"
    # the job's steps in the REST API: each step of the file, a skipped one concluding `skipped`
    wf = state.actions.workflow_of(run)
    job = render_job(Renderer(state, "http://sandbox.invalid"), wf, state.repo("o/steps"), run, run.jobs[0])
    assert [(s["name"], s["conclusion"]) for s in job["steps"]] == [
        ("Set up job", "success"),
        ("Run actions/checkout@v4", "success"),
        ("First step", "success"),
        ("In a directory", "success"),
        ("Python shell", "success"),
        ("Fails half way", "failure"),
        ("Skipped after a failure", "skipped"),
        ("Only on failure", "success"),
        ("Upload", "success"),
        ("Complete job", "success"),
    ]
    assert [s["number"] for s in job["steps"]] == list(range(1, 11))


REFUSED = """\
name: Refused
on: workflow_dispatch
jobs:
  one:
    runs-on: [self-hosted]
    steps:
      - run: echo "first ran"
      - env:
          KEY: ${{ hashFiles('**/requirements.txt') }}
        run: echo "never ran with an empty key"
      - if: always()
        uses: actions/setup-python@v5
      - if: always()
        run: echo "still ran"
        continue-on-error: true
        timeout-minutes: 1
        retries: 3
"""


def test_what_the_sandbox_does_not_evaluate_fails_the_run_naming_it(state, tmp_path):
    titled = "name: T\nrun-name: go ${{ matrix.gpu }}\non: workflow_dispatch\njobs:\n  a:\n    runs-on: [self-hosted]\n"
    titled += "    steps:\n      - run: echo hi\n"
    make_repo(
        state, tmp_path, "o/refused", {".github/workflows/refused.yml": REFUSED, ".github/workflows/t.yml": titled}
    )
    run = run_of(state, "o/refused", "refused.yml", {})
    lines = texts(run)
    assert run.conclusion == "failure"
    assert "first ran" in lines and "never ran with an empty key" not in "\n".join(lines)
    assert any(
        line.startswith("##[error]The sandbox does not evaluate the function `hashFiles()`") for line in lines
    ), lines
    assert any(
        line.startswith("##[error]The sandbox's runner does not run the action 'actions/setup-python@v5'")
        for line in lines
    )
    assert "##[error]The sandbox's runner does not emulate the step key(s) retries" in lines
    # an expression the run is planned with (run-name) fails the run before it queues
    titled_run = run_of(state, "o/refused", "t.yml", {})
    assert titled_run.conclusion == "failure"
    (error,) = [line for line in texts(titled_run) if line.startswith("##[error]")]
    assert "The workflow is not valid. .github/workflows/t.yml: the sandbox does not evaluate the context `matrix`" in (
        error
    )


TEST = (
    "import os, pathlib, sys; v = pathlib.Path('bug.txt').read_text().strip(); "
    "print('input_spec=' + str(os.environ.get('INPUT_SPEC'))); "
    "print('metric=' + ('0.9' if v == 'bad' else '0.1')); sys.exit(v == 'bad')"
)


def test_the_real_step_workflow_runs_its_install_step_spec_mapping_and_out_path(state, tmp_path):
    """runners/github/revert-bisect-step.yml as a repository installs it, dispatched with the inputs the bot
    sends (bot.service.backends.step_inputs), on the runner machine its header asks for."""
    workflow = {
        ".github/workflows/revert-bisect-step.yml": STEP_WORKFLOW.read_text(),
        "bug.txt": "bad\n",
        "pyproject.toml": '[project]\nname = "widget"\nversion = "1"\ndependencies = ["packaging"]\n',
    }
    make_repo(state, tmp_path, "o/widget", workflow)
    step_runner_machine(state)
    sha = gitstore.resolve(state.repo("o/widget").path, "refs/heads/main")
    base, stop = run_in_thread(state)
    try:
        # a commit's own environment (runners.envs: uv on the machine, the machine's libraries under it)
        spec = StepSpec(7, sha, (RUNNER_PYTHON, "-c", TEST), 60, r"metric=(?P<value>[0-9.]+)", env_spec=EnvSpec())
        request = Request(f"{base}/o/widget.git", spec, 1, "t", "m", 0.5)
        run = run_of(state, "o/widget", "revert-bisect-step.yml", step_inputs(request, ["self-hosted"], 5, "c-1"), 300)
    finally:
        stop()
    lines = texts(run)
    text = "\n".join(lines)
    assert run.conclusion == "success", text
    install = lines.index('##[group]Run requirement="${PACKAGE:-revert-bisect}"')
    end = lines.index("##[endgroup]", install)
    assert lines[end - 2 : end] == ["env:", "  PACKAGE: "]  # vars.REVERT_BISECT_PACKAGE, unset: the default
    step = lines.index('##[group]Run REVERT_BISECT_PYTHON="$(command -v python3)"')
    end = lines.index("##[endgroup]", step)
    runner_python = '"$REVERT_BISECT_RUNNER_VENV/bin/python"'
    command = f'{runner_python} -m runners.step --spec-env STEP_SPEC --out "$RUNNER_TEMP/revert-bisect"'
    assert command in lines[step:end]
    env = lines[lines.index("env:", step) + 1 : end]
    assert any(line.startswith('  STEP_SPEC: {"schema":1,') for line in env) and "  GITHUB_TOKEN: ***" in env, env
    # the install step made the runner package's venv (keyed by the requirement) and passed it on in GITHUB_ENV
    venvs = state.root / "_runner-machine" / "revert-bisect" / "runner-venvs"
    (venv,) = [p for p in venvs.iterdir() if p.is_dir()]
    assert venv.name == hashlib.sha256(b"revert-bisect").hexdigest()[:16]
    assert f"  REVERT_BISECT_RUNNER_VENV: {venv}" in env
    assert (venv / ".revert-bisect-ready").read_text() == "revert-bisect\n"
    assert list(venv.rglob("site-packages/runners/step.py")) and list(venv.rglob("site-packages/packaging/version.py"))
    assert any(line.startswith("step 7 at ") and "**bad**" in line for line in lines), text
    (artifact,) = run.artifacts
    assert artifact.name == "revert-bisect-step-7"
    files = zipfile.ZipFile(io.BytesIO(artifact.data))
    result = json.loads(files.read("result.json"))
    assert (result["verdict"], result["exit_code"], result["metric"]["value"]) == ("bad", 1, 0.9)
    assert result["env_key"], result  # the commit's environment was built with the machine's uv
    # layered on the machine's python3 (REVERT_BISECT_PYTHON), not on the runner package's venv
    machine_python = state.root / "_runner-machine" / "python" / "bin" / "python3"
    assert f"requirements) on {machine_python}\n" in result["log_tail"], result["log_tail"]
    assert "input_spec=None" in result["log_tail"]  # no INPUT_* reaches the step's test


def _step_runs(state, tmp_path):
    """A repository holding the real step workflow on the runner machine; a function that runs one step of it."""
    make_repo(state, tmp_path, "o/plain", {".github/workflows/revert-bisect-step.yml": STEP_WORKFLOW.read_text()})
    step_runner_machine(state)
    sha = gitstore.resolve(state.repo("o/plain").path, "refs/heads/main")
    base, stop = run_in_thread(state)
    counter = iter(range(1, 100))

    def step():
        n = next(counter)
        spec = StepSpec(n, sha, (RUNNER_PYTHON, "-c", "print('ran')"), 60)
        request = Request(f"{base}/o/plain.git", spec, 1, "t", "m", 0.5)
        return run_of(
            state, "o/plain", "revert-bisect-step.yml", step_inputs(request, ["self-hosted"], 5, f"c-{n}"), 300
        )

    return step, stop


def test_the_step_workflow_builds_the_runner_venv_once_per_requirement_and_rebuilds_a_half_built_one(state, tmp_path):
    step, stop = _step_runs(state, tmp_path)
    venvs = state.root / "_runner-machine" / "revert-bisect" / "runner-venvs"
    try:
        first = step()
        assert first.conclusion == "success", "\n".join(texts(first))
        (venv,) = [p for p in venvs.iterdir() if p.is_dir()]
        ready = venv / ".revert-bisect-ready"
        built = ready.stat().st_mtime_ns
        (venv / "left-by-the-first-build").touch()
        second = step()  # the same requirement: the same venv, not built again
        assert second.conclusion == "success", "\n".join(texts(second))
        assert [p for p in venvs.iterdir() if p.is_dir()] == [venv]
        assert (venv / "left-by-the-first-build").exists() and ready.stat().st_mtime_ns == built
        ready.unlink()  # as a step killed mid-install leaves it: never used, built again
        third = step()
        assert third.conclusion == "success", "\n".join(texts(third))
        assert ready.exists() and not (venv / "left-by-the-first-build").exists()
        state.actions.variables["REVERT_BISECT_PACKAGE"] = "revert-bisect==0.1.0"  # another requirement, its own
        other = step()
        assert other.conclusion == "success", "\n".join(texts(other))
        assert "  PACKAGE: revert-bisect==0.1.0" in texts(other)
        assert sorted(p.name for p in venvs.iterdir() if p.is_dir()) == sorted(
            hashlib.sha256(r.encode()).hexdigest()[:16] for r in ("revert-bisect", "revert-bisect==0.1.0")
        )
    finally:
        stop()
    # nothing went to a user site or the machine's python3: the runner package is only in its venvs (and uv's cache)
    machine = state.root / "_runner-machine"
    assert not list((machine / "python").rglob("runners/step.py"))
    kept = (venvs, machine / "uv-cache")
    assert not [p for p in machine.rglob("runners/step.py") if not any(d in p.parents for d in kept)]


def test_the_step_workflow_without_uv_on_the_runner_says_to_install_it(state, tmp_path):
    step, stop = _step_runs(state, tmp_path)
    machine = state.root / "_runner-machine"
    state.actions.runner_env["PATH"] = os.pathsep.join([str(machine / "python" / "bin"), "/usr/bin", "/bin"])
    try:
        run = step()
    finally:
        stop()
    lines = texts(run)
    assert run.conclusion == "failure", lines
    (said,) = [line for line in lines if "uv is not installed on this runner" in line and "echo" not in line]
    assert said.startswith("::error::") and "pip install uv" in said and "standalone installer" in said
    assert "##[error]Process completed with exit code 1." in lines
    assert not (machine / "revert-bisect" / "runner-venvs").exists() or not any(
        (machine / "revert-bisect" / "runner-venvs").iterdir()
    )


TIMED = """\
name: Timed
on: workflow_dispatch
jobs:
  slow:
    runs-on: [self-hosted]
    timeout-minutes: 1
    steps:
      - run: echo start && sleep 60
      - run: echo "not after a timeout"
      - if: always()
        run: echo "cleanup ran"
"""


def test_a_job_over_its_timeout_minutes_is_stopped_and_its_always_steps_still_run(state, tmp_path):
    make_repo(state, tmp_path, "o/timed", {".github/workflows/timed.yml": TIMED})
    state.actions.minute_s = 1.0  # one `timeout-minutes` minute lasts a second here
    run = run_of(state, "o/timed", "timed.yml", {}, timeout=60)
    lines = texts(run)
    assert run.conclusion == "timed_out", lines
    assert "start" in lines and "not after a timeout" not in lines and "cleanup ran" in lines
    assert (
        "##[error]The job running on runner sandbox-self-hosted has exceeded the maximum execution time of 1 minutes."
        in lines
    )


NEEDS_YML = """\
name: Needs
on: workflow_dispatch
jobs:
  build:
    strategy:
      matrix:
        part: [0, 1, 2]
    runs-on: [self-hosted]
    steps:
      - run: test "${{ matrix.part }}" = 0 || test "$GITHUB_RUN_ATTEMPT" = 2
  report:
    needs: build
    runs-on: [self-hosted]
    steps:
      - run: echo report
  always:
    needs: [build]
    if: always()
    runs-on: [self-hosted]
    steps:
      - run: echo "build was ${{ needs.build.result }}"
  lint:
    runs-on: [self-hosted]
    steps:
      - run: echo lint
"""


def test_jobs_run_after_what_they_need_and_a_rerun_of_failed_jobs_takes_their_dependents(state, tmp_path):
    """A matrix job with a failing entry: the entry after it is cancelled (`fail-fast` defaults to true), the job
    that needs it is skipped (default success()), the one with `if: always()` runs and reads `needs.build.result`
    as failure; re-running the failed jobs re-runs the failed and cancelled entries and both dependents, and keeps
    the rest (GitHub docs, "Re-running workflows and jobs", "jobs.<job_id>.strategy.fail-fast")."""
    make_repo(state, tmp_path, "o/needs", {".github/workflows/needs.yml": NEEDS_YML})
    run = run_of(state, "o/needs", "needs.yml", {})
    by_name = {j.name: j for j in run.latest_jobs()}
    assert {n: j.conclusion for n, j in by_name.items()} == {
        "build (0)": "success",
        "build (1)": "failure",
        "build (2)": "cancelled",  # fail-fast
        "report": "skipped",
        "always": "success",
        "lint": "success",
    }
    assert "build was failure" in texts_of(by_name["always"])
    assert run.conclusion == "failure"
    kept = {n: j.id for n, j in by_name.items()}
    state.actions.rerun(run, failed_only=True, actor="o")
    state.actions.wait(run.id, 120)
    again = {j.name: j for j in run.latest_jobs()}
    assert {n for n, j in again.items() if j.attempt == 2} == {"build (1)", "build (2)", "report", "always"}
    assert {n: again[n].id for n in ("build (0)", "lint")} == {n: kept[n] for n in ("build (0)", "lint")}
    assert {n: j.conclusion for n, j in again.items()} == {
        "build (0)": "success",
        "build (1)": "success",  # its second attempt passes
        "build (2)": "success",
        "report": "success",
        "always": "success",
        "lint": "success",
    }
    assert "build was success" in texts_of(again["always"]) and run.conclusion == "success"
