"""Load benchmark: the webhook endpoint of `revert-bisect serve`, one or more replicas on one store.

    python bench/load_bench.py                      # 200 req/s for 30 s, 10% duplicates, 1 and 3 replicas, PostgreSQL
    python bench/load_bench.py --rate 100 --seconds 10 --replicas 1 --db sqlite

Prints a markdown table to stdout (progress goes to stderr). bench/README.md explains the columns.

For each replica count, the benchmark starts that many `revert-bisect serve` processes (separate
ports, text logs to files, no GitHub credentials and so no worker) on one fresh store: a new
PostgreSQL schema (created and dropped here) or a new SQLite file. It then drives an open-loop
load: request i is planned at start + i/rate and fired at that time whatever the server is doing,
round-robin over the replicas, with real signed payloads from tests/fixtures/github/webhooks. A
`--dup` fraction re-sends the delivery id (and body) of an earlier delivery to another replica.
Latency runs from the planned send time to the answer, so queueing shows up in it. Afterwards the
rows of `deliveries` are compared with the delivery ids that got a 2xx answer: an acknowledged id
that is not stored is lost. The exit status is 1 when any delivery was lost (or a replica did not
start), and 0 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import sqlalchemy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.adapters.store.db import connect  # noqa: E402
from bot.ingress.webhooks.signature import sign  # noqa: E402
from sandbox.net import free_port  # noqa: E402

COMMAND = "python " + shlex.join(["bench/load_bench.py", *sys.argv[1:]])
HOOKS = ROOT / "tests" / "fixtures" / "github" / "webhooks"
PG_URL = os.environ.get("REVERT_BISECT_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SECRET = "load-bench-" + uuid.uuid4().hex
NPROC = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
SHARDS = 32  # httpx clients per replica (see drive)
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt(x: float, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile (q=0.5: the median, the lower middle for an even count)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def table(title: str, header: list[str], rows: list[list[str]], notes: list[str] = ()) -> None:
    tables.table(title, COMMAND, header, rows, notes)  # with this run's command line


# -- the payloads and the plan -------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    event: str
    body: bytes
    signature: str


def load_payloads() -> list[Payload]:
    """Every fixture but ping (ping answers 200 "pong"; the others are real events, answered 202)."""
    out = []
    for path in sorted(HOOKS.glob("*.json")):
        event = path.name.split(".")[0]
        if event == "ping":
            continue
        body = json.dumps(json.loads(path.read_text())).encode()
        out.append(Payload(event, body, sign(SECRET.encode(), body)))
    return out


@dataclass(frozen=True)
class Planned:
    index: int
    replica: int
    delivery: str
    payload: Payload
    duplicate: bool


def make_plan(n: int, replicas: int, dup: float, payloads: list[Payload], seed: int, window: int) -> list[Planned]:
    """n requests; request i goes to replica i % replicas, except a duplicate, which goes to the replica
    after the one its original went to. A duplicate re-sends one of the last `window` originals."""
    rng = random.Random(seed)
    plan: list[Planned] = []
    originals: list[Planned] = []
    for i in range(n):
        if originals and rng.random() < dup:
            orig = rng.choice(originals[-window:])
            plan.append(Planned(i, (orig.replica + 1) % replicas, orig.delivery, orig.payload, True))
        else:
            req = Planned(i, i % replicas, str(uuid.uuid4()), rng.choice(payloads), False)
            originals.append(req)
            plan.append(req)
    return plan


# -- the servers ---------------------------------------------------------------------------------


@dataclass
class Replica:
    url: str
    proc: subprocess.Popen
    log_path: Path

    def cpu_s(self) -> float:
        """user + system CPU seconds of the process so far (Linux /proc)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / TICK
        except (OSError, IndexError, ValueError):
            return math.nan


def server_env(work: Path, n: int, code: Path = ROOT) -> dict[str, str]:
    # No GitHub credentials (none inherited either): the service records deliveries and runs no worker.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVERT_BISECT_")}
    env.update(
        REVERT_BISECT_WEBHOOK_SECRET=SECRET,
        REVERT_BISECT_POLICIES=str(ROOT / "policies"),
        XDG_DATA_HOME=str(work / f"data-{n}"),
        XDG_CACHE_HOME=str(work / f"cache-{n}"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(code), os.environ.get("PYTHONPATH")])),
    )
    return env


def log_format_args(code: Path = ROOT) -> list[str]:
    """`--log-format text` when this version of `serve` has the option (JSON logs are the default)."""
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        cwd=code,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(code)},
    )
    return ["--log-format", "text"] if "--log-format" in out.stdout else []


def start_replicas(count: int, db_url: str, work: Path, extra: list[str], code: Path = ROOT) -> list[Replica]:
    replicas = []
    for n in range(count):
        port = free_port()
        log_path = work / f"replica-{n}.log"
        out = open(log_path, "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--db", db_url, *extra],
            env=server_env(work, n, code),
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=code,
        )
        out.close()
        replicas.append(Replica(f"http://127.0.0.1:{port}", proc, log_path))
    return replicas


def wait_healthy(replicas: list[Replica], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for r in replicas:
        while True:
            if r.proc.poll() is not None:
                raise RuntimeError(f"replica {r.url} exited ({r.proc.returncode}):\n{r.log_path.read_text()[-2000:]}")
            try:
                answer = httpx.get(r.url + "/healthz", timeout=1)
                if answer.status_code == 200:
                    if answer.json().get("worker"):
                        log(f"  warning: {r.url} runs a worker (GitHub credentials in the environment?)")
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"replica {r.url} not healthy after {timeout:.0f}s:\n{r.log_path.read_text()[-2000:]}"
                )
            time.sleep(0.2)


def stop_replicas(replicas: list[Replica]) -> None:
    for r in replicas:
        if r.proc.poll() is None:
            r.proc.terminate()
    for r in replicas:
        try:
            r.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            r.proc.kill()
            r.proc.wait()


# -- the load ------------------------------------------------------------------------------------


@dataclass
class Result:
    req: Planned
    lag: float  # fired - planned (the generator's own delay), seconds
    latency: float  # answer - planned, seconds
    status: int | None  # None: no answer (timeout, connection error)
    error: str | None = None


@dataclass
class RunStats:
    results: list[Result] = field(default_factory=list)
    span: float = math.nan  # first fire to last fire, seconds
    wall: float = math.nan  # first planned time to last answer, seconds
    gen_cpu: float = math.nan
    server_cpu: float = math.nan
    load: tuple[float, float] = (math.nan, math.nan)  # the machine's 1-minute load average before and after


async def drive(plan: list[Planned], urls: list[str], rate: float, timeout: float) -> RunStats:
    """Fire request i at start + i/rate (late ones at once, never skipped), without waiting for answers."""
    # httpcore's pool does work per waiting request on every change, so one pool with thousands of
    # requests in flight (a saturated server) costs the generator more CPU than the servers use. Each
    # replica gets SHARDS clients instead, request i using shard i // replicas % SHARDS.
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
    tls = httpx.create_ssl_context()  # plain http; one context instead of one per client
    clients = [
        [
            httpx.AsyncClient(base_url=u, limits=limits, timeout=httpx.Timeout(timeout), verify=tls)
            for _ in range(SHARDS)
        ]
        for u in urls
    ]
    loop = asyncio.get_running_loop()
    results: list[Result] = []
    fired: list[float] = []

    async def fire(req: Planned, planned: float) -> None:
        start = loop.time()
        headers = {
            "X-GitHub-Event": req.payload.event,
            "X-GitHub-Delivery": req.delivery,
            "X-Hub-Signature-256": req.payload.signature,
            "Content-Type": "application/json",
        }
        status, error = None, None
        try:
            client = clients[req.replica][req.index // len(urls) % SHARDS]
            status = (await client.post("/webhooks/github", content=req.payload.body, headers=headers)).status_code
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        results.append(Result(req, start - planned, loop.time() - planned, status, error))

    try:
        tasks = []
        t0 = loop.time() + 0.1
        for req in plan:
            planned = t0 + req.index / rate
            delay = planned - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            fired.append(loop.time())
            tasks.append(asyncio.create_task(fire(req, planned)))
        await asyncio.gather(*tasks)
        end = loop.time()
    finally:
        for shard in clients:
            for c in shard:
                await c.aclose()
    stats = RunStats(results)
    stats.span = fired[-1] - fired[0] if len(fired) > 1 else math.nan
    stats.wall = end - t0
    return stats


# -- the stores ----------------------------------------------------------------------------------


class PgSchema:
    """A fresh schema on the PostgreSQL server, dropped on exit."""

    def __init__(self, label: str):
        self.schema = f"rb_load_{label}_{uuid.uuid4().hex[:8]}"
        self.admin = sqlalchemy.create_engine(PG_URL)
        self.url = f"{PG_URL}?options=-csearch_path%3D{self.schema}"

    def __enter__(self) -> str:
        with self.admin.begin() as conn:
            conn.execute(sqlalchemy.text(f'CREATE SCHEMA "{self.schema}"'))
        return self.url

    def __exit__(self, *exc) -> None:
        with self.admin.begin() as conn:
            conn.execute(sqlalchemy.text(f'DROP SCHEMA "{self.schema}" CASCADE'))
        self.admin.dispose()


class SqliteFile:
    def __init__(self, work: Path, label: str):
        self.path = work / f"load-{label}.db"
        self.url = f"sqlite:///{self.path}"

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *exc) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)


def stored_ids(db_url: str) -> tuple[int, set[str]]:
    engine = sqlalchemy.create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = [r[0] for r in conn.execute(sqlalchemy.text("SELECT delivery_id FROM deliveries"))]
    finally:
        engine.dispose()
    return len(rows), set(rows)


# -- the code under test --------------------------------------------------------------------------


@dataclass(frozen=True)
class Code:
    label: str
    path: Path  # the tree `serve` runs from (PYTHONPATH and working directory)
    extra: tuple[str, ...]  # `serve` options this version has


def baseline_tree(ref: str, work: Path) -> Code:
    """A detached worktree of `ref` (e.g. main): the previous code, served by the same interpreter."""
    path = work / "baseline"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref], check=True, capture_output=True
    )
    sha = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return Code(f"{ref} ({sha})", path, tuple(log_format_args(path)))


def remove_tree(code: Code) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(code.path)], capture_output=True)


# -- one replica count ---------------------------------------------------------------------------


@dataclass
class Row:
    code: str
    replicas: int
    rate: float
    stats: RunStats
    rows: int
    accepted: int
    lost: int
    stored_unacked: int

    def p99(self) -> float:
        return quantile([r.latency * 1000 for r in self.stats.results if r.status is not None], 0.99)

    def unanswered(self) -> int:
        return sum(1 for r in self.stats.results if r.status is None)

    def cpu_ms_per_delivery(self) -> float:
        """Server CPU (all replicas) per answered request, in ms."""
        answered = sum(1 for r in self.stats.results if r.status is not None)
        return 1000 * self.stats.server_cpu / answered if answered else math.nan


def run_one(
    count: int, rate: float, seconds: float, code: Code, args: argparse.Namespace, payloads: list[Payload], work: Path
) -> Row:
    label = f"{len(list(work.iterdir()))}-r{count}"
    store = PgSchema(label.replace("-", "_")) if args.db == "postgres" else SqliteFile(work, label)
    with store as db_url:
        connect(db_url).dispose()  # create the tables once, so replicas do not race on the migrations
        (work / label).mkdir()
        replicas = start_replicas(count, db_url, work / label, list(code.extra), code.path)
        try:
            t0 = time.monotonic()
            wait_healthy(replicas)
            log(
                f"{code.label}: {count} replica(s) healthy in {time.monotonic() - t0:.1f}s: "
                f"{', '.join(r.url for r in replicas)}"
            )
            n = round(rate * seconds)
            plan = make_plan(n, count, args.dup, payloads, args.seed, window=max(1, round(rate)))
            log(
                f"  firing {n} requests at {rate:g}/s for {seconds:g}s "
                f"({sum(p.duplicate for p in plan)} duplicates) ..."
            )
            cpu0, srv0, load0 = time.process_time(), sum(r.cpu_s() for r in replicas), os.getloadavg()[0]
            stats = asyncio.run(drive(plan, [r.url for r in replicas], rate, args.timeout))
            stats.load = (load0, os.getloadavg()[0])
            stats.gen_cpu = time.process_time() - cpu0
            stats.server_cpu = sum(r.cpu_s() for r in replicas) - srv0
            for r in replicas:
                if r.proc.poll() is not None:
                    log(f"  warning: replica {r.url} exited during the run ({r.proc.returncode})")
        finally:
            stop_replicas(replicas)
        rows, ids = stored_ids(db_url)
    accepted = {r.req.delivery for r in stats.results if r.status is not None and 200 <= r.status < 300}
    row = Row(code.label, count, rate, stats, rows, len(accepted), len(accepted - ids), len(ids - accepted))
    log(
        f"  done: p99 {fmt(row.p99())} ms, {row.cpu_ms_per_delivery():.2f} ms server CPU per delivery, "
        f"{row.rows} rows stored, {row.accepted} ids acknowledged, {row.lost} lost"
    )
    return row


def report(rows: list[Row], args: argparse.Namespace) -> None:
    out = []
    notes = []
    for row in rows:
        res = row.stats.results
        answered = [r.latency * 1000 for r in res if r.status is not None]
        non2xx = sum(1 for r in res if r.status is not None and not 200 <= r.status < 300)
        achieved = (len(res) - 1) / row.stats.span if row.stats.span else math.nan
        out.append(
            [
                row.code,
                str(row.replicas),
                str(len(res)),
                f"{achieved:.1f}/s",
                fmt(quantile(answered, 0.5)),
                fmt(quantile(answered, 0.99)),
                fmt(max(answered) if answered else math.nan),
                f"{row.cpu_ms_per_delivery():.2f}",
                str(non2xx),
                str(row.lost),
                str(row.unanswered()),
                f"{row.rows} / {row.accepted}",
            ]
        )
        lag = [r.lag * 1000 for r in res]
        codes: dict[str, int] = {}
        for r in res:
            key = str(r.status) if r.status is not None else r.error or "error"
            codes[key] = codes.get(key, 0) + 1
        notes.append(
            f"{row.code}, {row.replicas} replica(s): answers "
            f"{', '.join(f'{k}: {v}' for k, v in sorted(codes.items()))}; "
            f"generator lag (fired - planned) p50 {fmt(quantile(lag, 0.5))} ms, "
            f"p99 {fmt(quantile(lag, 0.99))} ms, max {fmt(max(lag))} ms; "
            f"CPU during the run: servers {fmt(row.stats.server_cpu)} s, generator {fmt(row.stats.gen_cpu)} s "
            f"(of {fmt(row.stats.wall * NPROC)} CPU-s available in {fmt(row.stats.wall)} s wall); "
            f"stored but not acknowledged: {row.stored_unacked}; machine load average (1 min) "
            f"{row.stats.load[0]:.1f} before, {row.stats.load[1]:.1f} after (other work on the machine counts in it)."
        )
    table(
        f"Webhook load: {args.rate:g} req/s offered for {args.seconds:g} s, {100 * args.dup:g}% duplicate deliveries, "
        f"store {store_label(args)}",
        [
            "code",
            "replicas",
            "requests",
            "achieved rate (fired)",
            "p50 ack ms",
            "p99 ack ms",
            "max ms",
            "server CPU ms / delivery",
            "non-2xx",
            "lost",
            "errors (no answer)",
            "rows stored / ids acked",
        ],
        out,
        [
            f"Machine: nproc = {NPROC} ({platform.platform()}, Python {platform.python_version()}); "
            "the load generator, the replicas and the database share these CPUs.",
            "Latency is measured from each request's planned send time to its answer (open loop: a slow server does "
            "not slow the generator down, so queueing is included). Percentiles are nearest-rank over every answered "
            f"request of the run; requests without an answer within {args.timeout:g} s are counted under errors. "
            "lost = delivery ids that got a 2xx but have no row in `deliveries`. Server CPU per delivery: user + "
            "system CPU of the replica processes during the run (/proc) over the requests they answered.",
            *notes,
        ],
    )


def store_label(args: argparse.Namespace) -> str:
    if args.db == "postgres":
        return "PostgreSQL (a fresh schema per run)"
    return "SQLite (a fresh file per run, WAL)"


def knee(
    count: int, code: Code, args: argparse.Namespace, payloads: list[Payload], work: Path
) -> tuple[list[Row], float | None, float | None]:
    """Rates from --knee-from, doubling until p99 reaches 1 s (or answers go missing) -- or halving, down to 25/s,
    while the first ones do -- then the midpoint once: (the runs, the highest rate under 1 s, the lowest at or over
    it)."""
    runs: list[Row] = []
    under, over = None, None

    def probe(rate: float) -> bool:
        row = run_one(count, rate, args.knee_seconds, code, args, payloads, work)
        runs.append(row)
        return row.p99() < 1000 and not row.unanswered()

    rate = args.knee_from
    while rate <= args.knee_max:
        if probe(rate):
            under = rate
            rate *= 2
        else:
            over = rate
            break
    while under is None and over is not None and over / 2 >= 25:
        if probe(over / 2):
            under = over / 2
        else:
            over = over / 2
    if under is not None and over is not None:
        mid = round((under + over) / 2)
        if probe(mid):
            under = mid
        else:
            over = mid
    return runs, under, over


def report_knee(
    results: list[tuple[Code, int, list[Row], float | None, float | None]], args: argparse.Namespace
) -> None:
    out = []
    for code, count, runs, under, over in results:
        tried = ", ".join(
            f"{r.rate:g}/s: {fmt(r.p99(), 0)} ms" + (f" ({r.unanswered()} unanswered)" if r.unanswered() else "")
            for r in runs
        )
        crossing = (
            f"between {under:g} and {over:g}/s"
            if under is not None and over is not None
            else f"above {under:g}/s (not reached)"
            if under is not None
            else f"at or below {over:g}/s"
        )
        loads = ", ".join(f"{r.stats.load[1]:.1f}" for r in runs)
        out.append([code.label, str(count), crossing, tried, loads])
    table(
        f"Where p99 crosses 1 s: {args.knee_seconds:g} s per rate, {100 * args.dup:g}% duplicates, "
        f"store {store_label(args)}",
        ["code", "replicas", "p99 reaches 1 s", "p99 at each rate tried", "load average after each"],
        out,
        [
            f"Rates from {args.knee_from:g}/s, doubled until p99 >= 1 s or a request went unanswered within "
            f"{args.timeout:g} s (halved instead, down to 25/s, while the first rate already did), then the midpoint "
            "once. The generator shares the {NPROC} CPUs: at the high rates "
            "it takes a share of them itself, so these are the rates this machine sustains, not one replica alone."
        ],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200, help="requests per second offered (default 200)")
    parser.add_argument("--seconds", type=float, default=30, help="length of the load per replica count (default 30)")
    parser.add_argument(
        "--dup", type=float, default=0.1, help="fraction of requests that re-send an earlier delivery id (default 0.1)"
    )
    parser.add_argument(
        "--replicas", type=lambda s: [int(x) for x in s.split(",")], default=[1, 3], help="replica counts (default 1,3)"
    )
    parser.add_argument(
        "--db",
        choices=["postgres", "sqlite"],
        default="postgres",
        help=f"store: PostgreSQL at $REVERT_BISECT_TEST_PG (default {PG_URL}), or an SQLite file",
    )
    parser.add_argument(
        "--timeout", type=float, default=10, help="seconds before a request counts as an error (default 10)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the plan (payloads, duplicates)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (replica logs)")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also serve REF (e.g. main) from a git worktree, run for run beside this tree, in the same tables",
    )
    parser.add_argument(
        "--knee", action="store_true", help="also find the rate at which p99 crosses 1 s, per replica count and code"
    )
    parser.add_argument("--knee-from", type=float, default=200, help="the knee search's first rate (default 200)")
    parser.add_argument("--knee-max", type=float, default=3200, help="the knee search's highest rate (default 3200)")
    parser.add_argument("--knee-seconds", type=float, default=10, help="seconds of load per knee rate (default 10)")
    args = parser.parse_args()
    if args.rate <= 0 or args.seconds <= 0 or not 0 <= args.dup < 1 or min(args.replicas) < 1:
        parser.error("--rate and --seconds must be positive, --dup in [0, 1), replica counts at least 1")

    print(
        f"## revert-bisect webhook load benchmark\n\n{platform.platform()}, nproc {NPROC}, Python "
        f"{platform.python_version()}\n"
    )
    payloads = load_payloads()
    work = Path(tempfile.mkdtemp(prefix="revert-bisect-load-"))
    codes = [Code("this tree", ROOT, tuple(log_format_args()))]
    log(f"{len(payloads)} payloads ({', '.join(sorted({p.event for p in payloads}))})")
    rows: list[Row] = []
    knees: list[tuple[Code, int, list[Row], float | None, float | None]] = []
    ok = True
    try:
        if args.baseline:
            codes.insert(0, baseline_tree(args.baseline, work))
        for count in args.replicas:
            for code in codes:
                try:
                    rows.append(run_one(count, args.rate, args.seconds, code, args, payloads, work))
                except RuntimeError as exc:
                    log(f"{code.label}, replicas={count}: {exc}")
                    ok = False
        if args.knee:
            for count in args.replicas:
                for code in codes:
                    try:
                        knees.append((code, count, *knee(count, code, args, payloads, work)))
                    except RuntimeError as exc:
                        log(f"{code.label}, replicas={count}: {exc}")
                        ok = False
    finally:
        for code in codes[:-1]:
            remove_tree(code)
        if args.keep:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if rows:
        report(rows, args)
    if knees:
        report_knee(knees, args)
    lost = sum(r.lost for r in rows) + sum(r.lost for *_, runs, _u, _o in knees for r in runs)
    if lost:
        log(f"LOST {lost} acknowledged deliveries")
    return 1 if lost or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
