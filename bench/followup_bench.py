"""The follow-up lookup on SGLang's real incident: what it finds and what it costs in GitHub requests, today's finder
against the baseline's lookup (`GitHubForge.followup_for` taken from git at `--baseline`), in the same run.

Both run through real PyGithub against the sandbox serving the incident as public data records it
(tests/fixtures/sglang/followup_incident.json: the culprit #31369, its follow-up #29792, PRs of the same weeks), then
the same with `--crowd` more open PRs (other files, other titles), as on a busy repository. Requests are counted by
the sandbox, by kind.

    python bench/followup_bench.py                       # baseline main, 500 more open PRs
    python bench/followup_bench.py --crowd 2000 --baseline HEAD~5
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
from tests.support.incident import BOT, seed_incident  # noqa: E402

KINDS = (
    ("search", re.compile(r"^/search/")),
    ("timeline", re.compile(r"/timeline$")),
    ("files", re.compile(r"/pulls/\d+/files$")),
    ("open PRs", re.compile(r"/pulls$")),
)


def baseline_forge(rev: str) -> type:
    """GitHubForge as it was at `rev`."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:bot/adapters/github/forge.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("baseline_forge")
    exec(compile(source, f"{rev}:bot/adapters/github/forge.py", "exec"), module.__dict__)
    return module.GitHubForge


def crowd(state: SandboxState, slug: str, n: int) -> None:
    """`n` more open PRs of other files and titles."""
    words = "router kernel tokenizer cache grammar lora quant spec ep dp pd moe attention sampler server".split()
    for i in range(n):
        issue = state.add_pull(
            slug,
            number=40000 + i,
            title=f"[{words[i % len(words)].upper()}] Improve {words[(i * 7) % len(words)]} handling ({i})",
            body="Routine change.",
            user=f"dev{i % 40}",
            head=f"dev{i % 40}/pr-{i}",
            created_at=f"2026-07-{1 + i % 16:02d}T00:00:00Z",
        )
        issue.pull.files = [
            {"filename": f"python/sglang/srt/other/mod_{i}.py", "additions": 1, "deletions": 0, "patch": "@@ -1 +1 @@"}
        ]


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
    parser.add_argument("--baseline", default="main", help="the git revision whose followup_for is the baseline")
    parser.add_argument("--crowd", type=int, default=500, help="open PRs added for the busy repository's rows")
    args = parser.parse_args()
    old = baseline_forge(args.baseline)
    rows = []
    for extra in (0, args.crowd):
        with tempfile.TemporaryDirectory() as tmp:
            state = SandboxState(Path(tmp))
            slug = seed_incident(state)
            crowd(state, slug, extra)
            base, stop = run_in_thread(state)
            try:
                gh = connect(base, f"sandbox-token-{BOT}", throttle=False)
                before, today = old(gh, slug), GitHubForge(gh, slug)
                sides = (
                    (f"baseline ({args.baseline}): the culprit's timeline", before.followup_for),
                    ("today: timeline, open PRs' files, 2 searches", today.followup_for),
                )
                for name, lookup in sides:
                    found, kinds, elapsed = measure(state, lambda f=lookup: f(31369))
                    best = getattr(found, "best", found)
                    rows.append(
                        [
                            name,
                            str(7 + extra),
                            f"#{best}" if best else "none (opens a tracking issue)",
                            "yes" if best == 29792 else "**no**",
                            *(str(kinds.get(k, 0)) for k in ("timeline", "open PRs", "search", "files", "other")),
                            str(sum(kinds.values())),
                            f"{elapsed:.2f}",
                        ]
                    )
            finally:
                stop()
    table(
        "The follow-up lookup on SGLang's #31369",
        f"python bench/followup_bench.py --baseline {args.baseline} --crowd {args.crowd}",
        [
            "lookup",
            "PRs in the repository",
            "follow-up linked",
            "#29792?",
            "timeline",
            "open-PR pages",
            "searches",
            "file pages",
            "other",
            "requests",
            "seconds",
        ],
        rows,
        [
            "Requests counted by the sandbox. `other`: the culprit PR or issue itself. Seconds: wall time on loopback, "
            "for comparison within this table only."
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
