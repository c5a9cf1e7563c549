"""The decode-cache-hit KL probe, for any server speaking SGLang's native /generate API.

    python -m runners.probes.sglang_kl --launch "python -m sglang.launch_server ... --port {port}" \\
        [--build CMD] [--threshold 0.002] [--samples 16] [--max-new-tokens 24] [--prompt-len 20]
    python -m runners.probes.sglang_kl --base-url http://127.0.0.1:30000      # a server already up

It is SGLang's `test_input_output_logprobs_match_decode_cache_hit_helper` (sglang/test/
kl_test_utils.py), self-contained: stdlib only, no torch, no tokenizer.

1. `--build` (optional) runs in the worktree; a non-zero exit means the commit cannot be built.
2. The server is launched from the worktree (`{port}`, `{host}`, `{python}` substituted; split
   with shlex, never run through a shell) in a process group of its own, its log in a file, and
   polled on /health (or /get_server_info) until it answers.
3. Flush; turn 1 generates `--max-new-tokens` per prompt (temperature 0, ignore_eos).
4. Turn 2 sends prompt + output + one extra token: a server that checkpoints decode states must
   serve it from the cache beyond the prompt. Samples with cached_tokens <= len(prompt) + 1 are
   skipped, and more than `--min-cache-hit-ratio` of them must hit.
5. Flush; a cold prefill of turn 2's input + output (`logprob_start_len=0`, `max_new_tokens=0`);
   the last len(output) input logprobs are what turn 2's decode should have produced.
6. Per sample mean(exp(r) - 1 - r) with r = prefill_logprob - decode_logprob; avg_kl_div is the
   mean over samples, and the test fails when it is above `--threshold`.

Exit codes have git-bisect meanings: 0 pass, 1 fail (KL above the threshold, or too few decode
cache hits), 125 cannot build, 255 infrastructure (server never healthy, died mid-run, HTTP
errors, malformed responses); a probe stopped by a signal exits 128 + the signal. The server is
stopped (process group: SIGTERM, then SIGKILL) on every path. `--result` (default
$REVERT_BISECT_RESULT) gets result.json: schema, sha, verdict, exit_code,
metric {name, value, threshold}, duration_s, log_tail, started_at, finished_at, and details.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from runners.probes.kl_check import (
    EXIT_FAIL,
    EXIT_INFRA,
    EXIT_PASS,
    EXIT_SKIP,
    METRIC,
    TEST_NAME,
    Outcome,
    decode_cache_hit_kl,
    load_prompts,
)
from runners.probes.server import InfraError, ServerProcess, render_command, wait_healthy
from runners.probes.sglang_api import Client


class Terminated(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


class BuildFailed(Exception):
    pass


# -- the command --


def launch_template(module: str, model: str, server_args: str) -> str:
    """SGLang's launch line (as its tests' popen_launch_server builds it): the model, the test's own
    server arguments, then where to listen; {python}, {host} and {port} are filled in at launch."""
    return " ".join(
        [
            "{python} -m",
            shlex.quote(module),
            "--model-path",
            shlex.quote(model),
            server_args.strip(),
            "--host {host} --port {port}",
        ]
    ).replace("  ", " ")


def health_paths(first: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((first, "/health", "/get_server_info")))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m runners.probes.sglang_kl", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--launch", metavar="CMD", help="server command; {port}, {host} and {python} are substituted")
    where.add_argument(
        "--model",
        metavar="PATH",
        help="launch `{python} -m SERVER_MODULE --model-path PATH SERVER_ARGS --host {host} --port {port}`",
    )
    where.add_argument("--base-url", metavar="URL", help="use a server that is already up instead")
    p.add_argument("--server-module", default="sglang.launch_server", help="with --model: the server's module")
    p.add_argument(
        "--server-args", default="", metavar="ARGS", help="with --model: the server's own arguments, e.g. '--tp-size 4'"
    )
    p.add_argument(
        "--health-path", default="/health_generate", help="polled until 200 (404: /health, then /get_server_info)"
    )
    p.add_argument("--build", metavar="CMD", help="run first in the worktree; non-zero exit: cannot build (125)")
    p.add_argument("--threshold", type=float, default=0.002)
    p.add_argument("--samples", type=int, default=32, help="SGLang's test: 32")
    p.add_argument("--max-new-tokens", type=int, default=512, help="SGLang's test: 512")
    p.add_argument("--prompt-len", type=int, default=20)
    p.add_argument("--vocab-size", type=int, default=64, help="synthetic prompts draw token ids from 1..N-1")
    p.add_argument(
        "--extra-token", type=int, default=11, help="the token appended for turn 2 (',' in common vocabularies)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--prompts", type=Path, metavar="FILE.jsonl", help='one JSON list of token ids (or {"input_ids": [...]}) a line'
    )
    p.add_argument("--min-cache-hit-ratio", type=float, default=0.5)
    p.add_argument("--startup-timeout", type=float, default=120.0)
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--build-timeout", type=float, default=1800.0)
    p.add_argument("--stop-grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=None, help="default: a free port")
    p.add_argument("--result", type=Path, default=os.environ.get("REVERT_BISECT_RESULT") or None)
    p.add_argument("--server-log", type=Path, default=None, help="default: beside --result, else a temporary file")
    p.add_argument("--cwd", type=Path, default=Path(os.environ.get("REVERT_BISECT_WORKTREE") or "."))
    args = p.parse_args(argv)
    if args.samples < 1 or args.max_new_tokens < 1 or args.prompt_len < 1:
        p.error("--samples, --max-new-tokens and --prompt-len must be at least 1")
    return args


class Console:
    """print() that also keeps the lines for result.json's log_tail."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        print(line, flush=True)


def _sha(cwd: Path) -> str | None:
    sha = os.environ.get("REVERT_BISECT_SHA")
    if sha:
        return sha
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def run_build(command: str, cwd: Path, timeout: float, say: Callable[[str], None]) -> None:
    argv = render_command(command)
    say(f"build: {' '.join(argv)}")
    try:
        proc = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise BuildFailed(f"build command not found: {exc.filename or argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise BuildFailed(f"build timed out after {timeout:g}s") from None
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        for line in output.splitlines()[-30:]:
            say(f"  | {line}")
        raise BuildFailed(f"build failed with exit code {proc.returncode}")


def _server_log_path(args: argparse.Namespace) -> Path:
    if args.server_log:
        return args.server_log
    if args.result:
        return args.result.with_name(args.result.stem + ".server.log")
    fd, name = tempfile.mkstemp(prefix="sglang-kl-server-", suffix=".log")
    os.close(fd)
    return Path(name)


def _raise_terminated(signum, _frame):
    raise Terminated(signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    say = Console()
    started_at, t0 = datetime.now(UTC), time.monotonic()
    cwd = args.cwd.resolve()
    old_handlers = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    server: ServerProcess | None = None
    outcome: Outcome | None = None
    exit_code: int
    try:
        try:
            prompts = load_prompts(args.prompts, args.samples, args.prompt_len, args.vocab_size, args.seed)
            if args.build:
                run_build(args.build, cwd, args.build_timeout, say)
            launch = args.launch or (
                launch_template(args.server_module, args.model, args.server_args) if args.model else None
            )
            if launch:
                server = ServerProcess(launch, cwd, _server_log_path(args), host=args.host, port=args.port)
                say(f"launching: {' '.join(server.argv)}  (log: {server.log_path})")
                server.start()
                info = server.wait_healthy(args.startup_timeout, health_paths(args.health_path))
                base_url = server.base_url
                say(f"server {base_url} (pid {server.pid}) healthy after {time.monotonic() - t0:.1f}s")
            else:
                base_url = args.base_url.rstrip("/")
                info = wait_healthy(base_url, args.startup_timeout, health_paths(args.health_path))
            if info:
                shown = {
                    k: info[k]
                    for k in ("model_path", "page_size", "mamba_track_interval", "disable_radix_cache")
                    if k in info
                }
                say(f"server_info: {json.dumps(shown)}")
                if info.get("disable_radix_cache"):
                    raise InfraError("the server runs with the radix cache disabled: a decode cache hit cannot happen")
            client = Client(base_url, args.request_timeout, server, say)
            outcome = decode_cache_hit_kl(
                client,
                prompts,
                max_new_tokens=args.max_new_tokens,
                extra_token=args.extra_token,
                threshold=args.threshold,
                min_cache_hit_ratio=args.min_cache_hit_ratio,
            )
            client.check_alive("the test")
        except BuildFailed as exc:
            outcome = Outcome(EXIT_SKIP, f"cannot build: {exc}")
        except ValueError as exc:  # bad --prompts, bad command template
            outcome = Outcome(EXIT_INFRA, f"bad probe input: {exc}")
        except InfraError as exc:
            outcome = Outcome(EXIT_INFRA, str(exc))
        except Exception as exc:  # noqa: BLE001 - a probe bug is an infra failure, never a verdict
            import traceback

            traceback.print_exc()
            outcome = Outcome(EXIT_INFRA, f"probe error: {type(exc).__name__}: {exc}")
        finally:
            if server is not None:
                code = server.stop(args.stop_grace)
                say(f"server stopped (pid {server.pid}, exit {code})")
        exit_code = outcome.exit_code
    except Terminated as exc:
        outcome = Outcome(128 + exc.signum, f"probe {exc}")
        exit_code = outcome.exit_code
    finally:
        for s, handler in old_handlers.items():
            signal.signal(s, handler)

    _report(outcome, args.threshold, say)
    if outcome.exit_code in (EXIT_INFRA,) and server is not None:
        say("--- server log (tail) ---")
        for line in server.log_tail(30).splitlines():
            say(line)
    if args.result:
        _write_result(
            args.result,
            outcome,
            args.threshold,
            cwd,
            started_at,
            time.monotonic() - t0,
            say,
            server.log_tail(40) if server else "",
        )
    return exit_code


def _report(outcome: Outcome, threshold: float, say: Callable[[str], None]) -> None:
    if outcome.value is not None:
        say(f"{METRIC}={outcome.value} threshold={threshold}")
    if outcome.exit_code == EXIT_PASS:
        say("Test Summary: 1/1 passed")
    elif outcome.exit_code == EXIT_FAIL:
        say(f"FAILED: {TEST_NAME}")
        say(outcome.message)
        say("Test Summary: 0/1 passed")
    elif outcome.exit_code == EXIT_SKIP:
        say(f"SKIPPED: {TEST_NAME}: {outcome.message}")
    else:
        say(f"ERROR: {TEST_NAME}: infrastructure failure: {outcome.message}")


def _write_result(
    path: Path,
    outcome: Outcome,
    threshold: float,
    cwd: Path,
    started_at: datetime,
    duration: float,
    say: Console,
    server_tail: str,
) -> None:
    log_tail = "\n".join(say.lines[-30:])
    if server_tail:
        log_tail += "\n--- server log ---\n" + server_tail
    data = {
        "schema": 1,
        "sha": _sha(cwd),
        "verdict": outcome.verdict,
        "exit_code": outcome.exit_code,
        "metric": {"name": METRIC, "value": outcome.value, "threshold": threshold},
        "message": outcome.message,
        "duration_s": round(duration, 3),
        "log_tail": log_tail[-8000:],
        "started_at": started_at.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "details": outcome.details,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        print(f"cannot write {path}: {exc}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
