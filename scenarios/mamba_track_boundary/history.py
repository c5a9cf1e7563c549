"""The contents of the scenario's history: the files of the first commit, the incident's changes (the culprit,
the deliberately unbuildable commits, dependency pins, releases); the everyday changes are in `pools`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from .edits import Change, Tree, append, chain, put, replace

TEMPLATE = Path(__file__).parent / "template"
STEP_WORKFLOW = Path(__file__).resolve().parents[2] / "runners" / "github" / "revert-bisect-step.yml"

AUTHORS = [  # fictional: name, email, GitHub login, UTC offset
    ("Mei Tanaka", "mei.tanaka@example.com", "meitanaka", "+0900"),
    ("Oluwaseun Adeyemi", "seun.adeyemi@example.org", "seun-a", "+0100"),
    ("Priya Raman", "priya.raman@example.com", "praman-dev", "+0530"),
    ("Lukas Brenner", "lukas.brenner@example.net", "lbrenner", "+0200"),
    ("Chen Yufei", "chen.yufei@example.com", "yufei-chen", "+0800"),
    ("Sofia Marquez", "sofia.marquez@example.org", "smarquez", "-0500"),
    ("Daniel Okafor", "daniel.okafor@example.com", "dokafor", "+0000"),
    ("Hana Kowalski", "hana.kowalski@example.net", "hkowalski", "+0100"),
    ("Arjun Mehta", "arjun.mehta@example.com", "arjunm", "-0700"),
    ("Zhang Wei", "zhang.wei@example.org", "zwei-infra", "+0800"),
    ("Elena Petrova", "elena.petrova@example.com", "epetrova", "+0300"),
    ("Tom Lindqvist", "tom.lindqvist@example.net", "tlindqvist", "+0100"),
]
CULPRIT_AUTHOR = 4  # Chen Yufei owns the Mamba cache code
FOLLOWUP_AUTHOR = 2


# -- the first commit --


def initial_tree(flake_rate: float, version: str) -> Tree:
    tree: Tree = {}
    for path in sorted((TEMPLATE / "mini_sglang").glob("*.py")):
        tree[f"mini_sglang/{path.name}"] = path.read_text()
    config = tree["mini_sglang/config.py"].replace(
        "STATE_RESTORE_FAULT_RATE = 0.0", f"STATE_RESTORE_FAULT_RATE = {flake_rate!r}"
    )
    if flake_rate > 0:  # a flaky host: its kernels are tuned afresh at every start, so readings jitter too
        config = config.replace("KERNEL_AUTOTUNE = False", "KERNEL_AUTOTUNE = True")
    tree["mini_sglang/config.py"] = config
    tree["mini_sglang/version.py"] = f'__version__ = "{version}"\n'
    tree.update(STATIC_FILES)
    for path in sorted((TEMPLATE / "test").rglob("*.py")):  # the nightly's suite runner and its tests
        tree[path.relative_to(TEMPLATE).as_posix()] = path.read_text()
    tree["pyproject.toml"] = PYPROJECT.format(version=version)
    tree[".github/workflows/revert-bisect-step.yml"] = STEP_WORKFLOW.read_text()  # installed as its README says
    return tree


PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "mini-sglang"
version = "{version}"
description = "A miniature serving engine for a recurrent (Mamba-like) language model"
requires-python = ">=3.10"
license = {{ text = "Apache-2.0" }}
dependencies = ["torch>=2.4"]

[tool.setuptools.packages.find]
include = ["mini_sglang*"]
"""

STATIC_FILES: Tree = {
    ".gitignore": "__pycache__/\n*.pyc\n*.egg-info/\n.venv/\nbuild/\ndist/\n*.log\n",
    "LICENSE": (
        "Copyright 2026 The mini-sglang Authors\n\n"
        'Licensed under the Apache License, Version 2.0 (the "License"); you may not use this file except in\n'
        "compliance with the License. You may obtain a copy of the License at\n\n"
        "    http://www.apache.org/licenses/LICENSE-2.0\n\n"
        "Unless required by applicable law or agreed to in writing, software distributed under the License is\n"
        'distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or\n'
        "implied. See the License for the specific language governing permissions and limitations under the\n"
        "License.\n"
    ),
    "README.md": """\
# mini-sglang

A miniature serving engine for a recurrent (Mamba-like) language model, with a prefix cache that
checkpoints decode states and an overlap scheduler. It speaks the subset of SGLang's native HTTP
API that accuracy tests use.

## Quick start

```sh
pip install torch
python -m mini_sglang.launch_server --port 30000 --track-interval 8
curl -s localhost:30000/generate -d '{"input_ids": [5, 9, 12], \
"sampling_params": {"temperature": 0, "max_new_tokens": 8}}'
```

## Layout

- `mini_sglang/model.py`: TinyMamba, the recurrent model (CPU; prefill in float32, decode in bf16)
- `mini_sglang/kernels.py`: the decode path's bf16 split-K matmul and its tuned reduction order
- `mini_sglang/mamba_cache.py`: the prefix cache of state checkpoints
- `mini_sglang/scheduler.py`: requests, prefill and the overlap decode loop
- `mini_sglang/engine.py`, `server.py`, `launch_server.py`: the HTTP front end

See `docs/` for the design notes.
""",
    "docs/mamba_prefix_cache.md": """\
# The Mamba prefix cache

A recurrent layer keeps one state per request and overwrites it at every token, so the cache
cannot slice a prefix out of a longer sequence the way a KV cache can. It can only hand out a
state that was saved at an exact length.

During decode, every `--track-interval` tokens the forward pass copies the request's state into
one of two ping-pong *track slots*. Processing the step's result names that slot the latest
checkpoint and records the length it covers in `mamba_last_track_seqlen`. When the request
finishes, the prefix of that length is inserted into the cache with the checkpoint.

A later request whose prompt extends a cached prefix resumes from the checkpoint and prefills
only the rest; `meta_info.cached_tokens` reports how many tokens were reused.
""",
    "docs/overlap_scheduler.md": """\
# The overlap scheduler

To keep the device busy, the scheduler prepares and launches decode step N+1 before it
processes the result of step N. Preparing a step commits one more token for every request in
the batch (`kv_committed_len`, `decode_batch_idx`). While a result is processed, a request's
counters may therefore lead the result by one step: the *lookahead*, 0 or 1.

Anything recorded while processing a result must be computed from the result's own lengths, or
corrected by the lookahead.
""",
    "docs/server_api.md": """\
# Server API

- `POST /generate`: `input_ids` (one list, or a list of lists for a batch), `sampling_params`
  (`temperature`, `max_new_tokens`, `ignore_eos`), `return_logprob`, `logprob_start_len`.
  The answer (a list for a batch) has `text`, `output_ids` and `meta_info`.
- `POST /flush_cache`: drop the prefix cache.
- `GET /get_server_info` (or `/server_info`), `GET /health`, `GET /health_generate`.
""",
    "docs/benchmarks.md": """\
# Benchmarks

Single CPU thread, batch 16, 20-token prompts, 24 new tokens.

| version | prefill tok/s | decode tok/s |
|---|---|---|
| 0.2.0 | 11,900 | 2,450 |
""",
    ".github/workflows/pr-test.yml": """\
name: PR Test

on:
  pull_request:
    branches: [main]

jobs:
  unit-test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        python-version: ["3.10", "3.11"]
    steps:
      - uses: actions/checkout@v3
      - uses: actions/setup-python@v5
        with:
          python-version: ${{ matrix.python-version }}
      - run: pip install torch --index-url https://download.pytorch.org/whl/cpu
      - run: python -m compileall -q mini_sglang
      - run: python -m pytest -q test
    timeout-minutes: 20
""",
    # Like SGLang's PR Test Base on `schedule`: each test stage a call of one reusable workflow (SGLang's
    # _pr-test-stage.yml), whose suite partitions are a matrix of its own, so its jobs are named
    # `<stage> / <stage> (<partition>)`; run_suite's report in each job's log; the accuracy stage alone runs the KL
    # test; a job for pull requests only, skipped on schedule.
    ".github/workflows/nightly-test.yml": """\
name: Nightly Test
run-name: ${{ github.event_name == 'schedule' && 'Scheduled Full Run' || 'Nightly Test' }}

on:
  schedule:
    - cron: "0 11,23 * * *"
  workflow_dispatch:
  pull_request:

env:
  MINI_SGLANG_IS_IN_CI: true

jobs:
  stage-a-test-cpu:
    uses: ./.github/workflows/_nightly-stage.yml
    with:
      self_name: stage-a-test-cpu
      suite: stage-a-test-cpu
      partitions: '[0, 1]'
      run_timeout_minutes: '20'

  stage-b-test-accuracy:
    uses: ./.github/workflows/_nightly-stage.yml
    with:
      self_name: stage-b-test-accuracy
      suite: nightly-accuracy
      partitions: '[0]'
      run_timeout_minutes: '30'

  multimodal-gen-test:
    if: github.event_name == 'pull_request'
    runs-on: [self-hosted, linux]
    steps:
      - uses: actions/checkout@v3
      - run: python3 test/run_suite.py --suite stage-a-test-cpu
    timeout-minutes: 20
""",
    ".github/workflows/_nightly-stage.yml": """\
name: Nightly Test Stage
# One test stage of the nightly (a reusable workflow): the stage's suite, split into partitions.

on:
  workflow_call:
    inputs:
      self_name:
        description: 'The calling job: names the jobs'
        type: string
        required: true
      suite:
        type: string
        required: true
      partitions:
        description: 'A JSON list of partition ids'
        type: string
        required: true
      run_timeout_minutes:
        type: string
        required: true

env:
  MINI_SGLANG_IS_IN_CI: true  # CustomTestCase retries a failed test method once in CI, like SGLANG_IS_IN_CI

jobs:
  run:
    name: ${{ inputs.self_name }} (${{ matrix.partition }})
    strategy:
      fail-fast: false  # a failed partition must not cancel the others (GitHub's default would)
      matrix:
        partition: ${{ fromJson(inputs.partitions) }}
    runs-on: [self-hosted, linux]
    timeout-minutes: ${{ fromJson(inputs.run_timeout_minutes) }}
    steps:
      - uses: actions/checkout@v3
      - name: Run test
        run: |
          python3 test/run_suite.py --suite ${{ inputs.suite }} \\
            --auto-partition-id ${{ matrix.partition }} --auto-partition-size ${{ strategy.job-total }}
""",
    "test/test_tokenizer.py": """\
from mini_sglang.tokenizer import CharTokenizer


def test_round_trip():
    tok = CharTokenizer()
    assert tok.decode(tok.encode("hello world.")) == "hello world."
""",
}


# -- the server flag renamed inside the range --

OLD_TRACK_FLAG, NEW_TRACK_FLAG = "--track-interval", "--mamba-track-interval"
FLAG_RENAME_TITLE = f"[Server] Rename {OLD_TRACK_FLAG} to {NEW_TRACK_FLAG}"


def flag_rename_change() -> Change:
    """The old flag is gone (no alias), and the nightly's KL test passes the new one: each commit's own test
    carries the flags that commit accepts, as SGLang's test files do (--mamba-scheduler-strategy became
    --mamba-radix-cache-strategy there)."""
    old, new = OLD_TRACK_FLAG, NEW_TRACK_FLAG

    def apply(tree: Tree) -> None:
        path = "mini_sglang/launch_server.py"
        text = tree[path]
        for before, after in (
            (f'add_argument("{old}", dest="track_interval"', f'add_argument("{new}", dest="track_interval"'),
            (f'parser.error("{old} must be at least 2")', f'parser.error("{new} must be at least 2")'),
            (f"[{old} N]", f"[{new} N]"),
        ):
            if before not in text:
                raise AssertionError(f"scenario builder: {before!r} not in {path}")
            text = text.replace(before, after)
        tree[path] = text
        for path in ("test/nightly/test_kl_decode_cache_hit.py", "test/test_server_args.py"):
            if path in tree:
                tree[path] = tree[path].replace(f'"{old}"', f'"{new}"')
        tree["README.md"] = tree["README.md"].replace(f" {old} ", f" {new} ")
        doc = "docs/mamba_prefix_cache.md"
        tree[doc] = tree[doc].replace(f"`{old}`", f"`{new}`")

    return Change(
        "refactor",
        FLAG_RENAME_TITLE,
        f"Every Mamba-specific server flag carries the `--mamba-` prefix, as upstream. Rename `{old}` to `{new}`; "
        "the old name is removed rather than kept as an alias, so stale launch scripts fail loudly.",
        apply,
        (
            f"`launch_server.py`: `{old}` is now `{new}`.",
            "`test/nightly/test_kl_decode_cache_hit.py`, README, docs: the new flag.",
        ),
    )


# -- the culprit --

GOOD_BOUNDARY = """\
                # Under overlap the next step may already be prepared: kv_committed_len then
                # leads the snapshotted position by the lookahead.
                req.mamba_last_track_seqlen = req.kv_committed_len - lookahead
"""
BAD_BOUNDARY = """\
                # Record the committed length as the tracked seqlen: under overlap the boundary
                # step's length is what the scheduler has committed for this request.
                req.mamba_last_track_seqlen = req.kv_committed_len
"""

CULPRIT_TITLE = "[Mamba] Fix track boundary seqlen under overlap scheduler"


def culprit_change() -> Change:
    return Change(
        "culprit",
        CULPRIT_TITLE,
        "With the overlap scheduler, a request that finishes right after a track boundary cached "
        "one token less than the boundary it had committed, so a follow-up turn re-prefilled a "
        "token it could have reused. Record the committed length as the tracked seqlen when a "
        "decode step lands on a track boundary.",
        # Only lines no later commit touches, so that the culprit reverts cleanly on HEAD.
        chain(
            replace("mini_sglang/scheduler.py", GOOD_BOUNDARY, BAD_BOUNDARY),
            put("test/test_mamba_track_overlap.py", CULPRIT_TEST),
        ),
        (
            "`scheduler.py`: `mamba_last_track_seqlen` is the committed length at the boundary step "
            "(no lookahead correction).",
            "`test/test_mamba_track_overlap.py`: a finished request caches through the committed boundary.",
        ),
    )


# -- the second regression (builder.build(regressions=2)): another commit inside the range breaks another test --

LOGPROB_GUARD = """\
        if req.return_logprob and req.logprob_start_len >= 0:
            # Input logprobs from logprob_start_len on must be computed, not read from the cache.
            max_prefix_len = min(max_prefix_len, req.logprob_start_len)
"""
SECOND_CULPRIT_TITLE = "[Perf] Let logprob requests reuse the prefix cache"
EXTRA_TESTS = Path(__file__).parent / "extra"  # the nightly's other accuracy tests, when the incident has two culprits


def extra_tests() -> Tree:
    """The nightly files an incident with two regressions runs beside the KL test: one the track-boundary culprit
    breaks too (a resumed turn's first token), one only the second culprit breaks (input logprobs past a cache hit)."""
    return {f"test/nightly/{path.name}": path.read_text() for path in sorted(EXTRA_TESTS.glob("test_*.py"))}


def second_culprit_change() -> Change:
    return Change(
        "perf",
        SECOND_CULPRIT_TITLE,
        "Requests with `return_logprob` skipped the prefix cache from `logprob_start_len` on, so an eval harness "
        "that scores many continuations of one prompt prefilled the prompt every time. Match the prefix cache for "
        "them like for any other request.",
        # Only lines no later commit touches, so that it reverts cleanly on HEAD.
        replace("mini_sglang/scheduler.py", LOGPROB_GUARD, ""),
        ("`scheduler.py`: a logprob request matches the prefix cache like any other.",),
    )


CULPRIT_TEST = """\
from mini_sglang.config import ServerArgs
from mini_sglang.engine import Engine


def test_finished_request_caches_through_the_committed_boundary():
    engine = Engine(ServerArgs(mamba_track_interval=8))
    prompt = list(range(1, 21))
    params = {"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}
    first = engine.generate({"input_ids": prompt, "sampling_params": params})
    second = engine.generate({"input_ids": prompt + first["output_ids"] + [11], "sampling_params": params})
    # 20 prompt tokens + 23 decoded: the boundary at 40 is committed as 41 under overlap.
    assert second["meta_info"]["cached_tokens"] >= 41
"""


# -- unbuildable commits and their fixes --

BROKEN_HELPERS = [
    (
        "mini_sglang/utils.py",
        "format_bytes",
        '''

def format_bytes(num_bytes: float) -> str:
    """A human-readable size, for the cache logs."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(num_bytes) < 1024.0{colon}
            return f"{{num_bytes:.1f}} {{unit}}"
        num_bytes /= 1024.0
    return f"{{num_bytes:.1f}} TiB"
''',
    ),
    (
        "mini_sglang/mamba_cache.py",
        "longest_key_len",
        '''

def longest_key_len(keys) -> int:
    """The length of the longest cached prefix (0 when empty)."""
    return max((len(k) for k in keys), default=0{paren}
''',
    ),
    (
        "mini_sglang/tokenizer.py",
        "is_printable",
        '''

def is_printable(token_ids: list[int]) -> bool:
    """Whether every id maps to a character of the alphabet."""
    return all(0 <= t < len(ALPHABET) for t in token_ids{paren}
''',
    ),
    (
        "mini_sglang/utils.py",
        "percentile",
        '''

def percentile(values: list[float], q: float) -> float:
    """The q-th percentile of `values` by nearest rank (0.0 when empty)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))){paren}]
''',
    ),
    (
        "mini_sglang/engine.py",
        "summarize_batch",
        '''

def summarize_batch(reqs) -> dict:
    """Counts for the batch log line."""
    return {{"seqs": len(reqs), "cached": sum(r.cached_tokens for r in reqs){brace}
''',
    ),
]


def _helper_text(template: str, broken: bool, suffix: str) -> str:
    text = template.format(colon="" if broken else ":", paren="" if broken else ")", brace="" if broken else "}")
    return text.replace("(", f"{suffix}(", 1) if suffix else text


def broken_pair(k: int) -> tuple[Change, Callable[[int], Change]]:
    """The k-th unbuildable change, and a factory for its fix (given the broken PR's number)."""
    path, name, template = BROKEN_HELPERS[k % len(BROKEN_HELPERS)]
    suffix = "" if k < len(BROKEN_HELPERS) else f"_v{k // len(BROKEN_HELPERS) + 1}"
    fname = name + suffix
    broken, fixed = _helper_text(template, True, suffix), _helper_text(template, False, suffix)
    module = path.split("/")[-1]
    change = Change(
        "broken",
        f"[Refactor] Add {fname} helper to {module}",
        "Small helper for the logging work in progress; no behaviour change.",
        append(path, broken),
        (f"`{path}`: add `{fname}`.",),
    )

    def fix(broken_pr: int) -> Change:
        return Change(
            "fix",
            f"[Hotfix] Fix syntax error in {module} from #{broken_pr}",
            f"#{broken_pr} left `{fname}` in `{path}` unparsable, so the package fails to import. Fix the expression.",
            replace(path, broken, fixed),
            (f"`{path}`: close the expression in `{fname}`.",),
        )

    return change, fix


# -- version bumps --

# The only changes of the history that touch the dependency pins (each is a new environment on a
# runner); every dependency here is met by the interpreter the demo and the tests run under.
DEPENDENCY_PINS = (
    (
        "[Deps] Require torch>=2.5",
        "The overlap scheduler uses `torch.inference_mode` semantics from 2.5.",
        ["torch>=2.5"],
    ),
    (
        "[Deps] Add packaging for version checks",
        "`launch_server` compares versions with `packaging.version`.",
        ["torch>=2.5", "packaging>=23"],
    ),
    ("[Deps] Require torch>=2.6", "Align with the minimum the CI images ship.", ["torch>=2.6", "packaging>=23"]),
)


def pins_change(k: int) -> Change:
    title, summary, deps = DEPENDENCY_PINS[k]

    def apply(tree: Tree) -> None:
        text = tree["pyproject.toml"]
        new = re.sub(r"(?m)^dependencies = \[.*\]$", "dependencies = " + json.dumps(deps), text)
        if new == text:
            raise AssertionError("scenario builder: no dependencies line in pyproject.toml")
        tree["pyproject.toml"] = new

    return Change("chore", title, summary, apply, ("`pyproject.toml`: dependency pins.",))


def release_change(version: str) -> Change:
    return Change(
        "release",
        f"Bump version to {version}",
        f"Release {version}.",
        chain(
            put("mini_sglang/version.py", f'__version__ = "{version}"\n'),
            lambda tree: tree.__setitem__("pyproject.toml", _set_version(tree["pyproject.toml"], version)),
        ),
        ("`pyproject.toml`, `mini_sglang/version.py`: version bump.",),
    )


def _set_version(pyproject: str, version: str) -> str:
    lines = [f'version = "{version}"' if line.startswith("version = ") else line for line in pyproject.splitlines()]
    return "\n".join(lines) + "\n"
