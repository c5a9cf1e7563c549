"""Benchmark: revert-bisect against `git bisect run`, real processes and simulations.

    python bench/bisect_bench.py            # full run (~5-8 minutes on 2 cores)
    python bench/bisect_bench.py --quick    # smoke run (< 2 minutes)

Prints markdown tables to stdout (progress goes to stderr). bench/README.md explains each column.

1. Real processes, real git: synthetic repositories (scenarios.synthetic, one regression at a random
   commit per seed, a test that sleeps --sleep seconds), `git bisect start BAD GOOD && git bisect
   run TEST` against `revert-bisect bisect --workers k` run as a subprocess, on the same repository.
2. Simulation (bot.domain.bisect.simulate, no processes): accuracy with a flaky test; rounds with a
   deterministic one against ceil(log2 n) and ceil(log_(k+1) n).
3. The engine alone on 100,000 commits: time spent in `decide` per call and per probe.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.bisect.engine import decide  # noqa: E402
from bot.domain.bisect.model import Kind, Problem, Run, Settings, State, Status  # noqa: E402
from bot.domain.bisect.simulate import FlakyTest, git_bisect, linear_graph, simulate  # noqa: E402
from scenarios.synthetic import SyntheticRepo, build, random_culprit  # noqa: E402

COMMAND = "python " + shlex.join(["bench/bisect_bench.py", *sys.argv[1:]])


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def med(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def fmt(x: float, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def fmt_num(x: float) -> str:
    """A median: integer when it is one."""
    if isinstance(x, float) and math.isnan(x):
        return "-"
    return f"{x:g}" if float(x).is_integer() else f"{x:.1f}"


def ceil_log(n: int, base: int) -> int:
    """Smallest r with base**r >= n (exact, no floating point)."""
    r, reach = 0, 1
    while reach < n:
        reach *= base
        r += 1
    return r


def table(title: str, header: list[str], rows: list[list[str]], notes: list[str] = ()) -> None:
    tables.table(title, COMMAND, header, rows, notes)  # with this run's command line


# -- 1. real processes, real git ---------------------------------------------------------------


@dataclass
class GitResult:
    wall: float
    runs: int
    culprit: str | None


@dataclass
class RbResult:
    wall: float
    runs: int
    rounds: int
    by_kind: dict[str, int]
    median_run_s: float
    culprit: str | None
    status: str | None
    runs_by_kind: dict[str, int] = field(default_factory=dict)

    @property
    def search_wall(self) -> float:
        return self.by_kind.get("search", 0) * self.median_run_s


@dataclass
class Cell:
    """All seeds of one (n, tool, k)."""

    results: list = field(default_factory=list)
    correct: list[bool] = field(default_factory=list)
    search_ratio: list[float] = field(default_factory=list)
    e2e_ratio: list[float] = field(default_factory=list)
    runs_ratio: list[float] = field(default_factory=list)
    failures: int = 0


TEST_KIND = "sh"  # set from --test


def test_command(synth: SyntheticRepo) -> list[str]:
    return synth.shell_command() if TEST_KIND == "sh" else synth.command()


def run_git_bisect(synth: SyntheticRepo, work: Path) -> GitResult:
    run_log = work / "git-bisect-runs.log"
    run_log.unlink(missing_ok=True)
    env = {**os.environ, "SYNTH_RUN_LOG": str(run_log)}
    git = ["git", "-C", str(synth.path)]
    out = open(work / "git-bisect.out", "w")
    try:
        t0 = time.perf_counter()
        subprocess.run(
            [*git, "bisect", "start", synth.bad, synth.good],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=synth.path,
        )
        subprocess.run(
            [*git, "bisect", "run", *test_command(synth)],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=synth.path,
        )
        wall = time.perf_counter() - t0
        found = (
            subprocess.run(
                [*git, "rev-parse", "--verify", "--quiet", "refs/bisect/bad"], capture_output=True, text=True, env=env
            ).stdout.strip()
            or None
        )
    finally:
        subprocess.run([*git, "bisect", "reset", "--quiet"], stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()
    runs = len(run_log.read_text().splitlines()) if run_log.exists() else 0
    return GitResult(wall, runs, found)


def run_revert_bisect(
    synth: SyntheticRepo, workers: int, work: Path, db_url: str, env: dict[str, str]
) -> RbResult | None:
    out_json = work / f"rb-k{workers}.json"
    out_json.unlink(missing_ok=True)
    argv = [
        sys.executable,
        "-m",
        "bot.cli.main",
        "bisect",
        "--repo",
        str(synth.path),
        "--good",
        synth.good,
        "--bad",
        synth.bad,
        "--workers",
        str(workers),
        "--json",
        str(out_json),
        "--db",
        db_url,
        "--",
        *test_command(synth),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    if not out_json.exists():
        log(f"  revert-bisect k={workers} failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
        return None
    data = json.loads(out_json.read_text())
    # The median duration of its search steps (all steps if there were none): per-step timestamps are not in the JSON.
    ran = [s for s in data["steps"] if s["state"] in ("done", "lost")]  # the JSON lists cancelled steps too
    durations = [s["duration_s"] for s in ran if s.get("duration_s") and s["kind"] == "search"]
    durations = durations or [s["duration_s"] for s in ran if s.get("duration_s")]
    by_kind = {kind: data["runs_by_kind"].get(kind, 0) for kind in ("calibrate", "search", "confirm")}
    return RbResult(
        wall,
        data["runs"],
        data["rounds"],
        data["rounds_by_kind"],
        med(durations),
        data.get("culprit"),
        data.get("status"),
        by_kind,
    )


def real_benchmark(args: argparse.Namespace, work: Path) -> bool:
    seeds = dict(zip(args.sizes, args.seeds))
    sizes = [n for n in args.sizes if seeds[n] > 0]
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(work / "xdg-data"),
        "XDG_CACHE_HOME": str(work / "xdg-cache"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    db_url = f"sqlite:///{work / 'bench.db'}"
    # Create and migrate the store once, so no bisection below pays for the migrations.
    subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "status", "--db", db_url],
        check=True,
        capture_output=True,
        env=env,
        cwd=ROOT,
    )
    cells: dict[tuple[int, str, int], Cell] = {}
    ok = True
    for n in sizes:
        for seed in range(seeds[n]):
            culprit = random_culprit(n, seed)
            t0 = time.perf_counter()
            synth = build(work / f"n{n}-s{seed}" / "repo", n, culprit, sleep=args.sleep, flake=args.flake)
            case = synth.path.parent
            log(f"n={n} seed={seed}: culprit at commit {culprit} (repository built in {time.perf_counter() - t0:.1f}s)")
            try:
                git_res = run_git_bisect(synth, case)
            except subprocess.CalledProcessError as exc:
                log(f"  git bisect failed: {exc}")
                ok = False
                cells.setdefault((n, "git", 1), Cell()).failures += 1
                continue
            cell = cells.setdefault((n, "git", 1), Cell())
            cell.results.append(git_res)
            cell.correct.append(git_res.culprit == synth.culprit)
            cell.search_ratio.append(1.0)
            cell.e2e_ratio.append(1.0)
            cell.runs_ratio.append(1.0)
            log(
                f"  git bisect run: {git_res.runs} runs, {git_res.wall:.1f}s, "
                f"{'correct' if git_res.culprit == synth.culprit else 'WRONG'}"
            )
            for k in args.workers:
                res = run_revert_bisect(synth, k, case, db_url, env)
                cell = cells.setdefault((n, "rb", k), Cell())
                if res is None:
                    ok = False
                    cell.failures += 1
                    cell.correct.append(False)
                    continue
                cell.results.append(res)
                cell.correct.append(res.culprit == synth.culprit and res.status == Status.FOUND.value)
                cell.search_ratio.append(res.search_wall / git_res.wall)
                cell.e2e_ratio.append(res.wall / git_res.wall)
                cell.runs_ratio.append(res.runs / git_res.runs)
                log(
                    f"  revert-bisect k={k}: {res.runs} runs, rounds {res.by_kind}, {res.wall:.1f}s, {res.status}, "
                    f"{'correct' if cell.correct[-1] else 'WRONG'}"
                )
            if not args.keep:
                shutil.rmtree(case, ignore_errors=True)
    rows = []
    for n in sizes:
        for key in [(n, "git", 1)] + [(n, "rb", k) for k in args.workers]:
            cell = cells.get(key)
            if cell is None:
                continue
            _, tool, k = key
            acc = f"{sum(cell.correct)}/{len(cell.correct)}" + (f" ({cell.failures} crashed)" if cell.failures else "")
            if tool == "git":
                runs = [r.runs for r in cell.results]
                rows.append(
                    [
                        str(n),
                        "git bisect run",
                        "1",
                        acc,
                        fmt_num(med(runs)),
                        str(ceil_log(n, 2)),
                        fmt_num(med(runs)),
                        fmt_num(med(runs)),
                        "-",
                        "1.00",
                        "1.00",
                        "1.00",
                        fmt(med([r.wall for r in cell.results]), 1),
                    ]
                )
            else:
                rows.append(
                    [
                        str(n),
                        "revert-bisect",
                        str(k),
                        acc,
                        fmt_num(med([r.by_kind.get("search", 0) for r in cell.results])),
                        str(ceil_log(n, k + 1)),
                        fmt_num(med([r.rounds for r in cell.results])),
                        fmt_num(med([r.runs for r in cell.results])),
                        " + ".join(
                            fmt_num(med([r.runs_by_kind[kind] for r in cell.results]))
                            for kind in ("calibrate", "search", "confirm")
                        ),
                        fmt(med(cell.runs_ratio)),
                        fmt(med(cell.search_ratio)),
                        fmt(med(cell.e2e_ratio)),
                        fmt(med([r.wall for r in cell.results]), 1),
                    ]
                )
    seeds_txt = ", ".join(f"n={n}: {seeds[n]}" for n in sizes)
    table(
        f"Real processes and git: revert-bisect vs `git bisect run` (test: {TEST_KIND} script sleeping "
        f"{args.sleep:g}s, flake {args.flake:g}; seeds {seeds_txt}; {os.cpu_count()} CPUs)",
        [
            "n",
            "tool",
            "k",
            "accuracy (culprit == expected)",
            "search rounds (median; JSON rounds_by_kind.search; git: runs)",
            "ideal ceil(log_(k+1) n)",
            "all rounds (median; calibrate+search+confirm)",
            "test runs (median; JSON runs; git: lines in SYNTH_RUN_LOG)",
            "calibration + search + confirmation runs (medians)",
            "test runs / git (median of per-seed ratios)",
            "search wall / git (median of per-seed ratios; estimate: search rounds x median search-step duration_s, "
            "over git's measured wall)",
            "end-to-end wall / git (median of per-seed ratios; measured CLI process wall / git's measured wall)",
            "end-to-end s (median, measured)",
        ],
        rows,
        [
            "git's wall clock is measured around `git bisect start BAD GOOD` + `git bisect run TEST` (checkouts "
            "included). revert-bisect's end-to-end wall is the whole `python -m bot.cli.main bisect` process: "
            "interpreter start, store, worktree creation and removal, calibration, search and confirmation. Its search "
            "wall is an estimate: the JSON has no step timestamps, so it is (search rounds) x (median duration_s of "
            "its search steps; a step's duration includes its worktree checkout). Ratios below 1 mean faster than "
            "`git bisect run`. Rounds are the distinct round numbers the driver gave its steps: a step dispatched on "
            "its own while a round-mate is still running starts a new round."
        ],
    )
    return ok


# -- 2. simulation ------------------------------------------------------------------------------


def flaky_accuracy(seeds: int, n: int = 64, flake: float = 0.05) -> None:
    rows = []
    cases = [
        (f"flake_rate={flake:g} (declared)", Settings(flake_rate=flake)),
        ("auto, --check-good", Settings()),
        ("auto (the CLI's default: GOOD as read)", Settings(good_as_read=True)),
    ]
    for label, settings in cases:
        for k in (1, 2, 3, 4):
            correct = wrong = 0
            runs = rounds = search = 0
            for seed in range(seeds):
                rng = random.Random(seed)
                culprit = rng.randint(1, n)
                res = simulate(n, FlakyTest(culprit, flake, random.Random(10_000 + seed)), k, settings)
                found = res.outcome.status is Status.FOUND
                correct += found and res.culprit_index() == culprit
                wrong += found and res.culprit_index() != culprit
                runs += res.runs
                rounds += res.total_rounds
                search += res.rounds[Kind.SEARCH]
            rows.append(
                [
                    f"revert-bisect, {label}",
                    str(k),
                    f"{100 * correct / seeds:.1f}%",
                    f"{100 * wrong / seeds:.1f}%",
                    f"{100 * (seeds - correct - wrong) / seeds:.1f}%",
                    f"{runs / seeds:.1f}",
                    f"{rounds / seeds:.1f}",
                    f"{search / seeds:.1f}",
                ]
            )
    correct = runs = 0
    for seed in range(seeds):
        culprit = random.Random(seed).randint(1, n)
        found, used = git_bisect(n, FlakyTest(culprit, flake, random.Random(10_000 + seed)))
        correct += found == culprit
        runs += used
    rows.append(
        [
            "`git_bisect` model (one run per step, no repeats)",
            "1",
            f"{100 * correct / seeds:.1f}%",
            f"{100 * (seeds - correct) / seeds:.1f}%",
            "0.0%",
            f"{runs / seeds:.1f}",
            f"{runs / seeds:.1f}",
            f"{runs / seeds:.1f}",
        ]
    )
    table(
        f"Simulation: accuracy with a flaky test ({n} commits, a good commit fails {100 * flake:g}% of the time, "
        f"{seeds} seeds; culprit uniform per seed)",
        [
            "tool / settings",
            "k",
            "accuracy (found & correct)",
            "wrong answer (found, not the culprit)",
            "no answer (ambiguous/inconclusive/no culprit)",
            "mean test runs",
            "mean rounds (all kinds)",
            "mean search rounds",
        ],
        rows,
        [
            "Each seed draws the culprit and the flaky test's random stream; every row uses the same seeds. "
            "bot.domain.bisect.simulate runs the engine in synchronous rounds of k runs; `git_bisect` is its model of "
            "`git bisect run` (BAD and GOOD taken on trust, one run per midpoint)."
        ],
    )


def deterministic_rounds(seeds: int) -> None:
    s = Settings()
    rows = []
    for n in (64, 512, 4096):
        culprits = [random.Random(seed).randint(1, n) for seed in range(seeds)]
        git_runs = [git_bisect(n, FlakyTest(c))[1] for c in culprits]
        git_ok = sum(git_bisect(n, FlakyTest(c))[0] == c for c in culprits)
        rows.append(
            [
                str(n),
                "`git_bisect` model",
                "1",
                f"{fmt_num(med(git_runs))} / {max(git_runs)}",
                fmt_num(med(git_runs)),
                fmt_num(med(git_runs)),
                str(ceil_log(n, 2)),
                str(ceil_log(n, 2)),
                f"{100 * git_ok / seeds:.1f}%",
            ]
        )
        for k in (1, 2, 3, 4):
            results = [simulate(n, FlakyTest(c), k) for c in culprits]
            search = [r.rounds[Kind.SEARCH] for r in results]
            correct = sum(
                r.outcome.status is Status.FOUND and r.culprit_index() == c for r, c in zip(results, culprits)
            )
            rows.append(
                [
                    str(n),
                    "revert-bisect (auto)",
                    str(k),
                    f"{fmt_num(med(search))} / {max(search)}",
                    fmt_num(med([r.total_rounds for r in results])),
                    fmt_num(med([r.runs for r in results])),
                    str(ceil_log(n, 2)),
                    str(ceil_log(n, k + 1)),
                    f"{100 * correct / seeds:.1f}%",
                ]
            )
    table(
        f"Simulation: rounds with a deterministic test ({seeds} seeds per n; default Settings(), i.e. flake rate auto)",
        [
            "n",
            "tool",
            "k",
            "search rounds median / max (git: runs)",
            "all rounds median (calibrate+search+confirm)",
            "test runs median",
            "ceil(log2 n)",
            "ceil(log_(k+1) n)",
            "accuracy",
        ],
        rows,
        [
            "With nothing contradicting a deterministic test, revert-bisect (auto) adds one calibration run on each "
            "endpoint and one re-run of the culprit to the search; `git bisect run` does neither. With k > 2 the "
            "search starts on the runners calibration leaves free, in the same round. With k > 1 the search probes k "
            "commits per round, so it runs more tests in fewer rounds. A round holding calibration and search counts "
            f"once in all rounds. Once a result contradicts, the endpoints get {s.calibration_runs} runs each and "
            "culprit and parent x = ceil(log(1-C)/log f) re-runs each, as for a declared flake rate."
        ],
    )


def _target(k: int, runs: float, git_runs: float) -> str:
    """Issue 23's targets for the CLI's default on a deterministic test: git's runs + 2 at k = 1, 1.5x at k = 3."""
    if k == 1:
        return f"<= git + 2: {'met' if runs <= git_runs + 2 else 'MISSED'}"
    if k == 3:
        return f"<= 1.5x: {'met' if runs <= 1.5 * git_runs else 'MISSED'}"
    return "-"


def versus_git(seeds: int, sizes: tuple[int, ...] = (64, 240, 512), workers: tuple[int, ...] = (1, 3, 4)) -> None:
    """Test runs and rounds against `git bisect run` on a deterministic test, per flake setting."""
    rows = []
    for n in sizes:
        culprits = [random.Random(seed).randint(1, n) for seed in range(seeds)]
        git = [git_bisect(n, FlakyTest(c)) for c in culprits]
        git_runs = med([used for _, used in git])
        git_ok = sum(found == c for (found, _), c in zip(git, culprits))
        rows.append(
            [
                str(n),
                "`git bisect run` (model)",
                "1",
                fmt_num(git_runs),
                "-",
                fmt_num(git_runs),
                "1.00",
                "-",
                f"{100 * git_ok / seeds:.1f}%",
            ]
        )
        for label, settings in (
            ("auto (the CLI's default: BAD reproduced, GOOD as read)", Settings(good_as_read=True)),
            ("auto --check-good", Settings()),
            ("0", Settings(flake_rate=0.0, good_as_read=True)),
        ):
            for k in workers:
                results = [simulate(n, FlakyTest(c), k, settings) for c in culprits]
                runs = med([r.runs for r in results])
                split = " + ".join(
                    fmt_num(med([r.runs_by_kind[kind] for r in results]))
                    for kind in (Kind.CALIBRATE, Kind.SEARCH, Kind.CONFIRM)
                )
                ratio = runs / git_runs
                target = _target(k, runs, git_runs) if settings.good_as_read and settings.flake_rate is None else "-"
                correct = sum(
                    r.outcome.status is Status.FOUND and r.culprit_index() == c for r, c in zip(results, culprits)
                )
                rows.append(
                    [
                        str(n),
                        f"revert-bisect, --flake-rate {label}",
                        str(k),
                        fmt_num(runs),
                        split,
                        fmt_num(med([r.total_rounds for r in results])),
                        f"{ratio:.2f}",
                        target,
                        f"{100 * correct / seeds:.1f}%",
                    ]
                )
    table(
        f"Simulation: test runs and rounds against `git bisect run`, deterministic test "
        f"({seeds} seeds per n, culprit uniform)",
        [
            "n",
            "tool",
            "k",
            "test runs (median)",
            "calibration + search + confirmation runs (medians)",
            "rounds (median)",
            "runs / git",
            "target (issue 23)",
            "accuracy",
        ],
        rows,
        [
            "bot.domain.bisect.simulate runs the engine in synchronous rounds of k runs; `git_bisect` is its model of "
            "`git bisect run` (one run per midpoint, endpoints taken on trust), which the real-process table matches. "
            "A round holding calibration and search runs counts once. Targets (issue 23, the CLI's default): at most "
            "git's runs + 2 at k = 1 (BAD reproduced, the culprit confirmed), 1.5x git's at k = 3."
        ],
    )


# -- 3. the engine alone ------------------------------------------------------------------------


def engine_timing(n: int, workers: int, seeds: int) -> None:
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings())
    t0 = time.perf_counter()
    problem.scope(())  # the first-parent candidate list: built once per bisection, O(n)
    setup_ms = 1000 * (time.perf_counter() - t0)
    call_ms: list[float] = []
    probe_ms: list[float] = []
    probes_total = 0
    for seed in range(seeds):
        culprit = random.Random(seed).randint(1, n)
        test = FlakyTest(culprit)
        state, runs = State(), []
        while True:
            t0 = time.perf_counter()
            decision = decide(problem, state, runs, (), workers)
            ms = 1000 * (time.perf_counter() - t0)
            call_ms.append(ms)
            state = decision.state
            if decision.outcome is not None:
                assert decision.outcome.status is Status.FOUND and int(decision.outcome.culprit[1:]) == culprit, (
                    decision.outcome
                )
                break
            probe_ms.append(ms / len(decision.probes))
            probes_total += len(decision.probes)
            runs += [Run(p.sha, p.kind, test.run(p.sha), p.round) for p in decision.probes]
    table(
        f"Engine alone: `decide` on {n:,} commits, k={workers}, deterministic test, {seeds} full search(es) "
        "(synchronous rounds)",
        [
            "n",
            "k",
            "candidate list, once (ms)",
            "decide calls",
            "probes planned",
            "ms per call (median)",
            "ms per call (max)",
            "ms per probe (median)",
            "ms per probe (max)",
            "total decide s",
        ],
        [
            [
                f"{n:,}",
                str(workers),
                fmt(setup_ms),
                str(len(call_ms)),
                str(probes_total),
                fmt(med(call_ms)),
                fmt(max(call_ms)),
                fmt(med(probe_ms)),
                fmt(max(probe_ms)),
                fmt(sum(call_ms) / 1000, 3),
            ]
        ],
        [
            "Wall time of each `decide(problem, state, runs, (), k)` call along whole searches (linear_graph from "
            "bot.domain.bisect.simulate; building the graph is not timed). The first-parent candidate list is built "
            "once per bisection and timed on its own. Per probe: a call's time divided by the probes it returned "
            "(calls that finish return none and are left out of that column)."
        ],
    )


# -- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="2/1/0 seeds for n=64/512/4096 (skip 4096), fewer simulated seeds"
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[64, 512, 4096],
        help="range sizes of the real benchmark (default 64,512,4096)",
    )
    parser.add_argument(
        "--seeds",
        type=lambda s: [int(x) for x in s.split(",")],
        help="seeds per size of the real benchmark, e.g. 5,5,2 (the default; --quick: 2,1,0)",
    )
    parser.add_argument(
        "--workers",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 2, 4],
        help="revert-bisect worker counts (default 1,2,4)",
    )
    parser.add_argument("--sleep", type=float, default=0.25, help="seconds each real test run sleeps (default 0.25)")
    parser.add_argument(
        "--test",
        choices=["sh", "python"],
        default="sh",
        help="the synthetic test as /bin/sh (default) or Python; both tools run the same one",
    )
    parser.add_argument(
        "--flake", type=float, default=0.0, help="chance a good commit's real test run fails (default 0: deterministic)"
    )
    parser.add_argument(
        "--sim-seeds",
        type=int,
        help="seeds of the flaky simulation (default 10000, known to about +-0.1%%; --quick: 1000)",
    )
    parser.add_argument(
        "--det-seeds", type=int, help="seeds per n of the deterministic simulation (default 200; --quick: 50)"
    )
    parser.add_argument("--engine-n", type=int, default=100_000, help="commits for the engine timing (default 100000)")
    parser.add_argument("--engine-seeds", type=int, help="full searches timed (default 3; --quick: 1)")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where the run's temporary directory (repositories, worktrees, store) is made "
        "(default: the system temp dir); e.g. /dev/shm to take disk speed out",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--only", choices=["real", "sim", "engine"], action="append", help="run only these parts (repeatable)"
    )
    args = parser.parse_args()
    global TEST_KIND
    TEST_KIND = args.test
    args.seeds = args.seeds or ([2, 1, 0] if args.quick else [5, 5, 2])
    if len(args.seeds) != len(args.sizes):
        parser.error(f"--seeds takes one number per size ({len(args.sizes)}: for n={','.join(map(str, args.sizes))})")
    args.det_seeds = args.det_seeds or (50 if args.quick else 200)
    args.sim_seeds = args.sim_seeds or (1000 if args.quick else 10_000)
    args.engine_seeds = args.engine_seeds or (1 if args.quick else 3)
    parts = set(args.only or ["real", "sim", "engine"])

    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"## revert-bisect benchmark\n\n{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, {git_version}\n"
    )
    started = time.perf_counter()
    ok = True
    if "real" in parts:
        if args.workdir:
            args.workdir.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="revert-bisect-bench-", dir=args.workdir))
        try:
            ok = real_benchmark(args, work)
        finally:
            if not args.keep:
                shutil.rmtree(work, ignore_errors=True)
            else:
                log(f"work directory kept: {work}")
    if "sim" in parts:
        log(f"simulating {args.sim_seeds} flaky searches per row ...")
        flaky_accuracy(args.sim_seeds)
        log(f"simulating deterministic searches ({args.det_seeds} seeds per n) ...")
        deterministic_rounds(args.det_seeds)
        versus_git(args.det_seeds)
    if "engine" in parts:
        log(f"timing the engine on {args.engine_n:,} commits ...")
        engine_timing(args.engine_n, 4, args.engine_seeds)
    print(f"_Total benchmark time: {time.perf_counter() - started:.0f}s._")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
