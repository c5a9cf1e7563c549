"""python3 test/run_suite.py --suite NAME [--auto-partition-id I --auto-partition-size N] [--max-attempts K]

The suite runner of the nightly (like SGLang's test/run_suite.py and ci_utils.run_unittest_files): it runs each
file of the suite as SGLang's runs a unittest file, `python3 <file> -f` (failfast) from the test/ directory, in a
process of its own, retries a failed file, and reports the way SGLang's does -- the summary, the passed / failed /
retried files (absolute paths), and one JSON line per file between the TIMINGS markers (repo-relative paths)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = {
    "stage-a-test-cpu": lambda: sorted(glob.glob("test/test_*.py", root_dir=ROOT)),
    "nightly-accuracy": lambda: sorted(glob.glob("test/nightly/test_*.py", root_dir=ROOT)),
}


def say(message: str) -> None:
    print(message, flush=True)


def run_file(path: str, index: int, last: int) -> tuple[bool, float]:
    full = os.path.join(ROOT, path)
    say(f".\n.\nBegin ({index}/{last}):\npython3 {full}\n.\n.\n")
    tic = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    # as SGLang's run_unittest_files: `python3 <file> -f` (unittest, failfast), from the test/ directory
    code = subprocess.run([sys.executable, full, "-f"], cwd=os.path.join(ROOT, "test"), env=env).returncode
    elapsed = time.perf_counter() - tic
    say(f".\n.\nEnd ({index}/{last}):\nfilename={full!r}, elapsed={elapsed:.0f}, estimated_time=60\n.\n.\n")
    return code == 0, elapsed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", required=True, choices=sorted(SUITES))
    parser.add_argument("--auto-partition-id", type=int, default=0)
    parser.add_argument("--auto-partition-size", type=int, default=1)
    parser.add_argument("--max-attempts", type=int, default=2)
    args = parser.parse_args()
    files = SUITES[args.suite]()[args.auto_partition_id :: args.auto_partition_size]
    passed, failed, retried, timings = [], [], [], []
    tic = time.perf_counter()
    for i, path in enumerate(files):
        full = os.path.join(ROOT, path)
        for attempt in range(1, args.max_attempts + 1):
            if attempt > 1:
                say(f"\n[CI Retry] Attempt {attempt}/{args.max_attempts} for {full}\n")
            ok, elapsed = run_file(path, i, len(files) - 1)
            if ok:
                if attempt > 1:
                    say(f"\n✓ PASSED on retry (attempt {attempt}): {full}\n")
                    retried.append((full, attempt, "passed"))
                passed.append(full)
                break
            if attempt < args.max_attempts:
                say(f"\n[CI Retry] {full} failed with retriable pattern: accuracy")
                continue
            say(f"\n✗ FAILED: {full} returned exit code 1\n")
            if attempt > 1:
                retried.append((full, attempt, "failed"))
            failed.append((full, "exit code 1"))
        timings.append({"file": path, "passed": full in passed, "elapsed": round(elapsed)})
    say(f"{'Fail' if failed else 'Success'}. Time elapsed: {time.perf_counter() - tic:.2f}s")
    say(f"\n{'=' * 60}")
    say(f"Test Summary: {len(passed)}/{len(files)} passed")
    if retried:
        say(f"Retries: {len(retried)} test(s) were retried")
    say("=" * 60)
    if passed:
        say("✓ PASSED:")
        for full in passed:
            say(f"  {full}")
    if failed:
        say("\n✗ FAILED:")
        for full, reason in failed:
            say(f"  {full} ({reason})")
    if retried:
        say("\n↻ RETRIED:")
        for full, attempts, result in retried:
            say(f"  {full} ({attempts} attempts, {result})")
    say(f"{'=' * 60}\n")
    say("========== TIMINGS BEGIN ==========")
    for entry in timings:
        say(json.dumps(entry))
    say("========== TIMINGS END ==========")
    return -1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
