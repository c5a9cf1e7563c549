"""Job logs of SGLang's CI as GitHub serves them: run_suite's output (python/sglang/test/ci/ci_utils.py,
`run_unittest_files`, printed through a logger whose format is the bare message) inside GitHub's job log format
(every line behind a 7-digit-fraction UTC stamp, the step's script in ##[group]Run ... ##[endgroup], failures as
##[error]). Written from SGLang's source, line for line, so the bot's parser is tested against what CI prints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

CHECKOUT = "/actions-runner/_work/sglang/sglang"  # a self-hosted runner's work dir: `<repo>/<repo>`
KL_TEST = "test/registered/models_e2e/test_qwen3_next_models.py"


@dataclass
class File:
    """One test file as run_suite runs it: its output per attempt, and whether the last attempt passed."""

    path: str  # repo-relative, e.g. test/registered/models_e2e/test_qwen3_next_models.py
    attempts: list[bool] = field(default_factory=lambda: [True])  # each attempt's result, in order
    output: list[str] = field(default_factory=list)  # printed by each attempt
    elapsed: int = 250
    est_time: int = 500

    @property
    def full(self) -> str:
        return f"{CHECKOUT}/{self.path}"


def run_suite(files: list[File], enable_retry: bool = True) -> list[str]:
    """The lines run_unittest_files prints for `files` (continue_on_error: every file runs)."""
    out: list[str] = []

    def info(message: str) -> None:
        out.extend(message.split("\n"))

    passed, failed, retried = [], [], []
    n = len(files) - 1
    for i, f in enumerate(files):
        for attempt, ok in enumerate(f.attempts, start=1):
            if attempt > 1:
                info(f"\n[CI Retry] Attempt {attempt}/{len(f.attempts)} for {f.full}\n")
            info(f".\n.\nBegin ({i}/{n}):\npython3 {f.full}\n.\n.\n")
            out.extend(f.output)
            info(f".\n.\nEnd ({i}/{n}):\nfilename={f.full!r}, elapsed={f.elapsed}, estimated_time={f.est_time}\n.\n.\n")
            if ok:
                if attempt > 1:
                    info(f"\n✓ PASSED on retry (attempt {attempt}): {f.full}\n")
                    retried.append((f.full, attempt, "passed"))
                passed.append(f.full)
                break
            if attempt < len(f.attempts):
                info(f"\n[CI Retry] {f.full} failed with retriable pattern: accuracy")
                info("[CI Retry] Waiting 60s before retry...\n")
                continue
            info(f"\n✗ FAILED: {f.full} returned exit code 1\n")
            if attempt > 1:
                retried.append((f.full, attempt, "failed"))
            failed.append((f.full, "exit code 1"))
    info("Success. Time elapsed: 1234.00s" if not failed else "Fail. Time elapsed: 1234.00s")
    info(f"\n{'=' * 60}")
    info(f"Test Summary: {len(passed)}/{len(files)} passed")
    if enable_retry and retried:
        info(f"Retries: {len(retried)} test(s) were retried")
    info(f"{'=' * 60}")
    if passed:
        info("✓ PASSED:")
        for test in passed:
            info(f"  {test}")
    if failed:
        info("\n✗ FAILED:")
        for test, reason in failed:
            info(f"  {test} ({reason})")
    if retried:
        info("\n↻ RETRIED:")
        for test, attempts, result in retried:
            info(f"  {test} ({attempts} attempts, {result})")
    info(f"{'=' * 60}\n")
    info("========== TIMINGS BEGIN ==========")
    for f in files:
        info(json.dumps({"file": f.path, "passed": f.full in passed, "elapsed": f.elapsed}))
    info("========== TIMINGS END ==========")
    return out


def github_log(lines: list[str], failed: bool, partition: int = 0) -> str:
    """`lines` as the `Run test` step of a stage job writes them into its log (GET .../jobs/{id}/logs)."""
    body = [
        "Current runner version: '2.329.0'",
        "##[group]Run cd test/",
        "cd test/",
        f"python3 run_suite.py --hw cuda --suite base-c-test-4-gpu-h100 --auto-partition-id {partition} \\",
        "  --auto-partition-size 4 --partition-model-file /tmp/partition-model.json",
        "shell: /usr/bin/bash -e {0}",
        "env:",
        "  SGLANG_IS_IN_CI: true",
        "##[endgroup]",
        *lines,
    ]
    if failed:
        body.append("##[error]Process completed with exit code 255.")
    body.append("Cleaning up orphan processes")
    stamped = [
        f"2026-07-17T03:{11 + k // 3600 % 48:02d}:{k // 60 % 60:02d}.{1234567 + k:07d}Z {line}"
        for k, line in enumerate(body)
    ]
    return "\ufeff" + "\n".join(stamped) + "\n"


def kl_output(value: float, threshold: float = 0.002) -> list[str]:
    """What the KL test prints (python/sglang/test/kl_test_utils.py, compare_kl_divergence), and, above the
    threshold, unittest's report of its assertion."""
    lines = [
        "test_input_output_logprobs_match_decode_cache_hit (__main__.TestQwen3NextLazyExtraBuffer) ...",
        f"kl_divs=[{value * 0.9}, {value * 1.1}]",
        f"avg_kl_div={value}",
        f"ACC_THRESHOLDS={{'kl_div': {threshold}}}",
    ]
    if value > threshold:
        lines += [
            "FAIL",
            "Traceback (most recent call last):",
            "AssertionError: avg_kl_div="
            f"{value} > threshold={threshold} for Qwen/Qwen3-Next-80B-A3B-Instruct decode_cache_hit",
        ]
    else:
        lines.append("ok")
    return lines


def partition_log(files: list[File], partition: int = 0) -> str:
    return github_log(run_suite(files), failed=not all(f.attempts[-1] for f in files), partition=partition)
