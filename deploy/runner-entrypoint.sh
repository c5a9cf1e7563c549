#!/usr/bin/env bash
# Registers this container as a self-hosted GitHub Actions runner (first start only), then runs it.
#
#   RUNNER_URL     the repository (https://github.com/OWNER/REPO) or organization URL      (required)
#   RUNNER_TOKEN   a registration token: repository (or org) Settings > Actions > Runners > New
#                  self-hosted runner, or POST /repos/OWNER/REPO/actions/runners/registration-token;
#                  valid for one hour, needed only until the runner is configured           (required)
#   RUNNER_LABELS  extra labels, comma-separated, e.g. 4-gpu-h100 (self-hosted, linux, x64 are added
#                  by GitHub); they must include the policy's runner.labels                 (required)
#   RUNNER_NAME    default: the container's hostname
#   RUNNER_GROUP   default: Default
#   RUNNER_EPHEMERAL=1   take one job, then deregister and exit (use with a restart policy and a
#                        fresh token per start, e.g. from a runner controller)
set -euo pipefail

cd /opt/actions-runner

if [[ ! -f .runner ]]; then
    : "${RUNNER_URL:?set RUNNER_URL (https://github.com/OWNER/REPO)}"
    : "${RUNNER_TOKEN:?set RUNNER_TOKEN (a runner registration token)}"
    : "${RUNNER_LABELS:?set RUNNER_LABELS (comma-separated, including the runner.labels of the policy)}"
    args=(--unattended --replace
          --url "$RUNNER_URL" --token "$RUNNER_TOKEN"
          --name "${RUNNER_NAME:-$(hostname)}" --labels "$RUNNER_LABELS"
          --runnergroup "${RUNNER_GROUP:-Default}" --work "${RUNNER_WORKDIR:-_work}")
    if [[ "${RUNNER_EPHEMERAL:-0}" == 1 ]]; then
        args+=(--ephemeral)
    fi
    ./config.sh "${args[@]}"
fi
unset RUNNER_TOKEN

mkdir -p "${REVERT_BISECT_RUNNER_CACHE:?}"
# run.sh forwards SIGTERM/SIGINT to the listener, which finishes gracefully.
exec ./run.sh
