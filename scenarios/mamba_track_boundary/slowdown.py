"""The miniature's performance nightly (`build(slowdown=True)`): a decode throughput benchmark, the workflow that
runs it on schedule, and the one commit of the history that makes decode slower.

- `test/perf/test_decode_throughput.py` (from perf/): SGLang's perf report in small -- a Markdown table of latency
  and output throughput per batch size under a `### <model> [<GPU config>]` header -- timed on a model of a GPU
  whose clock moves 2% from run to run; it fails only when the benchmark crashes.
- `.github/workflows/nightly-perf.yml`: one job, `nightly-perf-decode`, on the self-hosted runner, running run_suite's
  `nightly-perf` suite (the suite added to run_suite.py in this tree only).
- The slowdown: the decode step starts keeping its logits' range for overflow monitoring, five more kernels a step:
  output throughput 4.5% lower at batch size 8 and 3.6% at 32 (the benchmark's device model; measured by running it).
"""

from __future__ import annotations

from pathlib import Path

from .edits import Change, Tree, replace

PERF_FILES = Path(__file__).parent / "perf"
PERF_WORKFLOW = ".github/workflows/nightly-perf.yml"
PERF_JOB = "nightly-perf-decode"
PERF_TEST = "perf/test_decode_throughput.py"  # relative to test/, as run_suite runs it

WORKFLOW = f"""\
name: Nightly Perf
# Like SGLang's nightly-test-text-perf job: the suite runner runs the benchmark, whose report is a table per model.

on:
  schedule:
    - cron: "0 14 */2 * *"
  workflow_dispatch:

env:
  MINI_SGLANG_IS_IN_CI: true

jobs:
  {PERF_JOB}:
    runs-on: [self-hosted, linux]
    timeout-minutes: 20
    steps:
      - uses: actions/checkout@v3
      - name: Run benchmark
        run: python3 test/run_suite.py --suite nightly-perf --max-attempts 1
"""

SUITE_ANCHOR = '    "nightly-accuracy": lambda: sorted(glob.glob("test/nightly/test_*.py", root_dir=ROOT)),\n'
PERF_SUITE = '    "nightly-perf": lambda: sorted(glob.glob("test/perf/test_*.py", root_dir=ROOT)),\n'


def perf_tree(tree: Tree) -> None:
    """The first commit's tree, with the benchmark, its workflow and run_suite's suite for it."""
    for path in sorted(PERF_FILES.rglob("*.py")):
        tree[path.relative_to(PERF_FILES).as_posix()] = path.read_text()
    tree[PERF_WORKFLOW] = WORKFLOW
    if SUITE_ANCHOR not in tree["test/run_suite.py"]:
        raise AssertionError("scenario builder: run_suite.py's suites moved")
    tree["test/run_suite.py"] = tree["test/run_suite.py"].replace(SUITE_ANCHOR, SUITE_ANCHOR + PERF_SUITE)


LOGITS = '        logits = splitk_matmul(hidden, w["lm_head"], kernel, bias=w["lm_bias"])\n'
WATCH = (
    "        # the logits' range and spread, kept for the overflow monitor (bf16 saturates past 3.4e38)\n"
    "        self.logit_range = torch.stack([logits.amin(), logits.amax(), logits.mean(), logits.std()])\n"
)
SLOWDOWN_TITLE = "[Observability] Keep the decode logits' range for bf16 overflow monitoring"


def slowdown_change() -> Change:
    return Change(
        "feature",
        SLOWDOWN_TITLE,
        "A bf16 overflow in the logits shows up as NaN logprobs long after the step that overflowed. Keep each "
        "decode step's logit range and spread on the model so the overflow monitor can read it.",
        # Only lines no later commit touches, so that it reverts cleanly on HEAD.
        replace("mini_sglang/model.py", LOGITS, LOGITS + WATCH),
        ("`model.py`: `decode_step` keeps the logits' min, max, mean and std in `logit_range`.",),
    )
