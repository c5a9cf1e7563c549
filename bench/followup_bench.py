"""The follow-up lookup on SGLang's real incident: what it links, what else it names and what it costs in GitHub
requests, today's finder against the baseline's (bot/adapters/github/followups.py and bot/domain/followup.py taken
from git at `--baseline`), in the same run.

Both run through real PyGithub against the sandbox serving tests/support/followup_world.py: the culprit #31369, its
follow-up #29792 (under its recorded title, then retitled "[HiCache] Correct lookahead bookkeeping for hybrid
models"), the incident's decoys and three more, among `--crowd` open PRs of other files, `--newer` of them updated after
the follow-up. Requests are counted by the sandbox, by kind.

    python bench/followup_bench.py                        # baseline 9fda7cd (before issue 30's item 4)
    python bench/followup_bench.py --crowd 400 --newer 150
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tables import table  # noqa: E402
from bot.adapters.github.forge import GitHubForge, connect  # noqa: E402
from sandbox import SandboxState, run_in_thread  # noqa: E402
from tests.support.followup_world import sglang_world  # noqa: E402
from tests.support.incident import BOT  # noqa: E402

KINDS = (
    ("search", re.compile(r"^/search/")),
    ("timeline", re.compile(r"/timeline$")),
    ("files", re.compile(r"/pulls/\d+/files$")),
    ("open PRs", re.compile(r"/pulls$")),
    ("texts", re.compile(r"/git/blobs/")),
)
DECOYS = {34001, 34002, 30437, 31488, 31622, 32589, 33118}


def _module(rev: str, path: str, name: str, swap: tuple[str, str] | None = None) -> types.ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
    ).stdout
    if swap:
        source = source.replace(*swap)
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


def baseline_finder(rev: str):
    """The follow-up finder as it was at `rev`: its adapter over its own domain module."""
    _module(rev, "bot/domain/followup.py", "baseline_followup_domain")
    adapter = _module(
        rev,
        "bot/adapters/github/followups.py",
        "baseline_followups",
        ("from bot.domain.followup import", "from baseline_followup_domain import"),
    )
    return lambda repo, number: adapter.FollowupFinder(repo).find(number)


def measure(state: SandboxState, lookup) -> tuple[object, Counter, float]:
    state.rates.calls.clear()
    start = time.perf_counter()
    found = lookup()
    elapsed = time.perf_counter() - start
    kinds: Counter = Counter()
    for (_, path), n in state.rates.calls.items():
        kind = next((k for k, pattern in KINDS if pattern.search(path.split("?")[0])), "other")
        kinds[kind] += n
    return found, kinds, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="9fda7cd", help="the git revision whose follow-up finder is the baseline")
    parser.add_argument("--crowd", type=int, default=230, help="open PRs of other files")
    parser.add_argument("--newer", type=int, default=50, help="of them, updated after the follow-up")
    args = parser.parse_args()
    old = baseline_finder(args.baseline)
    rows = []
    for retitled in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            state = SandboxState(Path(tmp) / "sandbox")
            slug = sglang_world(state, Path(tmp) / "world", crowd_size=args.crowd, newer=args.newer, retitled=retitled)
            base, stop = run_in_thread(state)
            try:
                gh = connect(base, f"sandbox-token-{BOT}", throttle=False)
                forge = GitHubForge(gh, slug)
                sides = (
                    (f"baseline ({args.baseline})", lambda f=forge: old(f.repo, 31369)),
                    ("today", lambda f=forge: f.followup_for(31369)),
                )
                for name, lookup in sides:
                    found, kinds, elapsed = measure(state, lookup)
                    best = getattr(found, "best", None)
                    named = set(getattr(found, "related", ()))
                    rows.append(
                        [
                            name,
                            "retitled" if retitled else "recorded",
                            f"#{best}" if best else "none (opens a tracking issue)",
                            ", ".join(f"#{n}{'' if n in DECOYS else ' (crowd)'}" for n in sorted(named)) or "none",
                            *(
                                str(kinds.get(k, 0))
                                for k in ("timeline", "open PRs", "search", "files", "texts", "other")
                            ),
                            str(sum(kinds.values())),
                            f"{elapsed:.2f}",
                        ]
                    )
            finally:
                stop()
    table(
        "The follow-up lookup on SGLang's #31369",
        f"python bench/followup_bench.py --baseline {args.baseline} --crowd {args.crowd} --newer {args.newer}",
        [
            "finder",
            "#29792's title",
            "follow-up linked",
            "decoys named (Related)",
            "timeline",
            "open-PR pages",
            "searches",
            "file pages",
            "file texts",
            "other",
            "requests",
            "seconds",
        ],
        rows,
        [
            f"{args.crowd + 9} PRs; #29792 is 51st by last update when `--newer` is 50. Requests counted by the "
            "sandbox. `other`: the culprit PR. Seconds: wall time on loopback, for comparison within this table only."
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
