"""python -m scenarios.mamba_track_boundary build DIR [--commits 60] [--seed S] [--flake-rate F] [--unbuildable K]"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .builder import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scenarios.mamba_track_boundary")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="write DIR/repo and DIR/scenario.json")
    b.add_argument("dir", type=Path)
    b.add_argument("--commits", type=int, default=60)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--flake-rate", type=float, default=0.0, help="probability a server start perturbs state restores")
    b.add_argument("--unbuildable", type=int, default=0, help="commits with a syntax error the next commit fixes")
    b.add_argument("--force", action="store_true", help="replace DIR/repo if it exists")
    args = parser.parse_args(argv)
    tic = time.monotonic()
    try:
        scenario = build(
            args.dir,
            commits=args.commits,
            seed=args.seed,
            flake_rate=args.flake_rate,
            unbuildable=args.unbuildable,
            force=args.force,
        )
    except (ValueError, FileExistsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"repo:      {scenario.repo}  ({scenario.commits} commits, {time.monotonic() - tic:.2f}s)")
    print(f"good:      {scenario.good}")
    print(f"bad:       {scenario.bad}")
    print(f"culprit:   {scenario.culprit}  #{scenario.culprit_pr}  (for tests only)")
    if scenario.unbuildable:
        print(f"unbuildable: {', '.join(s[:10] for s in scenario.unbuildable)}")
    rename = scenario.flag_rename
    print(f"renamed:   {rename['sha']}  #{rename['pr']}  {rename['old']} -> {rename['new']}")
    print(f"follow-up: #{scenario.followup['number']} {scenario.followup['title']}")
    print(f"metadata:  {scenario.dir / 'scenario.json'}")
    print(f"test:      cd <worktree> && {scenario.test_shell()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
