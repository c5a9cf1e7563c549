"""`python -m sandbox --scenario DIR [--port P] [--root DIR] [--hook URL --hook-secret S] [--schedule]` (also
`revert-bisect sandbox`): the GitHub sandbox, standalone. `--hook` delivers signed `workflow_run` webhooks to URL;
`--schedule` starts one scheduled run of the nightly workflow on the default branch's head once serving."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

import uvicorn

from .app import create_sandbox
from .state import NIGHTLY_WORKFLOW, SandboxState, seed_from_scenario
from .state.search_index import DEFAULT_LAG_S

DESCRIPTION = (
    "The GitHub sandbox: a local, stateful GitHub for offline use (REST, git over HTTP, Actions on this machine), "
    "seeded from a scenario. --hook delivers signed workflow_run webhooks to URL; --schedule starts one scheduled "
    "run of the nightly workflow on the default branch's head once serving."
)
# Written out, not generated: argparse would show the required --scenario in brackets.
USAGE = (
    "%(prog)s --scenario DIR [--port PORT] [--host HOST]\n"
    "       [--root DIR] [--hook URL --hook-secret SECRET] [--schedule]\n"
    "       [--search-lag SECONDS]"
)
BUILD = "python -m scenarios.mamba_track_boundary build DIR"


class _Formatter(argparse.HelpFormatter):
    def add_usage(self, usage, actions, groups, prefix=None) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, no usage block: what is wrong and where the help is."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (1 to 65535)")
    return port


def _seconds(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value} is not within 0 to 3600 seconds")
    return seconds


def _scenario_problem(directory: Path) -> str | None:
    """Why DIR is not a scenario the sandbox can be seeded from, before anything is started."""
    if not directory.is_dir():
        return f"--scenario {directory}: no such directory ({BUILD} writes one)"
    manifest = directory / "scenario.json"
    try:
        data = json.loads(manifest.read_text())
    except FileNotFoundError:
        return f"--scenario {directory}: no scenario.json in it ({BUILD} writes one)"
    except OSError as exc:
        return f"--scenario {directory}: cannot read scenario.json ({exc.strerror})"
    except ValueError as exc:
        return f"--scenario {directory}: scenario.json is not valid JSON ({exc})"
    missing = [key for key in ("repo_slug", "repo") if not isinstance(data, dict) or key not in data]
    if missing:
        return f"--scenario {directory}: scenario.json has no {' or '.join(missing)} ({BUILD} writes one)"
    source = Path(str(data["repo"]))
    if not (source if source.is_absolute() else directory / source).is_dir():
        return f"--scenario {directory}: the repository scenario.json names ({data['repo']}) does not exist"
    return None


def main(argv: list[str] | None = None, prog: str = "python -m sandbox") -> int:
    parser = _Parser(prog=prog, usage=USAGE, description=DESCRIPTION, formatter_class=_Formatter)
    parser.add_argument(
        "--scenario", metavar="DIR", help=f"the scenario directory to seed from (required; {BUILD} writes one)"
    )
    parser.add_argument(
        "--port", type=_port, default=8765, help="the port of the API and git over HTTP (default: %(default)s)"
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: %(default)s)")
    parser.add_argument(
        "--root", metavar="DIR", help="where the bare repositories live (default: a temporary directory)"
    )
    parser.add_argument(
        "--hook",
        action="append",
        default=[],
        metavar="URL",
        help="deliver signed workflow_run webhooks to URL (repeatable)",
    )
    parser.add_argument("--hook-secret", metavar="SECRET", default="", help="the webhook secret (X-Hub-Signature-256)")
    parser.add_argument(
        "--schedule",
        action="store_true",
        help="once serving, start one scheduled run of the nightly workflow on the default branch",
    )
    parser.add_argument(
        "--search-lag",
        type=_seconds,
        default=DEFAULT_LAG_S,
        metavar="SECONDS",
        help="how long issue search takes to see a write, as GitHub's index lags (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if not args.scenario:
        parser.exit(
            2, f"{prog}: error: missing --scenario DIR: the scenario directory to seed from ({BUILD} writes one)\n"
        )
    problem = _scenario_problem(Path(args.scenario))
    if problem:
        parser.exit(2, f"{prog}: error: {problem}\n")
    try:
        state = SandboxState(args.root)
    except OSError as exc:
        parser.exit(
            2, f"{prog}: error: --root {args.root}: cannot keep the repositories there ({exc.strerror or exc})\n"
        )
    state.actions.base_url = f"http://{args.host}:{args.port}"
    state.search.lag_s = args.search_lag
    try:
        seeded = seed_from_scenario(state, args.scenario)
    except Exception as exc:  # a scenario damaged in a way the checks above do not see: one line, no traceback
        parser.exit(
            2,
            f"{prog}: error: --scenario {args.scenario}: cannot seed the sandbox from it "
            f"({exc or type(exc).__name__})\n",
        )
    print(f"seeded {seeded.repo}; tokens:", file=sys.stderr)
    for login, token in seeded.tokens.items():
        print(f"  {login}: {token}", file=sys.stderr)
    for url in args.hook:
        state.add_hook(url, args.hook_secret)
        print(f"webhooks (workflow_run) -> {url}", file=sys.stderr)
    if args.schedule:
        _schedule_when_serving(state, seeded.repo, args.host, args.port)
    try:
        state.blobs.serve(args.host)  # where the download redirects point: another host name, a port of its own
    except OSError as exc:
        parser.exit(2, f"{prog}: error: --host {args.host}: cannot listen there ({exc.strerror or exc})\n")
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
