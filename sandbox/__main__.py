"""`python -m sandbox --scenario DIR [--port P] [--root DIR] [--hook URL --hook-secret S] [--schedule]`:
the GitHub sandbox, standalone. `--hook` delivers signed `workflow_run` webhooks to URL; `--schedule`
starts one scheduled run of the nightly workflow on the default branch's head once serving."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from .app import create_sandbox
from .state import NIGHTLY_WORKFLOW, SandboxState, seed_from_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    parser.add_argument("--scenario", help="a scenario directory (scenarios.mamba_track_boundary build DIR)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--root", help="where the bare repositories live (default: a temporary directory)")
    parser.add_argument(
        "--hook",
        action="append",
        default=[],
        metavar="URL",
        help="deliver signed workflow_run webhooks to URL (repeatable)",
    )
    parser.add_argument("--hook-secret", default="", help="the webhook secret (X-Hub-Signature-256)")
    parser.add_argument(
        "--schedule",
        action="store_true",
        help="once serving, start one scheduled run of the nightly workflow on the default branch",
    )
    args = parser.parse_args(argv)
    if args.schedule and not args.scenario:
        parser.error("--schedule needs --scenario")
    state = SandboxState(args.root)
    state.actions.base_url = f"http://{args.host}:{args.port}"
    seeded = None
    if args.scenario:
        seeded = seed_from_scenario(state, args.scenario)
        print(f"seeded {seeded.repo}; tokens:", file=sys.stderr)
        for login, token in seeded.tokens.items():
            print(f"  {login}: {token}", file=sys.stderr)
    for url in args.hook:
        state.add_hook(url, args.hook_secret)
        print(f"webhooks (workflow_run) -> {url}", file=sys.stderr)
    if args.schedule and seeded is not None:
        _schedule_when_serving(state, seeded.repo, args.host, args.port)
    state.blobs.serve(args.host)  # where the download redirects point: another host name, a port of its own
    print(f"GitHub sandbox on http://{args.host}:{args.port} (downloads: {state.blobs.base_url})", file=sys.stderr)
    uvicorn.run(create_sandbox(state), host=args.host, port=args.port, log_level="info")
    return 0


def _schedule_when_serving(state: SandboxState, repo: str, host: str, port: int) -> None:
    import socket
    import threading
    import time

    def start() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        r = state.repo(repo)
        run_id = state.start_run(repo, NIGHTLY_WORKFLOW, r.default_branch, event="schedule")
        print(f"scheduled run {run_id} of {NIGHTLY_WORKFLOW} on {r.default_branch}", file=sys.stderr)

    threading.Thread(target=start, name="sandbox-schedule", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
