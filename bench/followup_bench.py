"""The follow-up lookup on SGLang's real incident: what it links, what else it names and what it costs in GitHub
requests, today's finder against the baseline's (bot/adapters/github/followups.py and bot/domain/followup.py taken
from git at `--baseline`), in the same run.

Both run through real PyGithub against the sandbox serving tests/support/followup_world.py: the culprit #31369, its
follow-up #29792 (under its recorded title, then retitled "[HiCache] Correct lookahead bookkeeping for hybrid
models"), the incident's decoys and three more, among `--crowd` open PRs of other files, `--newer` of them updated after
the follow-up. Requests are counted by the sandbox, by kind. The baseline runs twice: under its own caps, then given
today's budget of PRs' files, so that what today's judgement changes is told apart from what its budget does.

    python bench/followup_bench.py                        # baseline 9fda7cd (before issue 30's item 4)
    python bench/followup_bench.py --crowd 400 --newer 150
"""

from __future__ import annotations

import argparse
import ast
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
from bot.adapters.github.followups import Budget  # noqa: E402
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


def _source(rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def _module(name: str, source: str, origin: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(source, origin, "exec"), module.__dict__)
    return module


def _class_source(source: str, name: str) -> str:
    """One top-level class of `source`, its decorators included."""
    node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return "\n".join(source.splitlines()[first - 1 : node.end_lineno])


def baseline_finder(rev: str) -> types.ModuleType:
    """The follow-up finder's adapter as it was at `rev`, over its own domain module and its own `Followups` (the
    port's shape at `rev`: 9fda7cd's carries the `related` it named, which today's has no field for)."""
    _module("baseline_followup_domain", _source(rev, "bot/domain/followup.py"), f"{rev}:bot/domain/followup.py")
    ports = _class_source(_source(rev, "bot/ports/__init__.py"), "Followups")
    header = "from __future__ import annotations\nfrom dataclasses import dataclass, field\n\n"
    _module("baseline_ports", header + ports, f"{rev}:bot/ports/__init__.py")
    adapter = _source(rev, "bot/adapters/github/followups.py")
    for old, new in (
        ("from bot.domain.followup import", "from baseline_followup_domain import"),
        ("from bot.ports import Followups", "from baseline_ports import Followups"),
    ):
        assert old in adapter, f"{rev}'s finder no longer reads `{old}`"
        adapter = adapter.replace(old, new)
    return _module("baseline_followups", adapter, f"{rev}:bot/adapters/github/followups.py")


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
    budgets = [("", old.Caps())]
    fields = getattr(old.Caps, "__dataclass_fields__", {})
    if {"candidates_read", "file_pages"} <= set(fields):  # the files of as many PRs as today's budget reads
        budgets.append((", today's budget", old.Caps(candidates_read=Budget().files, file_pages=1)))
    rows = []
    for retitled in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            state = SandboxState(Path(tmp) / "sandbox")
            slug = sglang_world(state, Path(tmp) / "world", crowd_size=args.crowd, newer=args.newer, retitled=retitled)
            base, stop = run_in_thread(state)
            try:
                gh = connect(base, f"sandbox-token-{BOT}", throttle=False)
                forge = GitHubForge(gh, slug)
                sides = [
                    (
                        f"baseline ({args.baseline}){said}",
                        lambda c=caps, f=forge: old.FollowupFinder(f.repo, c).find(31369),
                    )
                    for said, caps in budgets
                ]
                sides.append(("today", lambda f=forge: f.followup_for(31369)))
                for name, lookup in sides:
                    found, kinds, elapsed = measure(state, lookup)
                    best = getattr(found, "best", None)
                    named = set(getattr(found, "related", ()))  # today's names nothing but `best`
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
