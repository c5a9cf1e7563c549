"""A policy metric without `threshold` is a benchmark: SGLang's nightly text-model performance test as the example
(policies/sglang-perf.yaml), its throughput read from the report SGLang's own test prints, carried through
the bot's bisection config as "no threshold"; a threshold that is given must still be a number."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.adapters.policy_files import PolicyError, check_dir, load, parse
from bot.domain.ci_results import read_artifacts
from bot.domain.joblog import plain
from bot.domain.policy import Direction
from bot.service.config import BisectConfig, bisect_config, group_config
from bot.service.pr_body import FailingTest
from bot.service.probe import probe_argv
from runners.metric import compile_metric_regex, metric_from_output
from runners.spec import TestRun
from tests.support.policies import MINIMAL

ROOT = Path(__file__).resolve().parents[2]
PERF = ROOT / "policies" / "sglang-perf.yaml"
SGLANG_HEAD = "6ed5780c4fd3075edd8a76fe6f09af51e4e900a6"  # the mirror of sgl-project/sglang main, 2026-08-22

# What test/registered/perf/test_text_models_perf.py prints at SGLANG_HEAD: NightlyBenchmarkRunner.write_final_report
# (python/sglang/test/nightly_utils.py:356@6ed5780c4f, `print(self.full_report)`): the `## <class> (<GPU_CONFIG>)`
# header (:50-54), BenchmarkResult.help_str(), then per model generate_markdown_report's `### <model> [<GPU_CONFIG>]`
# header and table header (python/sglang/test/nightly_bench_utils.py:96-111@6ed5780c4f) and one row per batch size,
# python/sglang/test/nightly_bench_utils.py:88@6ed5780c4f:
#   return f"| {self.batch_size} | {self.input_len} | {self.latency:.2f} | {self.input_throughput:.2f} |
#            {self.output_throughput:.2f} | {accept_length} | {itl:.2f} | {input_cost:.2f} | {output_cost:.2f} |
#            {profile_link} |\n"
# Rendered with SGLang's own BenchmarkResult / generate_markdown_report (GPU_CONFIG=2-gpu-h100, acc_length -1: "n/a",
# profiling on, no TRACE_BASE_URL as in a bisect step); the numbers and trace file names are made up, the form is not.
TABLE_HEAD = (
    "| batch size | input len | latency (s) | input throughput (tok/s)  | output throughput (tok/s) | acc length "
    "| ITL (ms) | input cost ($/1M) | output cost ($/1M) | profile (extend) | profile (decode)|\n"
    "| ---------- | --------- | ----------- | ------------------------- | ------------------------- | ---------- "
    "| -------- | ----------------- | ------------------ | ---------------- | --------------- |\n"
)


def _row(bs: int, numbers: str, model: str) -> str:
    trace = f"/{model.replace('/', '_')}_1755856800/bs{bs}"
    links = f"[trace]({trace}_extend-TP-0.trace.json.gz) | [trace]({trace}_decode-TP-0.trace.json.gz)"
    return f"| {bs} | 4096 | {numbers} | {links} |\n"


LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
QWEN = "Qwen/Qwen2-57B-A14B-Instruct"
# the line the policy reads, exactly as nightly_bench_utils.py:88@6ed5780c4f prints it
LLAMA_BS64 = (
    "| 64 | 4096 | 15.87 | 95127.44 | 4281.36 | n/a | 14.95 | 0.01 | 0.13 | "
    "[trace](/meta-llama_Llama-3.1-8B-Instruct_1755856800/bs64_extend-TP-0.trace.json.gz) | "
    "[trace](/meta-llama_Llama-3.1-8B-Instruct_1755856800/bs64_decode-TP-0.trace.json.gz) |\n"
)
LLAMA_ROWS = [
    _row(1, "4.48 | 26745.38 | 121.73 | n/a | 8.21 | 0.03 | 4.56", LLAMA),
    _row(1, "4.41 | 27013.72 | 122.61 | n/a | 8.16 | 0.03 | 4.53", LLAMA),
    _row(8, "5.93 | 81620.51 | 797.64 | n/a | 10.03 | 0.01 | 0.70", LLAMA),
    _row(16, "7.12 | 92814.03 | 1402.87 | n/a | 11.41 | 0.01 | 0.40", LLAMA),
]
QWEN_ROWS = [
    _row(1, "6.71 | 14022.18 | 81.27 | n/a | 12.30 | 0.06 | 6.84", QWEN),
    _row(1, "6.65 | 14120.90 | 82.03 | n/a | 12.19 | 0.06 | 6.77", QWEN),
    _row(8, "8.94 | 40311.55 | 522.71 | n/a | 15.30 | 0.02 | 1.06", QWEN),
    _row(16, "10.83 | 44127.80 | 905.18 | n/a | 17.68 | 0.02 | 0.61", QWEN),
    _row(64, "24.66 | 46350.07 | 2617.32 | n/a | 24.45 | 0.02 | 0.21", QWEN),
]
HEAD = (
    "## TestNightlyTextModelsPerformance (2-gpu-h100)\n\nNote: To view the traces through perfetto-ui, please:\n"
    "    1. open with Google Chrome\n    2. allow popup\n"
)


def report(llama_rows: list[str]) -> str:
    """The test's printed report: Llama-3.1-8B's table, then Qwen2-57B's (each followed by an empty line)."""
    return (
        HEAD
        + f"### {LLAMA} [2-gpu-h100]\n{TABLE_HEAD}{''.join(llama_rows)}\n"
        + f"### {QWEN} [2-gpu-h100]\n{TABLE_HEAD}{''.join(QWEN_ROWS)}\n"
    )


PRINTED = report([*LLAMA_ROWS, LLAMA_BS64])


def test_the_row_fixture_is_the_form_sglang_prints():
    assert _row(64, "15.87 | 95127.44 | 4281.36 | n/a | 14.95 | 0.01 | 0.13", LLAMA) == LLAMA_BS64
    # nightly_bench_utils.py:88's f-string, its columns up to the output throughput
    assert re.fullmatch(r"\| 64 \| 4096 \| \d+\.\d\d \| \d+\.\d\d \| \d+\.\d\d \| n/a \| .*\|\n", LLAMA_BS64)


def test_the_example_benchmark_policy_loads_and_has_no_threshold():
    policy = load(PERF)
    test = policy.test("text-models-perf")
    assert test is not None and test.metric is not None
    assert test.metric.threshold is None and test.metric.direction is Direction.LOWER_IS_WORSE
    assert policy.watch[0].workflow == ".github/workflows/nightly-test-nvidia.yml"
    assert re.search(test.jobs or "", "nightly-test-text-perf-2-gpu-h100")
    assert not re.search(test.jobs or "", "nightly-test-vlm-perf-2-gpu-h100")
    # run_suite's names: absolute paths in its sections, repo-relative ones in its TIMINGS block
    assert re.search(test.match, "/actions-runner/_work/sglang/sglang/test/registered/perf/test_text_models_perf.py")
    assert re.search(test.match, "test/registered/perf/test_text_models_perf.py")
    assert not re.search(test.match, "test/manual/nightly/test_text_models_perf.py")  # the manual copy


def test_the_bot_loads_the_benchmark_beside_sglangs_accuracy_policy():
    """policies/*.yaml: SGLang's accuracy policy and its performance policy, two files for one repository."""
    loaded, problems = check_dir(ROOT / "policies")
    assert problems == [] and PERF in loaded
    assert [p.name for p, policy in loaded.items() if policy.repository == "sgl-project/sglang"] == [
        "sglang-perf.yaml",
        "sglang.yaml",
    ]


def test_the_benchmark_runs_as_sglangs_nightly_job_runs_it():
    """nightly-test-nvidia.yml's nightly-test-text-perf-2-gpu-h100: `cd test`, run_suite runs `python3 <file> -f`
    (ci_utils.py:193) with the workflow's env and the step's GPU_CONFIG."""
    policy = load(PERF)
    test = policy.test("text-models-perf")
    assert test is not None
    assert probe_argv(test) == ["python3", "registered/perf/test_text_models_perf.py", "-v", "-f"]
    assert test.probe.cwd == "test"
    assert {k: test.probe.env[k] for k in ("SGLANG_IS_IN_CI", "SGLANG_ENABLE_ASYNC_ASSERT", "GPU_CONFIG")} == {
        "SGLANG_IS_IN_CI": "true",
        "SGLANG_ENABLE_ASYNC_ASSERT": "true",
        "GPU_CONFIG": "2-gpu-h100",
    }
    assert test.runner.gpus == 2 and test.runner.labels == ["self-hosted", "2-gpu-h100"]


def test_the_metric_regex_reads_llamas_bs64_output_throughput_from_the_printed_report():
    regex = compile_metric_regex(load(PERF).results.log.metric or "")
    assert metric_from_output(PRINTED, regex) == 4281.36
    # as the job log holds it: GitHub's timestamp before every line, taken off before any regex
    stamped = "".join(f"2026-08-22T14:31:07.1234567Z {line}\n" for line in PRINTED.splitlines())
    assert metric_from_output(plain(stamped), regex) == 4281.36


def test_no_llama_bs64_row_reads_nothing_never_qwens():
    """Llama's run printed no batch-64 row (skipped for the KV cache, say): no reading -- not Qwen2-57B's 2617.32."""
    regex = compile_metric_regex(load(PERF).results.log.metric or "")
    assert metric_from_output(report(LLAMA_ROWS), regex) is None
    assert metric_from_output(HEAD + f"### {QWEN} [2-gpu-h100]\n{TABLE_HEAD}{''.join(QWEN_ROWS)}\n", regex) is None


def test_a_metric_without_threshold_round_trips_through_the_bisection_config_as_none():
    policy = load(PERF)
    test = policy.test("text-models-perf")
    assert test is not None
    config = bisect_config(policy, test, "f" * 40, False, ("TestNightlyTextModelsPerformance.test_bench_one_batch",))
    assert config.threshold is None and config.higher_is_worse is False
    assert config.metric_regex == policy.results.log.metric and not config.metric_file
    again = BisectConfig.from_json(config.to_json())
    assert again == config and again.threshold is None
    rule = again.settings().metric
    assert rule is not None and rule.threshold is None and rule.higher_is_worse is False
    assert TestRun.from_json(again.test_run or {}).cwd == "test"

    grouped = group_config(policy, [(test, ())], "f" * 40, False, None)
    member = BisectConfig.from_json(grouped.to_json()).settings_for("text-models-perf").metric
    assert grouped.members is not None and grouped.members["text-models-perf"]["threshold"] is None
    assert member is not None and member.threshold is None and member.higher_is_worse is False


def test_a_benchmark_is_named_so_where_a_threshold_would_be_printed():
    assert FailingTest("text-models-perf", "llama-3.1-8b_bs64_output_throughput").threshold_text == (
        "benchmark (no threshold)"
    )
    assert FailingTest("kl", "avg_kl_div", 0.002).threshold_text == "0.002"
    assert FailingTest("plain").threshold_text == "-"


def test_a_benchmarks_metrics_artifact_without_a_threshold_decides_nothing():
    test = load(PERF).test("text-models-perf")
    assert test is not None
    assert read_artifacts(test, (), {"metric": {"name": "tput", "value": 4281.36}}) is None
    # with the run's own threshold in the artifact, it still reads (lower is worse)
    reading = read_artifacts(test, (), {"metric": {"name": "tput", "value": 4000.0, "threshold": 4200}})
    assert reading is not None and reading.outcome.name == "FAILED"


def _with_metric(metric: str) -> str:
    return MINIMAL.replace("    match: test_kl\n", f"    match: test_kl\n    metric: {metric}\n")


def test_a_metric_may_leave_out_the_threshold_and_a_given_one_is_a_float():
    assert parse(_with_metric("{name: tput, direction: lower_is_worse}"), "p.yaml").tests[0].metric.threshold is None
    assert parse(_with_metric("{name: kl, threshold: 0.002}"), "p.yaml").tests[0].metric.threshold == 0.002
    assert parse(_with_metric("{name: kl, threshold: '0.002'}"), "p.yaml").tests[0].metric.threshold == 0.002


@pytest.mark.parametrize(
    "threshold, why",
    [
        ("lots", "Input should be a valid number"),
        ("yes", "a threshold is a number (leave it out for a benchmark)"),
        ("true", "a threshold is a number (leave it out for a benchmark)"),
        (".nan", "Input should be a finite number"),
        (".inf", "Input should be a finite number"),
        ("[0.002]", "Input should be a valid number"),
    ],
)
def test_a_threshold_that_is_not_a_number_is_refused_naming_file_key_and_line(threshold, why):
    with pytest.raises(PolicyError) as refused:
        parse(_with_metric(f"{{name: kl, threshold: {threshold}}}"), "p.yaml")
    (problem,) = refused.value.problems
    assert problem.startswith("p.yaml:7: tests[0].metric.threshold: ") and why in problem
    assert "Traceback" not in problem


def test_check_policy_says_a_bad_threshold_in_one_line(cli, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(_with_metric("{name: kl, threshold: lots}"))
    done = cli("check-policy", str(bad))
    assert done.code == 2 and "Traceback" not in done.stderr
    assert f"{bad}:7: tests[0].metric.threshold: Input should be a valid number" in done.stderr
    assert cli("check-policy", str(PERF)).code == 0
