"""`python -m bot.sandbox --scenario DIR [--port P] [--root DIR]`: the GitHub sandbox, standalone."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from .app import create_sandbox
from .state import SandboxState, seed_from_scenario


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bot.sandbox", description=__doc__)
    parser.add_argument("--scenario", help="a scenario directory (examples.mamba_track_boundary build DIR)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--root", help="where the bare repositories live (default: a temporary directory)")
    args = parser.parse_args(argv)
    state = SandboxState(args.root)
    if args.scenario:
        seeded = seed_from_scenario(state, args.scenario)
        print(f"seeded {seeded.repo}; tokens:", file=sys.stderr)
        for login, token in seeded.tokens.items():
            print(f"  {login}: {token}", file=sys.stderr)
    print(f"GitHub sandbox on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(create_sandbox(state), host=args.host, port=args.port, log_level="info")
    return 0


if __name__ == "__main__":
    sys.exit(main())
