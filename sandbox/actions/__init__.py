"""GitHub Actions emulation for the sandbox: the sandbox acts as a self-hosted runner on this machine.

Workflows are discovered from `.github/workflows/*.yml` on a repository's default branch when it is
created, and their files parsed (workflow.py). A run's job runs the file's own steps as GitHub's runner
does (steps.py): each `run:` through its shell (bash -e by default) with the workflow's, job's and step's
`env:`, `working-directory`, `if:`, GITHUB_OUTPUT / GITHUB_ENV / GITHUB_PATH; `actions/checkout` (a
worktree of the commit in the workspace) and `actions/upload-artifact` (name, path, if-no-files-found)
emulated; any other action, step key or expression the sandbox does not evaluate (expressions.py) fails
the step with an ##[error] naming it. A run: step's environment is the runner machine's
(`Actions.runner_env`; the step workflow's machine: machine.py) plus GitHub's default variables -- no
INPUT_*, no GITHUB_TOKEN unless the workflow maps `${{ github.token }}`.

A workflow bound to a command (`state.bind_workflow(repo, path, argv, env)`: a stand-in for steps this
machine cannot run, such as a scenario's GPU test) runs that command instead, in a fresh `git worktree`
of the head sha, with the stand-in's own variables

    GITHUB_SHA, GITHUB_RUN_ID, GITHUB_RUN_NUMBER, GITHUB_REPOSITORY, GITHUB_REF, GITHUB_EVENT_NAME,
    RUNNER_TEMP (a directory of its own, removed after the run), GITHUB_TOKEN (the job's),
    REVERT_BISECT_SHA, REVERT_BISECT_WORKTREE, REVERT_BISECT_RESULT,
    INPUT_<NAME> for each dispatch input (not GitHub's: a bound command is not a `run:` step)

and then the file's upload-artifact steps (without any, REVERT_BISECT_RESULT, when written, is uploaded as
artifact `result`). From the file, as GitHub does: dispatch inputs (undeclared or missing required
ones: 422; defaults applied), `run-name`, the first job's `runs-on` (a job no runner has the labels
for -- `Actions.runner_labels` -- stays queued until cancelled), `timeout-minutes` (times
`Actions.minute_s`; an explicit bind timeout wins), `concurrency` (one run in progress per group, one
pending; a newer one cancels the pending one).

A run has one job whose log is written as GitHub's runner writes it: every line behind a UTC timestamp
with seven fractional digits, each step opened by `##[group]Run <its first line>` (its script, shell and
env) and `##[endgroup]`, its output after, failures as `##[error]Process completed with exit code N.`,
secrets and the job's token as `***`. Its conclusion: success, failure, cancelled or timed_out.
`workflow_run` webhooks (requested, in_progress, completed) and `workflow_job` ones (queued, in_progress, completed) are
signed and delivered to every hook subscribed to them (`state.add_hook(url, secret, events)`), in
order, on a delivery thread; `state.hook_deliveries` records them.

Downloads (job logs, run logs, artifact zips) answer 302 like GitHub, to a signed URL that expires after a
minute on another host, the blob host (sandbox/state/blobs.py), which refuses credentials
(sandbox/api/downloads.py builds what it serves).
"""

# Modules: workflow (the files) + expressions (`${{ }}`), model (the records), engine (+ runner: processes;
# steps: a job's steps; machine: the step workflow's runner machine; outbox: webhooks), render (the JSON);
# the routes are sandbox/api/actions.py.
