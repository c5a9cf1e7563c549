"""SGLang's nightly text-model performance test as its job prints it, for the series tests: run_suite's frame
(tests/support/suite_logs.py) around the test's output, the report NightlyBenchmarkRunner.write_final_report prints
(python/sglang/test/nightly_utils.py:356 at 6ed5780c4f): per model a `### <model> [2-gpu-h100]` line, the table's
header rows (nightly_bench_utils.py:96-111) and one row per batch size in the form of nightly_bench_utils.py:88 --
batch size 1 twice -- and, when a model's benchmark crashed, no table for it and the test's
`AssertionError: Some models failed the perf tests.` (test/registered/perf/test_text_models_perf.py:57-58).

`outputs` maps each model's short name (`llama-3.1-8b`, `qwen2-57b-a14b`) to its output throughput per batch size
(tok/s); a batch size left out is skipped (no row: the KV cache could not hold it), a model left out crashed."""

from __future__ import annotations

from collections.abc import Mapping

from tests.support.suite_logs import File, run_suite

PERF_TEST = "test/registered/perf/test_text_models_perf.py"
MODELS = {"llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct", "qwen2-57b-a14b": "Qwen/Qwen2-57B-A14B-Instruct"}
BATCHES = (1, 1, 8, 16, 64)
HEADER = (
    "| batch size | input len | latency (s) | input throughput (tok/s)  | output throughput (tok/s) | acc length | "
    "ITL (ms) | input cost ($/1M) | output cost ($/1M) | profile (extend) | profile (decode)|"
)
RULE = (
    "| ---------- | --------- | ----------- | ------------------------- | ------------------------- | ---------- | "
    "-------- | ----------------- | ------------------ | ---------------- | --------------- |"
)


def row(batch: int, output: float) -> str:
    latency = 512 * batch / output
    return (
        f"| {batch} | 4096 | {latency:.2f} | {4096 * batch / latency:.2f} | {output:.2f} | n/a | "
        f"{1000 / (output / batch):.2f} | 0.01 | 0.13 | [trace](https://example.invalid/e) | "
        "[trace](https://example.invalid/d) |"
    )


def report(outputs: Mapping[str, Mapping[int, float]]) -> list[str]:
    lines = [
        "## TestNightlyTextModelsPerformance (2-gpu-h100)",
        "",
        "Note: To view the traces through perfetto-ui, please:",
        "",
    ]
    for short, model in MODELS.items():
        found = outputs.get(short)
        if found is None:
            continue
        lines += [f"### {model} [2-gpu-h100]", HEADER, RULE]
        lines += [row(batch, found[batch]) for batch in BATCHES if batch in found]
        lines.append("")
    return lines


def perf_output(outputs: Mapping[str, Mapping[int, float]]) -> tuple[bool, list[str]]:
    """(passed, what the test file prints): it fails when a model crashed."""
    crashed = [m for m in MODELS if m not in outputs]
    lines = report(outputs)
    if crashed:
        lines += [
            "F",
            "Traceback (most recent call last):",
            "AssertionError: Some models failed the perf tests.",
            "",
            "FAILED (failures=1)",
        ]
    else:
        lines += [".", "-" * 70, "Ran 1 test in 2713.402s", "", "OK"]
    return not crashed, lines


def perf_suite(outputs: Mapping[str, Mapping[int, float]]) -> tuple[bool, list[str]]:
    """The job's run_suite output around the perf file (no retry: the nightly passes no --enable-retry)."""
    passed, lines = perf_output(outputs)
    return passed, run_suite([File(PERF_TEST, [passed], lines, elapsed=2719, est_time=3600)], enable_retry=False)


def outputs_of(level: float, shape: Mapping[str, Mapping[int, float]] | None = None) -> dict[str, dict[int, float]]:
    """Every model and batch size at `level` times a typical throughput (SGLang's report at 6ed5780c4f: made-up
    numbers of its form)."""
    typical = shape or {
        "llama-3.1-8b": {1: 122.61, 8: 797.64, 16: 1402.87, 64: 4281.36},
        "qwen2-57b-a14b": {1: 82.03, 8: 522.71, 16: 905.18, 64: 2617.32},
    }
    return {m: {b: round(v * level, 2) for b, v in by.items()} for m, by in typical.items()}
