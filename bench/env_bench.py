"""Environment builds saved by keying environments on dependency pins, on the miniature incident.

    python bench/env_bench.py [--commits 60] [--seeds 0,1,2] [--workers 4]

For each seed: build the 60-commit scenario (3 commits change the pins in pyproject.toml), run a
full bisection -- calibration, search, confirmation, A/B -- with the real KL probe through the
local pool with `env: {project: pyproject.toml}`, and count environments built vs reused from the
stored steps. Baselines, from the same run: one environment per step (no reuse: what a fresh
runner per step does) and one per tested commit (reuse keyed by the commit's sha). Prints a
markdown table on stdout, progress on stderr.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.adapters.dispatch.local_pool import LocalPool  # noqa: E402
from bot.adapters.git.repo import GitRepo  # noqa: E402
from bot.adapters.git.revert import reverter_for  # noqa: E402
from bot.adapters.store.db import connect  # noqa: E402
from bot.adapters.store.store import Store  # noqa: E402
from bot.service import setup  # noqa: E402
from bot.service.config import BisectConfig  # noqa: E402
from bot.service.driver import Driver  # noqa: E402
from runners.envs import EnvError, EnvSpec, pins  # noqa: E402
from runners.testrun import argv_of  # noqa: E402
from scenarios.mamba_track_boundary import KL_CASE, METRIC_REGEX, build  # noqa: E402


def one(workdir: Path, commits: int, seed: int, workers: int) -> dict:
    scenario = build(workdir / "scenario", commits=commits, seed=seed)
    repo = GitRepo(scenario.repo)
    store = Store(connect(f"sqlite:///{workdir / 'bench.db'}"))
    test = scenario.own_test(cases=(KL_CASE,))  # the nightly's KL method, as a red nightly narrows the steps to
    config = BisectConfig(
        command=tuple(argv_of(test)),
        workers=workers,
        metric_regex=METRIC_REGEX,
        threshold=scenario.threshold,
        verify_revert=True,
        env=EnvSpec(offline=True).to_json(),
        test_run=test.to_json(),
    )
    loaded = setup.create(store, repo, scenario.good, scenario.bad, config)
    t0 = time.monotonic()
    pool = LocalPool(repo, workers, workdir / "worktrees")
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, pool, reverter=reverter_for(repo)).run()
    wall = time.monotonic() - t0
    steps = [s for s in store.get(loaded.id).steps if s.state == "done" and s.env_key]
    return dict(
        seed=seed,
        culprit_ok=outcome.culprit == scenario.culprit,
        steps=len(steps),
        commits=len({s.sha for s in steps}),
        keys=len({s.env_key for s in steps}),
        built=sum(not s.env_reused for s in steps),
        pins=pin_changes_only(repo, scenario.good, scenario.bad),
        wall=wall,
    )


def pin_changes_only(repo: GitRepo, good: str, bad: str) -> int:
    """Commits of the range whose dependency lists differ from their parent's (not version bumps)."""
    count = 0
    for sha in repo.repo.git.rev_list("--first-parent", "--reverse", f"{good}..{bad}", "--", "pyproject.toml").split():

        def deps(rev: str) -> list[str]:
            with tempfile.TemporaryDirectory() as tmp:
                Path(tmp, "pyproject.toml").write_text(repo.repo.git.show(f"{rev}:pyproject.toml"))
                try:
                    return pins(Path(tmp), EnvSpec())
                except EnvError:
                    return []

        count += deps(sha) != deps(f"{sha}^")
    return count


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--commits", type=int, default=60)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args()
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        with tempfile.TemporaryDirectory(prefix="env-bench-") as tmp:
            print(f"seed {seed}: bisecting {args.commits} commits ...", file=sys.stderr)
            rows.append(one(Path(tmp), args.commits, seed, args.workers))
            print(f"  {rows[-1]}", file=sys.stderr)
    print(f"### Environment builds per bisection ({args.commits} commits, k={args.workers})\n")
    print(f"`python bench/env_bench.py --commits {args.commits} --seeds {args.seeds} --workers {args.workers}`\n")
    print(
        "| seed | pin changes in range | steps | commits tested | env builds (keyed by pins) | builds, one per commit "
        "| builds, one per step | culprit |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['seed']} | {r['pins']} | {r['steps']} | {r['commits']} | **{r['built']}** | {r['commits']} | "
            f"{r['steps']} | {'correct' if r['culprit_ok'] else 'WRONG'} |"
        )
    print(
        f"\nMedian: {statistics.median(r['built'] for r in rows):g} builds vs "
        f"{statistics.median(r['steps'] for r in rows):g} without reuse; "
        f"median bisection wall {statistics.median(r['wall'] for r in rows):.1f} s."
    )
    return 0 if all(r["culprit_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
