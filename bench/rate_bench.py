"""The Actions backend's GitHub API budget: a 20-step bisection, 10 minutes a step, today's code against a baseline.

Both sides run the real backend (bot.adapters.dispatch.actions) and the real PyGithub adapter
(bot.adapters.github.actions) -- the baseline's two files taken from git at `--baseline` -- against a
small GitHub Actions API on loopback that answers with ETags and 304s as GitHub does, on a simulated
clock (so an hour of bisection takes seconds). The repository also sends the webhooks a busy one
does: every `workflow_run`/`workflow_job` event of its own CI (`--events-per-day`, SGLang's order of
magnitude by default) besides those of the bisection's own runs.

Artifact reads are not compared (both sides read each step's result.json the same way, 2 requests).

    python bench/rate_bench.py                 # k=4, 20 steps of 600 s, 4,000 events a day
    python bench/rate_bench.py --parallel 8 --steps 40
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import subprocess
import sys
import threading
import types
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from github import Auth, Github

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.tables import table  # noqa: E402
from runners import result as result_json  # noqa: E402
from runners.spec import StepResult, StepSpec  # noqa: E402

BASELINE = "161b8c9"  # the last commit before webhooks woke only their run's poller and polls became conditional
LIMIT_PER_HOUR = 5000
SLUG = "o/r"


# -- a simulated clock and the Actions API on it --


@dataclass
class Sim:
    t: float = 0.0
    queue_s: float = 45.0  # dispatch to a runner picking the job up
    step_s: float = 600.0
    runs: dict[int, dict] = field(default_factory=dict)
    events: list[tuple[float, int | None, str]] = field(default_factory=list)  # (when, run id, title)
    calls: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    next_id: int = 5000

    def status(self, run: dict) -> tuple[str, str | None]:
        age = self.t - run["created"]
        if age < self.queue_s:
            return "queued", None
        if age < self.queue_s + self.step_s:
            return "in_progress", None
        return "completed", "failure"

    def dispatch(self, inputs: dict) -> int:
        with self.lock:
            self.next_id += 1
            run_id = self.next_id
            title = f"revert-bisect step {inputs.get('step')} [{inputs.get('correlation')}]"
            self.runs[run_id] = {"created": self.t, "title": title, "step": int(inputs["step"]), "sha": inputs["sha"]}
            for at in (0.0, self.queue_s, self.queue_s + self.step_s):  # requested/queued, in_progress, completed
                self.events += [(self.t + at, run_id, title), (self.t + at + 0.5, run_id, "")]  # workflow_run, _job
            self.events.sort(key=lambda e: e[0])
            return run_id


def _handler(sim: Sim, base: list[str]):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: dict | None = None, etag: str | None = None):
            raw = json.dumps(body).encode() if body is not None else b""
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if etag:
                self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(raw)

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            data = json.loads(self.rfile.read(length) or b"{}")
            sim.calls["POST dispatch"] += 1
            run_id = sim.dispatch(data.get("inputs") or {})
            url = f"{base[0]}/repos/{SLUG}/actions/runs/{run_id}"
            self._send(200, {"workflow_run_id": run_id, "run_url": url, "html_url": url})

        def do_GET(self):
            path = self.path.split("?")[0]
            if path == f"/repos/{SLUG}":
                sim.calls["GET repo"] += 1
                return self._send(200, {"url": f"{base[0]}/repos/{SLUG}", "full_name": SLUG, "name": "r"})
            if path.endswith("/actions/workflows/step.yml"):
                sim.calls["GET workflow"] += 1
                return self._send(200, {"id": 1, "url": f"{base[0]}/repos/{SLUG}/actions/workflows/1"})
            m = re.fullmatch(rf"/repos/{SLUG}/actions/runs/(\d+)(/jobs)?", path)
            if not m:
                return self._send(404, {"message": "Not Found"})
            run_id = int(m.group(1))
            with sim.lock:
                run = sim.runs[run_id]
                status, conclusion = sim.status(run)
            url = f"{base[0]}/repos/{SLUG}/actions/runs/{run_id}"
            if m.group(2):
                sim.calls["GET jobs"] += 1
                job = {"id": run_id * 10, "run_id": run_id, "status": status, "conclusion": conclusion}
                job.update(labels=["self-hosted", "gpu"], runner_name="gpu-1" if status != "queued" else None)
                return self._send(200, {"total_count": 1, "jobs": [job]})
            body = {"id": run_id, "status": status, "conclusion": conclusion, "html_url": url, "url": url}
            body.update(jobs_url=url + "/jobs", display_title=run["title"])
            etag = f'W/"{run_id}-{status}-{conclusion}"'
            if self.headers.get("If-None-Match") == etag:
                sim.calls["GET run (304)"] += 1
                return self._send(304, None, etag)
            sim.calls["GET run"] += 1
            return self._send(200, body, etag)

    return Handler


class SimWake:
    """The backend's `_wake` event on the simulated clock: waiting advances time, delivering the webhooks due."""

    def __init__(self, sim: Sim, deliver):
        self.sim, self.deliver, self.flag = sim, deliver, False

    def set(self):
        self.flag = True

    def clear(self):
        self.flag = False

    def wait(self, timeout: float | None):
        if self.flag:
            return True
        until = self.sim.t + (timeout if timeout is not None else 1e9)
        while not self.flag:
            with self.sim.lock:
                due = self.sim.events[0][0] if self.sim.events else None
            if due is None or due > until:
                self.sim.t = until
                return False
            with self.sim.lock:
                when, run_id, title = self.sim.events.pop(0)
            self.sim.t = max(self.sim.t, when)
            self.deliver(run_id, title)
        return True


def _load(rev: str) -> tuple[types.ModuleType, types.ModuleType]:
    """The baseline's backend and adapter modules, from git, under names of their own."""
    mods = []
    for name, rel in (("dispatch", "bot/adapters/dispatch/actions.py"), ("adapter", "bot/adapters/github/actions.py")):
        src = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True, check=True)
        spec = importlib.util.spec_from_loader(f"baseline_{name}", loader=None)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        exec(compile(src.stdout, f"{rev}:{rel}", "exec"), module.__dict__)
        mods.append(module)
    return mods[0], mods[1]


def _result(spec: StepSpec) -> bytes:
    now = datetime.now(UTC)
    res = StepResult(spec.step_id, spec.sha, 1, 0.0065, None, "gpu-1", 600.0, "log", now, now, "k", True)
    return json.dumps(result_json.to_json(res, "avg_kl_div", 0.002)).encode()


def run_once(dispatch_mod, adapter_mod, *, new: bool, steps: int, parallel: int, events_per_day: float, seed: int):
    sim = Sim()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(sim, base := [""]))
    base[0] = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rng = random.Random(seed)
    horizon = (steps / parallel + 2) * (sim.queue_s + sim.step_s)
    t = 0.0
    while t < horizon:  # the repository's own CI: other runs' events, none of them ours
        t += rng.expovariate(events_per_day / 86400)
        sim.events.append((t, rng.randrange(10**9, 2 * 10**9), "PR Test Base"))
    sim.events.sort(key=lambda e: e[0])
    try:
        gh = Github(base_url=base[0], auth=Auth.Token("t"), retry=None, seconds_between_requests=0,
                    seconds_between_writes=0)  # fmt: skip
        actions = adapter_mod.GitHubActions(gh.get_repo(SLUG), "step.yml")
        specs: dict[int, StepSpec] = {}

        def artifact_file(run_id, artifact, member):  # the same on both sides: not compared
            sim.calls["artifact reads (not compared)"] += 2
            return _result(specs[sim.runs[run_id]["step"]])

        actions.artifact_file = artifact_file
        inputs = lambda spec, correlation: {"step": str(spec.step_id), "correlation": correlation, "sha": spec.sha}  # noqa: E731
        limits = dispatch_mod.Limits(poll_s=15)
        labels = ["self-hosted", "gpu"]
        backend = dispatch_mod.GitHubActionsBackend(
            actions, "main", inputs, parallel, labels, limits, clock=lambda: sim.t
        )

        def deliver(run_id, title):
            sim.calls["webhooks"] += 1
            if new:
                dispatch_mod.wake_for(dispatch_mod.RunEvent(run_id, title))
            else:
                dispatch_mod.wake_all()

        backend._wake = SimWake(sim, deliver)
        done, step = 0, 0
        while done < steps:
            while backend.free and step < steps:
                step += 1
                specs[step] = StepSpec(step_id=step, sha=f"{step:040x}", command=("pytest",))
                backend.submit(specs[step])
            done += len(backend.wait(None))
        backend.close()
        return sim.t, sim.calls
    finally:
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--events-per-day", type=float, default=4000.0)
    ap.add_argument("--baseline", default=BASELINE)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import bot.adapters.dispatch.actions as dispatch_now
    import bot.adapters.github.actions as adapter_now

    dispatch_old, adapter_old = _load(args.baseline)
    rows = []
    for label, dispatch_mod, adapter_mod, new in (
        (f"baseline ({args.baseline})", dispatch_old, adapter_old, False),
        ("today", dispatch_now, adapter_now, True),
    ):
        kw = dict(steps=args.steps, parallel=args.parallel, events_per_day=args.events_per_day, seed=args.seed)
        elapsed, calls = run_once(dispatch_mod, adapter_mod, new=new, **kw)
        counted = sum(n for k, n in calls.items() if k not in ("webhooks", "GET run (304)"))
        per_hour = counted / (elapsed / 3600)
        rows.append(
            [
                label,
                f"{elapsed / 60:.0f} min",
                calls["webhooks"],
                counted,
                calls["GET run (304)"],
                f"{calls['GET run (304)'] / max(1, counted + calls['GET run (304)']):.0%}",
                f"{per_hour:.0f}",
                f"{per_hour / LIMIT_PER_HOUR:.1%}",
            ]
        )
    header = ["code", "bisection", "webhooks", "API calls counted", "304s", "share of 304s", "calls/h", "of 5,000/h"]
    table(
        f"GitHub API calls of one bisection: {args.steps} steps of 600 s, {args.parallel} at a time",
        " ".join(["python bench/rate_bench.py", *(argv if argv is not None else sys.argv[1:])]),
        header,
        [[str(c) for c in row] for row in rows],
        [
            f"45 s in the queue per step; {args.events_per_day:.0f} workflow events a day from the repository's own "
            "CI, none about the bisection's runs. 304s do not count against the limit. Artifact reads (2 per step, "
            "the same on both sides) are included in the counted calls."
        ],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
