"""GitHub Actions emulation for the sandbox: the sandbox acts as a self-hosted runner on this machine.

Workflows are discovered from `.github/workflows/*.yml` on a repository's default branch when it is
created, and their files parsed (sandbox/workflow.py); a workflow runs only what it is bound to
(`state.bind_workflow(repo, path, argv, env)`, never its `run:` lines): the argv runs in a fresh
`git worktree` of the run's head sha with

    GITHUB_SHA, GITHUB_RUN_ID, GITHUB_RUN_NUMBER, GITHUB_REPOSITORY, GITHUB_REF, GITHUB_EVENT_NAME,
    RUNNER_TEMP (a directory of its own, removed after the run),
    REVERT_BISECT_SHA, REVERT_BISECT_WORKTREE, REVERT_BISECT_RESULT,
    INPUT_<NAME> for each dispatch input

in its environment. From the file, as GitHub does: dispatch inputs (undeclared or missing required
ones: 422; defaults applied), `run-name`, the first job's `runs-on` (a job no runner has the labels
for -- `Actions.runner_labels` -- stays queued until cancelled), `timeout-minutes` (times
`Actions.minute_s`; an explicit bind timeout wins), `concurrency` (one run in progress per group, one
pending; a newer one cancels the pending one) and its `actions/upload-artifact` steps (the evaluated
`name`/`path` zipped after the command; `if-no-files-found`). A workflow without upload steps uploads
REVERT_BISECT_RESULT, when written, as artifact `result`.

A run has one job whose log is the command's stdout+stderr, timestamped like GitHub's; its conclusion
comes from the exit code (0 success, else failure; cancelled; timed_out). `workflow_run` webhooks
(requested, in_progress, completed) and `workflow_job` ones (queued, in_progress, completed) are
signed and delivered to every hook subscribed to them (`state.add_hook(url, secret, events)`), in
order, on a delivery thread; `state.hook_deliveries` records them.

Downloads (job logs, run logs, artifact zips) answer 302 like GitHub, to a signed URL that expires after a
minute on another host, the blob host (sandbox/state/blobs.py), which refuses credentials
(sandbox/api/downloads.py builds what it serves).
"""

# Modules: workflow (the files), model (the records), engine (+ runner: processes; outbox: webhooks),
# render (the JSON); the routes are sandbox/api/actions.py.
