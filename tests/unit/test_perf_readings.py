"""A test's metrics read from a CI job log (bot.domain.perf.readings): SGLang's perf report, a Markdown table per
model, read cell by cell into one reading per metric; a metric the log does not hold is left out, never a crash.

The fixture tests/fixtures/sglang/nightly_text_perf_job.log is the job `nightly-test-text-perf-2-gpu-h100` as GitHub
serves its log: a timestamp before every line, run_suite's Begin/End frame around the file, and the report
NightlyBenchmarkRunner.write_final_report prints (python/sglang/test/nightly_utils.py:356@6ed5780c4f): per model a
`### <model> [2-gpu-h100]` line, generate_markdown_report's header rows (nightly_bench_utils.py:96-111) and one row per
batch size in the form of nightly_bench_utils.py:88 -- batch size 1 twice, as the test asks for [1, 1, 8, 16, 64]. The
numbers are made up; the form is SGLang's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.policy_files import PolicyError, load, parse
from bot.domain.joblog import plain
from bot.domain.perf.readings import by_table, markdown_tables, read, series_of
from bot.domain.policy import Direction, TableCell
from tests.support.policies import MINIMAL

ROOT = Path(__file__).resolve().parents[2]
PERF = load(ROOT / "policies" / "sglang-perf.yaml")
TEST = PERF.test("text-models-perf")
LOG = (ROOT / "tests" / "fixtures" / "sglang" / "nightly_text_perf_job.log").read_text()


def _row_of(model: str, batch: int, which: int = -1) -> list[str]:
    """The fixture's row of that model and batch size (the last one by default), its cells: read without the reader."""
    lines = plain(LOG).splitlines()
    start = lines.index(f"### {model} [2-gpu-h100]")
    rows = []
    for line in lines[start + 3 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == str(batch):
            rows.append(cells)
    return rows[which]


LLAMA, QWEN = "meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2-57B-A14B-Instruct"


def test_every_metric_of_sglangs_perf_report_is_read():
    assert TEST is not None
    got = read(PERF, TEST, LOG)
    expected = {
        f"{short}_bs{bs}_output_throughput": float(_row_of(model, bs)[4])  # the fifth column: output throughput
        for short, model in (("llama-3.1-8b", LLAMA), ("qwen2-57b-a14b", QWEN))
        for bs in (1, 8, 16, 64)
    }
    assert got == expected and len(got) == 8
    assert got["llama-3.1-8b_bs64_output_throughput"] == 4281.36  # the row docs/github-contract.md quotes
    # batch size 1 runs twice: the second row is read, not the first
    assert (
        got["llama-3.1-8b_bs1_output_throughput"] == float(_row_of(LLAMA, 1, -1)[4]) != float(_row_of(LLAMA, 1, 0)[4])
    )


def test_the_table_reading_agrees_with_the_bisections_regex_on_the_metric_both_read():
    """`metric` (what a bisection judges, read with results.log.metric) and its series read the same number."""
    assert TEST is not None and TEST.metric is not None
    (by_regex,) = read(PERF, TEST.model_copy(update={"metrics": []}), LOG).items()
    assert by_regex == (TEST.metric.name, read(PERF, TEST, LOG)[TEST.metric.name])


def test_a_missing_metric_gives_none_never_another_models_and_never_a_crash():
    assert TEST is not None
    no_bs64 = "\n".join(line for line in LOG.splitlines() if "| 64 | 4096 | 15.87 |" not in line)
    got = read(PERF, TEST, no_bs64)
    assert "llama-3.1-8b_bs64_output_throughput" not in got  # not Qwen2-57B's batch-64 row in its place
    assert got["qwen2-57b-a14b_bs64_output_throughput"] == float(_row_of(QWEN, 64)[4]) and len(got) == 7
    # the run crashed before its report: nothing read
    crashed = "\n".join(LOG.splitlines()[:15]) + "\nRuntimeError: CUDA error: an illegal memory access\n"
    assert read(PERF, TEST, crashed) == {}
    assert read(PERF, TEST, "") == {}
    # a cell that holds no number (SGLang prints n/a where it has none) reads nothing
    na = LOG.replace("| 64 | 4096 | 15.87 | 95127.44 | 4281.36 |", "| 64 | 4096 | 15.87 | 95127.44 | n/a |")
    assert "llama-3.1-8b_bs64_output_throughput" not in read(PERF, TEST, na)


def test_a_test_without_its_own_metrics_reads_its_metric_with_the_policy_wide_regex():
    kl = load(ROOT / "policies" / "sglang.yaml")
    test = kl.test("qwen3-next-models")
    assert test is not None and test.metrics == []
    (series,) = series_of(kl, test)
    assert (series.name, series.pattern, series.direction) == (
        "avg_kl_div",
        kl.results.log.metric,
        Direction.HIGHER_IS_WORSE,
    )
    log = "2026-08-22T03:12:45.1234567Z AssertionError: avg_kl_div=0.0065 > threshold=0.002 for Qwen3-Next\n"
    assert read(kl, test, log) == {"avg_kl_div": 0.0065}
    # a test with neither reads nothing
    bare = parse(MINIMAL, "p.yaml")
    assert series_of(bare, bare.tests[0]) == [] and read(bare, bare.tests[0], log) == {}


def _policy(metrics: str):
    return parse(MINIMAL.replace("    match: test_kl\n", f"    match: test_kl\n    metrics:\n{metrics}"), "p.yaml")


def test_a_metric_pattern_of_its_own_reads_the_test_files_own_output():
    """A pattern is read from the test's own output where run_suite framed it: another file's line is not its."""
    policy = _policy(
        "      - {name: decode, direction: lower_is_worse, pattern: 'decode throughput: (?P<value>[0-9.]+)'}\n"
        "      - {name: ttft, direction: higher_is_worse, pattern: 'ttft=(?P<value>\\S+)'}\n"
    )
    test = policy.tests[0]
    log = (
        ".\n.\nBegin (0/1):\npython3 /w/test/test_other.py\n.\n.\ndecode throughput: 1.5\n.\n.\nEnd (0/1):\n"
        "filename='test_other.py', elapsed=3\n.\n.\n"
        ".\n.\nBegin (1/1):\npython3 /w/test/test_kl.py\n.\n.\ndecode throughput: 2.0\ndecode throughput: 2.5\n"
        "ttft=nan\n.\n.\nEnd (1/1):\nfilename='test_kl.py', elapsed=3\n.\n.\n"
    )
    assert read(policy, test, log) == {"decode": 2.5}  # its last match; `nan` is no reading
    assert read(policy, test, "decode throughput: 3.0\n") == {"decode": 3.0}  # no frames: the whole log


def test_table_headers_and_cells_are_compared_without_case_and_runs_of_spaces():
    text = plain(LOG)
    cell = TableCell(column="Input   Throughput (TOK/S)", row={"Batch Size": "16"}, after=r"^### Qwen/")
    assert by_table(cell, text) == float(_row_of(QWEN, 16)[3])
    # no `after`: every table; the last row that matches (Qwen's, printed after Llama's)
    assert by_table(TableCell(column="latency (s)", row={"batch size": "8"}), text) == float(_row_of(QWEN, 8)[2])
    # a column or a selector column the table does not have, a row no table has, an `after` that matches nothing
    assert by_table(TableCell(column="p99 latency", row={"batch size": "8"}), text) is None
    assert by_table(TableCell(column="latency (s)", row={"concurrency": "8"}), text) is None
    assert by_table(TableCell(column="latency (s)", row={"batch size": "128"}), text) is None
    assert by_table(TableCell(column="latency (s)", row={"batch size": "8"}, after="^### DeepSeek"), text) is None


def test_after_reads_the_first_table_of_its_section_only():
    """A section whose table was not printed does not borrow the next section's."""
    text = "### A\nmodel A failed to launch\n### B\n| bs | tput |\n|---|---|\n| 1 | 9.5 |\n"
    assert by_table(TableCell(column="tput", row={"bs": "1"}, after="^### A"), text) is None
    assert by_table(TableCell(column="tput", row={"bs": "1"}, after="^### B"), text) == 9.5
    # a report printed twice (a retried file): the last one
    assert by_table(TableCell(column="tput", row={"bs": "1"}, after="^### B"), text + text.replace("9.5", "8.5")) == 8.5


def test_markdown_tables_are_found_as_printed():
    (table,) = markdown_tables("text\n| a | b \\| c |\n| :-- | --: |\n| 1 | 2 |\n|3|4|\nafter | x |\n")
    assert table.header == ("a", "b | c") and table.rows == (("1", "2"), ("3", "4")) and table.line == 1
    assert markdown_tables("| a | b |\n| 1 | 2 |\n") == []  # no rule row under the header: not a table
    tables = markdown_tables(plain(LOG))
    assert [len(t.rows) for t in tables] == [5, 5] and len(tables[0].header) == 11


@pytest.mark.parametrize(
    "metrics, problem",
    [
        (
            "      - {name: a, direction: lower_is_worse}\n",
            "p.yaml:8: tests[0].metrics[0]: metric a: give `pattern` (a regex with a group `value`) or `table`",
        ),
        (
            "      - {name: a, direction: lower_is_worse, pattern: 'x=([0-9.]+)'}\n",
            "p.yaml:8: tests[0].metrics[0].pattern: a metric's pattern needs a named group `value`",
        ),
        (
            "      - {name: a, direction: lower_is_worse, pattern: 'x=(?P<value>[0-9.]+'}\n",
            "p.yaml:8: tests[0].metrics[0].pattern: not a valid regular expression",
        ),
        (
            "      - {name: a, direction: lower_is_worse, pattern: 'x=(?P<value>.+)',\n"
            "         table: {column: c, row: {b: 1}}}\n",
            "p.yaml:8: tests[0].metrics[0]: metric a: give `pattern`",
        ),
        (
            "      - {name: a, pattern: 'x=(?P<value>.+)'}\n",
            "p.yaml:8: tests[0].metrics[0].direction: Field required",
        ),
        (
            "      - name: a\n        direction: lower_is_worse\n        table: {column: c, row: {b: 1}, aftr: x}\n",
            "p.yaml:10: tests[0].metrics[0].table.aftr: unknown key",
        ),
        (
            "      - {name: a, direction: lower_is_worse, table: {column: c, row: {}}}\n",
            "p.yaml:8: tests[0].metrics[0].table.row: Dictionary should have at least 1 item",
        ),
        (
            "      - {name: a, direction: lower_is_worse, table: {column: c, row: {b: yes}}}\n",
            "p.yaml:8: tests[0].metrics[0].table.row.b: Input should be a valid string",
        ),
        (
            "      - {name: a, direction: lower_is_worse, min_effect: 5, pattern: 'x=(?P<value>.+)'}\n",
            "p.yaml:8: tests[0].metrics[0].min_effect: Input should be less than 1",
        ),
        (
            "      - {name: a, direction: lower_is_worse, pattern: 'x=(?P<value>.+)'}\n"
            "      - {name: a, direction: lower_is_worse, pattern: 'y=(?P<value>.+)'}\n",
            "p.yaml:7: tests[0].metrics: metric names must be unique in a test (each is a series): a",
        ),
    ],
)
def test_a_bad_metric_is_refused_naming_file_line_and_key(metrics, problem):
    with pytest.raises(PolicyError) as refused:
        _policy(metrics)
    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems


def test_one_metric_has_one_direction():
    text = MINIMAL.replace(
        "    match: test_kl\n",
        "    match: test_kl\n    metric: {name: tput, direction: lower_is_worse}\n    metrics:\n"
        "      - {name: tput, direction: higher_is_worse, pattern: 'tput=(?P<value>.+)'}\n",
    )
    with pytest.raises(PolicyError, match="tput is higher_is_worse in `metrics` and lower_is_worse in `metric`"):
        parse(text, "p.yaml")
