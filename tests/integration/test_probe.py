"""The decode-cache-hit KL probe over real HTTP: against small fake servers (fast, every failure mode)
and against the miniature engine (the numbers match a direct computation)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from runners.probes.kl_check import avg_kl, load_prompts, sample_kl
from runners.probes.server import free_port

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "scenarios" / "mamba_track_boundary" / "template"

# A fake SGLang server. Its logprobs are known functions of position and token, and a decode that
# resumed from its "cache" drifts from the prefill by drift(position): the expected KL is computable.
FAKE_SERVER = r"""
import json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

def next_token(ids):
    return (sum(ids) * 31 + len(ids)) % 50 + 1

def true_lp(pos, tok):  # logprob of token `tok` at position `pos` (it follows pos tokens)
    return -0.5 - ((tok * 13 + pos) % 17) / 10

def drift(pos):
    return 0.05 * (pos % 5)

if __name__ == "__main__":
    args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    mode, port = args["--mode"], int(args["--port"])
    with open(args["--pidfile"], "w") as fh:
        fh.write(str(os.getpid()))
    if mode in ("never_healthy", "stubborn"):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(args["--pidfile"] + ".child", "w") as fh:
            fh.write(str(child.pid))
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # needs the SIGKILL
        time.sleep(120)
    if mode == "crash_at_start":
        sys.exit(7)
    cache = []

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def send(self, code, obj, ctype="application/json"):
            data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                return self.send(200, b"", "text/plain")
            if self.path in ("/get_server_info", "/server_info"):
                return self.send(200, {"page_size": 1, "model_path": "fake", "disable_radix_cache": False})
            self.send(404, {"detail": "Not Found"})

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/flush_cache"):
                cache.clear()
                return self.send(200, b"Cache flushed.\n", "text/plain")
            if self.path != "/generate":
                return self.send(404, {"detail": "Not Found"})
            if mode == "die_mid_run":
                os._exit(3)
            if mode == "http_500":
                return self.send(500, {"error": {"message": "CUDA error: an illegal memory access"}})
            if mode == "slow":
                time.sleep(60)
            req = json.loads(body)
            n = req["sampling_params"]["max_new_tokens"]
            start = req.get("logprob_start_len", -1)
            out = []
            for ids in req["input_ids"]:
                cached = max([k for k in range(len(ids)) if any(c[:k] == ids[:k] and len(c) >= k for c in cache)] or [0])
                if mode == "no_cache_hit":
                    cached = 0
                seq, out_ids, out_lp = list(ids), [], []
                for _ in range(n):
                    tok = next_token(seq)
                    lp = true_lp(len(seq), tok) + (drift(len(seq)) if cached else 0.0)
                    out_ids.append(tok); out_lp.append([lp, tok, None]); seq.append(tok)
                cache.append(seq)
                meta = {"id": "x", "finish_reason": {"type": "length", "length": n}, "prompt_tokens": len(ids),
                        "completion_tokens": n, "cached_tokens": cached, "e2e_latency": 0.01}
                if req.get("return_logprob"):
                    s = len(ids) if start == -1 else start
                    meta["input_token_logprobs"] = [[None if k == s else true_lp(k, ids[k]), ids[k], None] for k in range(s, len(ids))]
                    meta["output_token_logprobs"] = out_lp
                result = {"text": "", "output_ids": out_ids, "meta_info": meta}
                if mode.startswith("missing:") and (n == 0) == mode.endswith("@prefill"):
                    path = mode.split(":", 1)[1].split("@")[0].split(".")
                    holder = result
                    for part in path[:-1]:
                        holder = holder[part]
                    del holder[path[-1]]
                out.append(result)
            self.send(200, out)

    server = ThreadingHTTPServer(("127.0.0.1", port), H)
    server.daemon_threads = True
    server.serve_forever()
"""  # noqa: E501  (the fake server's source, run as-is: its lines cannot be split without changing the program text)


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def fake(tmp_path):
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)

    def run(mode: str, *extra: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess, dict, Path]:
        pidfile = tmp_path / f"{mode.replace(':', '_').replace('@', '_')}.pid"
        result = tmp_path / f"{pidfile.stem}.result.json"
        launch = f"{{python}} {script} --port {{port}} --mode {mode} --pidfile {pidfile}"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "runners.probes.sglang_kl",
                "--launch",
                launch,
                "--result",
                str(result),
                "--cwd",
                str(tmp_path),
                "--samples",
                "6",
                "--max-new-tokens",
                "8",
                "--prompt-len",
                "10",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, "REVERT_BISECT_SHA": "f" * 40},
        )
        data = json.loads(result.read_text()) if result.exists() else {}
        return proc, data, pidfile

    run.script = script
    yield run
    for pidfile in [*tmp_path.glob("*.pid"), *tmp_path.glob("*.pid.child")]:  # never leak a server, even on failure
        try:
            pid = int(pidfile.read_text())
        except ValueError:
            continue
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def assert_reaped(pidfile: Path) -> None:
    assert pidfile.exists(), "the fake server never started"
    assert wait_gone(int(pidfile.read_text())), "the server outlived the probe"
    child = Path(str(pidfile) + ".child")
    if child.exists():
        assert wait_gone(int(child.read_text())), "the server's child outlived the probe"


def expected_fake_kl(samples: int, prompt_len: int, max_new: int, seed: int = 0, extra: int = 11) -> float:
    ns: dict = {}
    exec(FAKE_SERVER.split('if __name__ == "__main__":')[0], ns)
    prefill, decode = [], []
    for prompt in load_prompts(None, samples, prompt_len, 64, seed):
        seq = list(prompt)
        for _ in range(max_new):
            seq.append(ns["next_token"](seq))
        seq.append(extra)
        p, d = [], []
        for _ in range(max_new):
            tok = ns["next_token"](seq)
            p.append(ns["true_lp"](len(seq), tok))
            d.append(ns["true_lp"](len(seq), tok) + ns["drift"](len(seq)))
            seq.append(tok)
        prefill.append(p)
        decode.append(d)
    # SGLang's formula, written out: mean over samples of mean over tokens of exp(r) - 1 - r.
    per_sample = [sum(math.exp(a - b) - 1 - (a - b) for a, b in zip(p, d)) / len(d) for p, d in zip(prefill, decode)]
    return sum(per_sample) / len(per_sample)


# -- the formula --


def test_sample_kl_is_sglangs_formula():
    prefill, decode = [-1.0, -2.0, -0.5], [-1.1, -1.7, -0.5]
    want = sum(math.exp(p - d) - 1 - (p - d) for p, d in zip(prefill, decode)) / 3
    assert sample_kl(prefill, decode) == pytest.approx(want, rel=1e-12)
    value, per_sample = avg_kl([prefill, [0.0]], [decode, [-0.2]])
    assert per_sample[1] == pytest.approx(math.exp(0.2) - 1 - 0.2, rel=1e-12)
    assert value == pytest.approx((want + per_sample[1]) / 2, rel=1e-12)
    assert sample_kl([-1.0], [-1.0]) == 0.0


def test_probe_never_imports_torch():
    code = "import sys, runners.probes.sglang_kl; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


# -- fake servers: the numbers and every way a run can go wrong --


def test_kl_matches_hand_computation(fake):
    proc, data, pidfile = fake("ok", "--threshold", "0.5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    want = expected_fake_kl(6, 10, 8)
    assert want > 0.001  # not vacuous
    assert data["metric"] == {"name": "avg_kl_div", "value": pytest.approx(want, rel=1e-9, abs=1e-15), "threshold": 0.5}
    assert data["verdict"] == "good" and data["exit_code"] == 0 and data["schema"] == 1 and data["sha"] == "f" * 40
    assert {"duration_s", "log_tail", "started_at", "finished_at"} <= data.keys()
    assert f"avg_kl_div={data['metric']['value']} threshold=0.5" in proc.stdout
    assert "Test Summary: 1/1 passed" in proc.stdout
    assert_reaped(pidfile)


def test_kl_above_threshold_fails_with_exit_1(fake):
    proc, data, pidfile = fake("ok")  # default threshold 0.002
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert data["verdict"] == "bad" and data["metric"]["value"] > 0.002
    assert "FAILED: test_decode_cache_hit" in proc.stdout
    assert f"avg_kl_div={data['metric']['value']} > threshold=0.002" in proc.stdout
    assert_reaped(pidfile)


def test_too_few_decode_cache_hits_fails_the_test(fake):
    proc, data, pidfile = fake("no_cache_hit")
    assert proc.returncode == 1
    assert "Too few decode cache hits: 0/6" in proc.stdout
    assert data["verdict"] == "bad" and data["metric"]["value"] is None
    assert_reaped(pidfile)


def test_server_never_healthy_is_infra_and_reaped(fake):
    tic = time.monotonic()
    proc, data, pidfile = fake("never_healthy", "--startup-timeout", "1.5", "--stop-grace", "0.5")
    assert proc.returncode == 255, proc.stdout + proc.stderr
    assert time.monotonic() - tic < 15
    assert "server not healthy within --startup-timeout 1.5s" in proc.stdout
    assert data["verdict"] == "infra" and "not healthy" in data["message"]
    assert_reaped(pidfile)  # it ignores SIGTERM, and it has a child: the group gets SIGKILL


def test_server_crashing_at_start_is_infra(fake):
    proc, data, pidfile = fake("crash_at_start", "--startup-timeout", "30")
    assert proc.returncode == 255
    assert "server exited with code 7 before becoming healthy" in data["message"]
    assert_reaped(pidfile)


def test_server_dying_mid_run_is_infra(fake):
    proc, data, pidfile = fake("die_mid_run")
    assert proc.returncode == 255, proc.stdout + proc.stderr
    assert "server exited with code 3 during turn 1" in data["message"]
    assert "--- server log" in proc.stdout
    assert_reaped(pidfile)


def test_http_error_is_infra(fake):
    proc, data, pidfile = fake("http_500")
    assert proc.returncode == 255
    assert "HTTP 500" in data["message"] and "illegal memory access" in data["message"]
    assert_reaped(pidfile)


@pytest.mark.parametrize(
    "mode, field",
    [
        ("missing:meta_info.cached_tokens", "'meta_info.cached_tokens'"),
        ("missing:meta_info.output_token_logprobs", "'meta_info.output_token_logprobs'"),
        ("missing:output_ids", "'output_ids'"),
        ("missing:meta_info.input_token_logprobs@prefill", "'meta_info.input_token_logprobs'"),
    ],
)
def test_missing_fields_are_infra_naming_the_field(fake, mode, field):
    proc, data, pidfile = fake(mode)
    assert proc.returncode == 255, proc.stdout + proc.stderr
    assert f"has no field {field}" in data["message"]
    assert_reaped(pidfile)


def test_build_failure_is_125_and_launches_nothing(fake, tmp_path):
    proc, data, pidfile = fake("ok", "--build", "{python} -c 'import sys; print(\"boom\"); sys.exit(3)'")
    assert proc.returncode == 125
    assert data["verdict"] == "skip" and "build failed with exit code 3" in data["message"]
    assert "boom" in proc.stdout
    assert not pidfile.exists()


def test_sigterm_to_the_probe_stops_the_server(fake, tmp_path):
    pidfile = tmp_path / "slow.pid"
    result = tmp_path / "slow.json"
    launch = f"{{python}} {fake.script} --port {{port}} --mode slow --pidfile {pidfile}"
    probe = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runners.probes.sglang_kl",
            "--launch",
            launch,
            "--result",
            str(result),
            "--cwd",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # into the slow /generate
        probe.send_signal(signal.SIGTERM)
        out, _ = probe.communicate(timeout=20)
    finally:
        if probe.poll() is None:
            probe.kill()
    assert probe.returncode == 128 + signal.SIGTERM, out
    assert json.loads(result.read_text())["verdict"] == "infra"
    assert_reaped(pidfile)


# -- the miniature engine, over real HTTP --


def test_probe_matches_direct_queries_to_the_miniature_engine(tmp_path):
    import torch  # noqa: F401  (the model extra: a missing torch must fail, not skip)

    from scenarios.mamba_track_boundary.history import BAD_BOUNDARY, GOOD_BOUNDARY

    shutil.copytree(TEMPLATE / "mini_sglang", tmp_path / "mini_sglang")
    scheduler = tmp_path / "mini_sglang" / "scheduler.py"
    scheduler.write_text(scheduler.read_text().replace(GOOD_BOUNDARY, BAD_BOUNDARY))  # the regression: KL is large
    # a port number, not a bound socket: the model server runs in another process and takes --port
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "mini_sglang.launch_server", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/health", timeout=2).read()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "engine did not start"
                time.sleep(0.1)
        result = tmp_path / "result.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "runners.probes.sglang_kl",
                "--base-url",
                base,
                "--result",
                str(result),
                "--samples",
                "8",
                "--max-new-tokens",
                "24",
                "--seed",
                "5",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=ROOT,
        )
        assert proc.returncode == 1, proc.stdout + proc.stderr
        probe_value = json.loads(result.read_text())["metric"]["value"]

        # The same test, written out by hand against the same server.
        def post(path, body=None):
            req = urllib.request.Request(
                base + path,
                data=json.dumps(body or {}).encode(),
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=60) as resp:
                raw = resp.read()
            return json.loads(raw) if path == "/generate" else raw

        def generate(ids, n, start=-1):
            return post(
                "/generate",
                {
                    "input_ids": ids,
                    "return_logprob": True,
                    "logprob_start_len": start,
                    "sampling_params": {"temperature": 0, "max_new_tokens": n, "ignore_eos": True},
                },
            )

        prompts = load_prompts(None, 8, 20, 64, 5)
        post("/flush_cache")
        turn1 = generate(prompts, 24)
        second = [p + r["output_ids"] + [11] for p, r in zip(prompts, turn1)]
        turn2 = generate(second, 24)
        assert all(r["meta_info"]["cached_tokens"] > len(p) + 1 for p, r in zip(prompts, turn2))
        decode = [[x[0] for x in r["meta_info"]["output_token_logprobs"]] for r in turn2]
        post("/flush_cache")
        prefill = generate([s + r["output_ids"] for s, r in zip(second, turn2)], 0, start=0)
        assert prefill[0]["meta_info"]["input_token_logprobs"][0][0] is None  # SGLang's shape
        ref = [[x[0] for x in r["meta_info"]["input_token_logprobs"]][-24:] for r in prefill]
        kls = [sum(math.exp(a - b) - 1 - (a - b) for a, b in zip(p, d)) / len(d) for p, d in zip(ref, decode)]
        assert probe_value == pytest.approx(sum(kls) / len(kls), rel=1e-9)
        assert probe_value >= 0.004  # the broken regime (0.004-0.01), as the real culprit read 0.0065
    finally:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def test_server_dies_with_a_probe_killed_by_sigkill(fake, tmp_path):
    """The local runner SIGKILLs a timed-out test's process group; the server, in a group of its own, follows."""
    pidfile = tmp_path / "orphan.pid"
    launch = f"{{python}} {fake.script} --port {{port}} --mode slow --pidfile {pidfile}"
    probe = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runners.probes.sglang_kl",
            "--launch",
            launch,
            "--cwd",
            str(tmp_path),
            "--result",
            str(tmp_path / "orphan.json"),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 20
        while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.killpg(probe.pid, signal.SIGKILL)
        probe.wait(timeout=10)
    finally:
        if probe.poll() is None:
            probe.kill()
    assert_reaped(pidfile)


def test_the_commit_under_test_cannot_replace_the_probe(tmp_path):
    """The scenario's test command runs in the worktree; a `runners/` package there must not win."""
    import subprocess

    from scenarios.mamba_track_boundary import test_command

    fake = tmp_path / "runners" / "probes"
    fake.mkdir(parents=True)
    (tmp_path / "runners" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "sglang_kl.py").write_text("print('SHADOWED BY THE COMMIT')\n")
    argv = test_command()
    proc = subprocess.run(
        argv[: argv.index("--model")] + ["--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and "SHADOWED" not in proc.stdout and "--launch" in proc.stdout
