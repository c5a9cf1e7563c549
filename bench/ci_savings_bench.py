"""What CI's own results save: GPU runs, GPU-hours and time from the red run to the revert PR.

    python bench/ci_savings_bench.py                       # simulated incidents, N = 4, 12, 30
    python bench/ci_savings_bench.py --repo PATH --good G --bad B --every 8 -- ./probe.sh

Simulated (the default): a history where a scheduled run tests the main branch every N commits; the
test breaks at a random commit, and the first scheduled run after it is red. A whole run is green
only now and then (`--green-share`: SGLang's scheduled PR Test Base runs have dozens of jobs and
almost never all pass), so "the last green run" as a whole lies several scheduled runs back, while
the test itself passed in the run just before the culprit. Compared, on the same incidents:

- `git bisect run` from the last whole-run green (one run at a time), and from the test's own last pass (the
  range revert-bisect's per-test rows bisect: the same GOOD and BAD, which git takes as read);
- revert-bisect from the last whole-run green, without CI's readings (the code before per-test history);
- revert-bisect from the test's own last pass, with CI's readings of the range as free evidence.

Each GPU run costs `--start-s` (server start) + `--test-s` (the test) on a runner of `--gpus` GPUs;
the time to the revert PR is the bisection's rounds times that (its confirmation and A/B included).

With `--repo`, a real repository: the probe is run at every `--every`-th commit of GOOD..BAD to stand
for CI's scheduled runs (not counted as bisect runs), then `git bisect run`, revert-bisect without
those readings and revert-bisect with them, each counting the probe's runs.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.bisect.engine import decide  # noqa: E402
from bot.domain.bisect.model import Kind, Problem, Run, Settings, State  # noqa: E402
from bot.domain.bisect.simulate import FlakyTest, git_bisect, linear_graph  # noqa: E402
from bot.domain.bisect.verdict import RawResult  # noqa: E402

COMMAND = "python " + shlex.join(["bench/ci_savings_bench.py", *sys.argv[1:]])


@dataclass(frozen=True)
class Cost:
    start_s: float
    test_s: float
    gpus: int

    @property
    def run_s(self) -> float:
        return self.start_s + self.test_s


@dataclass(frozen=True)
class Spent:
    commits: int  # the range bisected
    runs: int  # GPU runs on the bisect runner
    rounds: int
    found: bool
    by_kind: tuple[tuple[str, int], ...] = ()  # runs per kind (calibrate, search, confirm, ab_head, ab_revert)


def bisect_sim(
    n: int,
    culprit: int,
    k: int,
    ci: dict[int, bool],
    rng: random.Random,
    flake: float,
    trust: bool = False,
    declared: float | None = None,
) -> Spent:
    """revert-bisect's engine on c0..cn (c0 GOOD), CI's readings at `ci` given first; rounds of k runs. `trust`: the
    red failure reproduced on CI, its endpoints taken as read (Settings.trust_endpoints). `declared`: the flake rate
    revert-bisect is told (None: auto)."""
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings(flake_rate=declared, trust_endpoints=trust), head=bad)
    test = FlakyTest(culprit, flake, rng)
    state = State()
    runs = [Run(f"c{i}", Kind.CI, RawResult(0 if ok else 1)) for i, ok in sorted(ci.items())]
    rounds = 0
    while True:
        decision = decide(problem, state, runs, (), k)
        state = decision.state
        if decision.wants_revert:  # the revert on HEAD, made: its A/B comes next
            state = replace(state, revert="r")
            continue
        if decision.outcome is not None:
            spent = [r for r in runs if r.kind is not Kind.CI]
            kinds = tuple((kind.value, sum(r.kind is kind for r in spent)) for kind in Kind if kind is not Kind.CI)
            return Spent(n, len(spent), rounds, decision.outcome.culprit == f"c{culprit}", kinds)
        rounds += 1
        for p in decision.probes:
            sha = bad if p.kind is Kind.AB_HEAD else "c0" if p.kind is Kind.AB_REVERT else p.sha
            runs.append(Run(p.sha, p.kind, test.run(sha), p.round))


@dataclass(frozen=True)
class Incident:
    every: int  # a scheduled run every `every` commits
    runs_back: int  # scheduled runs between the last whole-run green and the red one
    culprit_offset: int  # the culprit's place among the `every` commits before the red run (1-based)

    @property
    def whole_range(self) -> int:
        return self.every * self.runs_back

    @property
    def culprit_in_whole(self) -> int:
        return self.whole_range - self.every + self.culprit_offset


def incidents(every: int, green_share: float, count: int, seed: int) -> list[Incident]:
    rng = random.Random(seed * 1000 + every)
    out = []
    for _ in range(count):
        back = 1
        while rng.random() > green_share:  # earlier scheduled runs, until one green as a whole
            back += 1
        out.append(Incident(every, back, rng.randint(1, every)))
    return out


def simulated(args) -> None:
    cost = Cost(args.start_s, args.test_s, args.gpus)
    header = ["N", "method", "k", "range (commits)", "GPU runs", "GPU-hours", "red run to revert PR", "right"]
    rows = []
    versus = []  # each revert-bisect row beside git bisect run on its own range, incident by incident
    declared = declared_rate(args)
    for every in args.every_list:
        cases = incidents(every, args.green_share, args.incidents, args.seed)
        flaky = random.Random(args.seed + 1)
        gb = [git_bisect(c.whole_range, FlakyTest(c.culprit_in_whole, args.flake, flaky)) for c in cases]
        rows.append(
            _row(every, "git bisect run, from the last whole-run green (the whole-run rows' range)", 1, cases,
                 [c.whole_range for c in cases], [runs for _, runs in gb], [runs for _, runs in gb],
                 [culprit == c.culprit_in_whole for (culprit, _), c in zip(gb, cases)], cost)
        )  # fmt: skip
        # the same inputs as revert-bisect's per-test rows below: the test's own last pass as GOOD, the red run as BAD
        same = random.Random(args.seed + 1)
        gs = [git_bisect(every, FlakyTest(c.culprit_offset, args.flake, same)) for c in cases]
        rows.append(
            _row(every, "git bisect run, from the test's own last pass (the per-test rows' range)", 1, cases,
                 [every] * len(cases), [runs for _, runs in gs], [runs for _, runs in gs],
                 [culprit == c.culprit_offset for (culprit, _), c in zip(gs, cases)], cost)
        )  # fmt: skip
        whole_git, own_git = [runs for _, runs in gb], [runs for _, runs in gs]
        for k in args.k_list:
            rng = random.Random(args.seed)
            today = [bisect_sim(c.whole_range, c.culprit_in_whole, k, {}, rng, args.flake, declared=declared)
                     for c in cases]  # fmt: skip
            rows.append(_spent_row(every, WHOLE, k, today, cost))
            versus.append(_versus_row(every, WHOLE, k, today, whole_git))
        for k in args.k_list:
            rng = random.Random(args.seed)
            # per-test history: GOOD is the run just before the culprit (the test passed there); CI's readings of
            # both endpoints (that run's pass, the red run's failure) come with the range
            ci = [bisect_sim(every, c.culprit_offset, k, {0: True, every: False}, rng, args.flake, declared=declared)
                  for c in cases]  # fmt: skip
            rows.append(_spent_row(every, PER_TEST, k, ci, cost))
            versus.append(_versus_row(every, PER_TEST, k, ci, own_git))
        for k in args.k_list:
            rng = random.Random(args.seed)
            # the red failure reproduced on CI (a re-run attempt, the suite runner's retry): no endpoint run first
            read = [
                bisect_sim(every, c.culprit_offset, k, {0: True, every: False}, rng, args.flake, True, declared)
                for c in cases
            ]
            rows.append(_spent_row(every, REPRODUCED, k, read, cost))
            versus.append(_versus_row(every, REPRODUCED, k, read, own_git))
    told = "auto" if declared is None else f"{declared:g}"
    notes = [
        f"Median over {args.incidents} incidents per N; a whole run is green with probability {args.green_share:g} "
        f"(the last green lies {1 / args.green_share:.1f} scheduled runs back on average). A GPU run costs "
        f"{args.start_s:g} s + {args.test_s:g} s on {args.gpus} GPUs; revert-bisect's runs include its "
        "calibration, confirmation and the A/B of the revert, git bisect run's only its steps. Test flake rate "
        f"{args.flake:g}; revert-bisect's --flake-rate {told}."
    ]
    tables.table("What CI's own results save (simulated incidents)", COMMAND, header, rows, notes)
    versus_header = [
        "N",
        "method",
        "k",
        "range",
        "git bisect run: runs = rounds",
        "revert-bisect: runs",
        "calibration / search / confirmation / A/B HEAD / A/B revert (mean)",
        "runs - git's",
        "runs / git's",
        "rounds",
        "rounds / git's",
        "target",
        "incidents meeting it",
    ]
    versus_notes = [
        "Each revert-bisect row beside `git bisect run` given the same GOOD and BAD (which git takes as read, as a "
        "person at a terminal would): the whole-run-green rows beside git from the last whole-run green, the "
        "per-test rows beside git from the test's own last pass. Medians over the same incidents; the differences "
        "and ratios are per incident, then their median. revert-bisect's runs: every run on the bisect runner, its "
        "confirmation and both sides of the revert's A/B included; git's: its search alone. Targets (issue 33): at "
        "k = 1 at most git's runs + 3; at k > 1 at most 1.5x git's runs in at most half its rounds."
    ]
    tables.table("Against `git bisect run` on the same range (simulated incidents)", COMMAND, versus_header, versus,
                 versus_notes)  # fmt: skip


WHOLE = "revert-bisect, whole-run green, no CI evidence"
PER_TEST = "revert-bisect, per-test history + CI evidence"
REPRODUCED = "... and the failure reproduced: endpoints taken as read"


def declared_rate(args) -> float | None:
    """The flake rate revert-bisect is told: --declare, else the test's own when it is flaky, else auto (None)."""
    if args.declare is None:
        return args.flake or None
    return None if args.declare == "auto" else float(args.declare)


def _versus_row(every, method, k, spent: list[Spent], git: list[int]) -> list[str]:
    """One revert-bisect row against git's runs on the same incidents: per-incident excess, ratios, the target."""
    med = statistics.median
    runs, rounds = [s.runs for s in spent], [s.rounds for s in spent]
    excess = [r - g for r, g in zip(runs, git)]
    ratio = [r / max(g, 1) for r, g in zip(runs, git)]
    round_ratio = [r / max(g, 1) for r, g in zip(rounds, git)]
    if k == 1:
        target, met = "<= git + 3", [e <= 3 for e in excess]
    else:
        target = "<= 1.5x git, <= 0.5x rounds"
        met = [x <= 1.5 and y <= 0.5 for x, y in zip(ratio, round_ratio)]
    kinds = [kind for kind, _ in spent[0].by_kind]
    mean = {kind: statistics.fmean(dict(s.by_kind)[kind] for s in spent) for kind in kinds}
    return [
        str(every),
        method,
        str(k),
        f"{med(s.commits for s in spent):g}",
        f"{med(git):g}",
        f"{med(runs):g}",
        " / ".join(f"{mean[kind]:.1f}" for kind in kinds),
        f"{med(excess):+g}",
        f"{med(ratio):.2f}x",
        f"{med(rounds):g}",
        f"{med(round_ratio):.2f}x",
        target,
        f"{sum(met)}/{len(met)}",
    ]


def _spent_row(every, method, k, spent: list[Spent], cost: Cost) -> list[str]:
    return _row(every, method, k, spent, [s.commits for s in spent], [s.runs for s in spent],
                [s.rounds for s in spent], [s.found for s in spent], cost)  # fmt: skip


def _row(every, method, k, cases, commits, runs, rounds, right, cost: Cost) -> list[str]:
    med = statistics.median
    gpu_hours = med(runs) * cost.run_s * cost.gpus / 3600
    hours = med(rounds) * cost.run_s / 3600
    return [
        str(every),
        method,
        str(k),
        f"{med(commits):g}",
        f"{med(runs):g}",
        f"{gpu_hours:.1f}",
        f"{hours:.1f} h",
        f"{sum(right)}/{len(cases)}",
    ]


# -- a real repository --


def real(args, command: list[str]) -> None:
    repo = Path(args.repo).resolve()
    shas = _git(repo, "rev-list", "--first-parent", "--reverse", f"{args.good}..{args.bad}").split()
    counter = Path(tempfile.mkdtemp(prefix="ci-savings-")) / "count"
    counted = [sys.executable, "-c", _COUNTER, str(counter), *command]

    def probe_at(sha: str) -> bool:
        with tempfile.TemporaryDirectory() as wt:
            _git(repo, "worktree", "add", "--detach", wt, sha)
            try:
                return subprocess.run(command, cwd=wt, capture_output=True).returncode == 0
            finally:
                _git(repo, "worktree", "remove", "--force", wt)

    ci = {sha: probe_at(sha) for sha in shas[args.every - 1 :: args.every]}
    rows = []

    def git_bisect_run(readings: dict[str, bool]) -> str:
        """`git bisect run` from GOOD and BAD, CI's readings marked first as a person would mark them (`git bisect
        good` / `bad`): the same evidence revert-bisect's row beside it is given."""
        counter.write_text("0")
        with tempfile.TemporaryDirectory() as wt:
            _git(repo, "worktree", "add", "--detach", wt, args.bad)
            try:
                subprocess.run(["git", "bisect", "start", args.bad, args.good], cwd=wt, capture_output=True, check=True)
                for sha, passed in readings.items():
                    subprocess.run(["git", "bisect", "good" if passed else "bad", sha], cwd=wt, capture_output=True)
                subprocess.run(["git", "bisect", "run", *counted], cwd=wt, capture_output=True)
                subprocess.run(["git", "bisect", "reset"], cwd=wt, capture_output=True)
            finally:
                _git(repo, "worktree", "remove", "--force", wt)
        return counter.read_text()

    rows.append(["git bisect run", "1", len(shas), git_bisect_run({})])
    rows.append(["git bisect run + CI's readings (`git bisect good`/`bad`)", "1", len(shas), git_bisect_run(ci)])
    for k in args.k_list:
        for label, readings in (("revert-bisect, no CI evidence", {}), ("revert-bisect + CI evidence", ci)):
            counter.write_text("0")
            _revert_bisect(repo, args.good, args.bad, counted, k, readings)
            rows.append([label, str(k), len(shas), counter.read_text()])
    header = ["method", "k", "range (commits)", "probe runs"]
    notes = [f"CI stood in by the probe at every {args.every}th commit: {len(ci)} readings, not counted."]
    tables.table(f"What CI's own results save on {repo.name}", COMMAND, header, [[str(c) for c in r] for r in rows],
                 notes)  # fmt: skip


_COUNTER = (
    "import fcntl, subprocess, sys\n"
    "with open(sys.argv[1], 'r+') as f:\n"
    "    fcntl.flock(f, fcntl.LOCK_EX); n = int(f.read() or 0); f.seek(0); f.write(str(n + 1)); f.truncate()\n"
    "sys.exit(subprocess.run(sys.argv[2:]).returncode)\n"
)


def _revert_bisect(repo: Path, good: str, bad: str, command: list[str], k: int, ci: dict[str, bool]) -> None:
    import io

    from rich.console import Console

    from bot.adapters.git.repo import GitRepo
    from bot.adapters.store.db import connect
    from bot.adapters.store.store import Store
    from bot.cli.session import run_bisection
    from bot.domain.requests import CiReading
    from bot.service import setup
    from bot.service.config import BisectConfig

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(connect(f"sqlite:///{tmp}/bench.db"))
        config = BisectConfig(command=tuple(command), workers=k)
        readings = [CiReading(sha, ok, None, "bench") for sha, ok in ci.items()]
        loaded = setup.create(store, GitRepo(repo), good, bad, config, ci=readings)
        quiet = Console(file=io.StringIO())
        run_bisection(store, loaded, quiet, quiet)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    every = "scheduled runs every N commits (simulated: a list, default 4,12,30; --repo: one N)"
    ap.add_argument("--every", dest="every_list", type=ints, default=[4, 12, 30], help=every)
    ap.add_argument("--k", dest="k_list", type=ints, default=[1, 4, 8], help="parallel runs (default 1,4,8)")
    ap.add_argument("--incidents", type=int, default=200)
    ap.add_argument("--green-share", type=float, default=0.15, help="chance a scheduled run is green as a whole")
    ap.add_argument("--flake", type=float, default=0.0, help="the test's flake rate (0: deterministic, auto)")
    ap.add_argument(
        "--declare",
        metavar="auto|RATE",
        help="the flake rate revert-bisect is told (default: --flake's when it is not 0, else auto); "
        "0: the test declared deterministic (the policy's bisect.flake_rate: 0, the CLI's --flake-rate 0)",
    )
    ap.add_argument("--start-s", type=float, default=300.0)
    ap.add_argument("--test-s", type=float, default=250.0)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repo")
    ap.add_argument("--good")
    ap.add_argument("--bad")
    args = ap.parse_args(argv)
    if args.repo:
        if not (args.good and args.bad and command):
            ap.error("--repo needs --good, --bad and the probe after --")
        args.every = args.every_list[0]
        real(args, command)
    else:
        simulated(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
