"""The everyday changes of the scenario's history: docs, CI, refactors, features, tests, benchmarks, chores.

Every one keeps the engine working. The builder consumes them in a seeded order; when they run dry, `filler`
changes make more.
"""

from __future__ import annotations

import random

from .edits import Change, append, chain, insert_after, insert_before, put, replace
from .history import NEW_TRACK_FLAG, OLD_TRACK_FLAG


def pools() -> dict[str, list[Change]]:
    S, M = "mini_sglang/scheduler.py", "mini_sglang/mamba_cache.py"
    E, SV, L = "mini_sglang/engine.py", "mini_sglang/server.py", "mini_sglang/launch_server.py"
    U, T, CFG = "mini_sglang/utils.py", "mini_sglang/tokenizer.py", "mini_sglang/config.py"
    PR_YML, NIGHTLY = ".github/workflows/pr-test.yml", ".github/workflows/nightly-test.yml"
    STAGE = ".github/workflows/_nightly-stage.yml"
    return {
        "docs": [
            Change(
                "docs",
                "[Docs] Document mamba_track_interval and its memory cost",
                "Users ask how to choose the track interval. Explain the trade-off between checkpoint "
                "memory and the number of tokens a follow-up turn must re-prefill.",
                append(
                    "docs/mamba_prefix_cache.md",
                    "\n## Choosing the track interval\n\nA smaller interval "
                    "caches longer prefixes (at most `interval - 1` tokens are re-prefilled) at the cost of "
                    "one state copy every `interval` decode steps. Each request holds two slots.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Add logprob scenarios to the server API guide",
                "Show how `return_logprob` and `logprob_start_len` shape `input_token_logprobs`.",
                append(
                    "docs/server_api.md",
                    "\n## Logprobs\n\n`input_token_logprobs` and `output_token_logprobs` "
                    "are lists of `[logprob, token_id, null]`. With `logprob_start_len=0` the first input "
                    "entry is `null`: nothing predicts the first token.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Explain the overlap scheduler's lookahead with an example",
                "The lookahead confuses new contributors; walk through two overlapped steps.",
                append(
                    "docs/overlap_scheduler.md",
                    "\n## Example\n\nStep 7 is launched, then step 8 is "
                    "prepared (`kv_committed_len` 8 -> 9) before step 7's result is processed: while "
                    "processing step 7 the lookahead is 1.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Fix broken links in README",
                "The layout section pointed at files that moved.",
                replace(
                    "README.md",
                    "See `docs/` for the design notes.",
                    "See [the prefix cache](docs/mamba_prefix_cache.md), [the overlap scheduler]"
                    "(docs/overlap_scheduler.md) and [the server API](docs/server_api.md).",
                ),
            ),
            Change(
                "docs",
                "[Docs] Add a troubleshooting section for decode cache misses",
                "Collect the usual reasons a second turn reports `cached_tokens` at the prompt length.",
                append(
                    "docs/mamba_prefix_cache.md",
                    "\n## Troubleshooting\n\n- `cached_tokens` stops at the "
                    "prompt: the first turn ended before reaching a track boundary.\n- No hit at all: the "
                    "cache was flushed, or `--disable-radix-cache` is set.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Describe the nightly KL accuracy tests",
                "Document what the nightly decode-cache-hit KL test checks and its threshold.",
                put(
                    "docs/testing.md",
                    "# Testing\n\nUnit tests run on every PR (`pytest test`). The nightly "
                    "accuracy job runs the decode-cache-hit KL check: two-turn generation, then a cold "
                    "prefill of the second turn; the mean KL of the logprobs must stay below 0.002.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Add a contribution guide",
                "How to set up, test and title a PR.",
                put(
                    "CONTRIBUTING.md",
                    "# Contributing\n\n1. `pip install -e .` and `pip install pytest`.\n"
                    "2. `python -m pytest -q test`.\n3. Title PRs with a `[Area]` prefix, e.g. `[Mamba]`, "
                    "`[Docs]`, `[CI]`.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Note page_size constraints for recurrent models",
                "The track interval must be a multiple of the page size.",
                append(
                    "docs/server_api.md",
                    "\n`page_size` is 1 for this model; the track interval must be a multiple of it.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Update benchmark numbers for 0.3",
                "Re-ran the decode benchmark after the scheduler changes.",
                append("docs/benchmarks.md", "| 0.3.0 | 12,400 | 2,610 |\n"),
            ),
            Change(
                "docs",
                "[Docs] Fix typos in the scheduler docs",
                "Typo fixes.",
                replace("docs/overlap_scheduler.md", "To keep the device busy, the", "To keep the device busy the"),
            ),
            Change(
                "docs",
                "[Docs] Add an FAQ",
                "Answers to the questions that keep coming up in issues.",
                put(
                    "docs/faq.md",
                    "# FAQ\n\n**Why is `cached_tokens` not a multiple of the page size?** The "
                    "cache stores recurrent states at track boundaries, not pages.\n\n**Is decoding "
                    "deterministic?** At temperature 0, yes.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Document flush_cache semantics",
                "Flushing drops every checkpoint; running requests are not affected.",
                append(
                    "docs/server_api.md",
                    "\n`/flush_cache` drops every cached checkpoint. It is what "
                    "accuracy tests call between turns to force a cold prefill.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Add an architecture overview",
                "One page that connects the model, the cache, the scheduler and the server.",
                put(
                    "docs/architecture.md",
                    "# Architecture\n\n`server.py` parses requests -> `engine.py` "
                    "builds `Req`s -> `scheduler.py` runs prefill (resuming from `mamba_cache.py`) and the "
                    "overlapped decode loop -> `model.py` advances the states.\n",
                ),
            ),
            Change(
                "docs",
                "[Docs] Clarify cached_tokens in meta_info",
                "`cached_tokens` counts prompt tokens served from a checkpoint.",
                append(
                    "docs/server_api.md",
                    "\n`meta_info.cached_tokens` is the number of prompt tokens "
                    "whose state came from a cached checkpoint instead of a prefill.\n",
                ),
            ),
        ],
        "ci": [
            Change(
                "ci",
                "[CI] Add Python 3.12 to the unit-test matrix",
                "Test the newest supported Python.",
                replace(PR_YML, 'python-version: ["3.10", "3.11"]', 'python-version: ["3.10", "3.11", "3.12"]'),
            ),
            Change(
                "ci",
                "[CI] Cache pip downloads in PR tests",
                "Cuts about a minute from each PR run.",
                replace(
                    PR_YML,
                    "          python-version: ${{ matrix.python-version }}\n",
                    "          python-version: ${{ matrix.python-version }}\n          cache: pip\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Bump nightly accuracy timeout to 45 minutes",
                "The nightly job timed out twice last week while the runners were busy.",
                replace(NIGHTLY, "      run_timeout_minutes: '30'\n", "      run_timeout_minutes: '45'\n"),
            ),
            Change(
                "ci",
                "[CI] Pin actions/checkout to v4",
                "v3 runs on a deprecated Node version.",
                chain(
                    replace(PR_YML, "actions/checkout@v3", "actions/checkout@v4"),
                    replace(NIGHTLY, "actions/checkout@v3", "actions/checkout@v4"),
                    replace(STAGE, "actions/checkout@v3", "actions/checkout@v4"),
                ),
            ),
            Change(
                "ci",
                "[CI] Cancel superseded PR runs",
                "Add a concurrency group per branch.",
                replace(
                    PR_YML,
                    "\njobs:\n",
                    "\nconcurrency:\n  group: pr-test-${{ github.ref }}\n  cancel-in-progress: true\n\njobs:\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Add a lint workflow",
                "Run ruff on pull requests.",
                put(
                    ".github/workflows/lint.yml",
                    "name: Lint\n\non:\n  pull_request:\n\njobs:\n  ruff:\n"
                    "    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n"
                    "      - run: pipx run ruff check mini_sglang\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Upload server logs when the nightly fails",
                "Debugging failures needs the logs.",
                append(  # a step of the stage's job, after the suite's (the reusable workflow ends with it)
                    STAGE,
                    "      - if: failure()\n        uses: actions/upload-artifact@v4\n"
                    "        with:\n          name: server-logs-${{ inputs.self_name }}-${{ matrix.partition }}\n"
                    "          path: '*.log'\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Skip PR tests for docs-only changes",
                "Docs PRs do not need the unit tests.",
                replace(
                    PR_YML,
                    "    branches: [main]\n",
                    "    branches: [main]\n    paths-ignore:\n      - 'docs/**'\n      - '*.md'\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Add a stale-issue workflow",
                "Close issues without activity for 90 days.",
                put(
                    ".github/workflows/stale.yml",
                    'name: Stale\n\non:\n  schedule:\n    - cron: "0 5 * * 1"\n\n'
                    "jobs:\n  stale:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/stale@v9\n"
                    "        with:\n          days-before-stale: 90\n",
                ),
            ),
            Change(
                "ci",
                "[CI] Run the nightly on workflow_call too",
                "Let release workflows reuse it.",
                replace(NIGHTLY, "  workflow_dispatch:\n", "  workflow_dispatch:\n  workflow_call:\n"),
            ),
        ],
        "refactor": [
            Change(
                "refactor",
                "[Refactor] Move batching helpers into utils",
                "Shared by the server and benchmarks.",
                append(
                    U,
                    '\n\ndef chunked(items: list, size: int) -> list[list]:\n    """`items` in '
                    'consecutive chunks of at most `size`."""\n    return [items[i : i + size] for i in '
                    "range(0, len(items), size)]\n",
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Add MambaPrefixCache.evictable_size",
                "Needed by the upcoming eviction policy.",
                insert_before(
                    M,
                    "    def stats(self) -> dict:\n",
                    "    def evictable_size(self) -> int:\n        return sum(len(k) for k in self._entries)\n\n",
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Give DecodeBatch a __len__",
                "Reads better in the scheduler logs.",
                insert_after(
                    S,
                    "    next_token_logprobs: list[float] = field(default_factory=list)\n",
                    "\n    def __len__(self) -> int:\n        return len(self.reqs)\n",
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Use HTTPStatus for request errors",
                "No more bare status numbers.",
                chain(
                    replace(E, "    status_code = 400\n", "    status_code = HTTPStatus.BAD_REQUEST\n"),
                    replace(E, "import threading\n", "import threading\nfrom http import HTTPStatus\n"),
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Add CharTokenizer.is_valid_id",
                "Share the id check with the engine.",
                insert_before(
                    T,
                    "    def decode(self, token_ids: list[int]) -> str:\n",
                    "    def is_valid_id(self, token_id: int) -> bool:\n        return 0 <= token_id < "
                    "self.vocab_size\n\n",
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Log prefix cache stats on flush",
                "Makes flushes visible in the logs.",
                replace(
                    E,
                    '        logger.info("Cache flushed successfully!")\n',
                    '        logger.info(f"Cache flushed successfully! {self.cache.stats()}")\n',
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Name the number of track slots",
                "A constant instead of a bare 2.",
                chain(
                    replace(S, "EOS_TOKEN_ID = 0\n", "EOS_TOKEN_ID = 0\nNUM_TRACK_SLOTS = 2  # ping-pong\n"),
                    replace(
                        S,
                        "torch.zeros(2, self.model.state_size)",
                        "torch.zeros(NUM_TRACK_SLOTS, self.model.state_size)",
                    ),
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Add ServerArgs.url",
                "Used by the benchmarks and logs.",
                append(
                    CFG,
                    '\n    @property\n    def url(self) -> str:\n        return f"http://{self.host}:{self.port}"\n',
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Add Req.seqlen",
                "Reads better than len(all_token_ids()).",
                insert_before(
                    S,
                    "\n\n@dataclass\nclass DecodeBatch:\n",
                    "\n    @property\n    def seqlen(self) -> int:\n        return "
                    "len(self.origin_input_ids) + len(self.output_ids)\n",
                ),
            ),
            Change(
                "refactor",
                "[Refactor] Document the model's two code paths",
                "Docstrings only.",
                replace(
                    "mini_sglang/model.py",
                    '        """Prefill `token_ids` into one request\'s `state` (1, D), in place.\n',
                    '        """Prefill `token_ids` into one request\'s `state` (1, D), in place (the extend path).\n',
                ),
            ),
        ],
        "feature": [
            Change(
                "feature",
                "[Feature] Add /get_load endpoint",
                "Routers need the number of queued requests.",
                chain(
                    insert_before(
                        SV,
                        '            if path == "/flush_cache"',
                        '            if path == "/get_load" and method == "GET":\n'
                        '                return self._json(200, {"num_reqs": 0, "num_waiting_reqs": 0})\n',
                    )
                ),
            ),
            Change(
                "feature",
                "[Feature] Add --max-running-requests",
                "Expose the batch cap on the command line.",
                chain(
                    insert_before(
                        L,
                        '    parser.add_argument("--disable-radix-cache", action="store_true")\n',
                        '    parser.add_argument("--max-running-requests", type=int, default=256)\n',
                    ),
                    replace(
                        L,
                        "disable_overlap_schedule=args.disable_overlap_schedule)",
                        "disable_overlap_schedule=args.disable_overlap_schedule,\n"
                        "                      max_running_requests=args.max_running_requests)",
                    ),
                ),
            ),
            Change(
                "feature",
                "[Feature] Add a /metrics endpoint",
                "Prometheus-style counters for dashboards.",
                insert_before(
                    SV,
                    '            if path == "/flush_cache"',
                    '            if path == "/metrics" and method == "GET":\n'
                    '                text = f"mini_sglang_num_requests_total {self.engine.num_requests}\\n"\n'
                    '                return self._send(200, text.encode(), "text/plain; version=0.0.4")\n',
                ),
            ),
            Change(
                "feature",
                "[Feature] Add --context-length",
                "Allow longer conversations in tests.",
                chain(
                    insert_before(
                        L,
                        '    parser.add_argument("--disable-radix-cache", action="store_true")\n',
                        '    parser.add_argument("--context-length", type=int, default=4096)\n',
                    ),
                    replace(
                        L,
                        "mamba_track_interval=args.track_interval,",
                        "mamba_track_interval=args.track_interval, context_length=args.context_length,",
                    ),
                ),
            ),
            Change(
                "feature",
                "[Feature] Add /v1/models",
                "OpenAI-compatible model listing.",
                insert_before(
                    SV,
                    '            if path == "/flush_cache"',
                    '            if path == "/v1/models" and method == "GET":\n'
                    "                model = self.engine.server_args.model_path\n"
                    '                return self._json(200, {"object": "list", "data": [{"id": model, '
                    '"object": "model", "owned_by": "mini-sglang"}]})\n',
                ),
            ),
            Change(
                "feature",
                "[Feature] Add /tokenize",
                "Tokenize text with the server's tokenizer.",
                insert_before(
                    SV,
                    '            if path == "/generate"',
                    '            if path == "/tokenize" and method == "POST":\n'
                    '                body = json.loads(self._read_body() or b"{}")\n'
                    "                return self._json(200, "
                    '{"tokens": self.engine.tokenizer.encode(body.get("prompt", ""))})\n',
                ),
            ),
            Change(
                "feature",
                "[Feature] Add /detokenize",
                "The inverse of /tokenize.",
                insert_before(
                    SV,
                    '            if path == "/generate"',
                    '            if path == "/detokenize" and method == "POST":\n'
                    '                body = json.loads(self._read_body() or b"{}")\n'
                    "                return self._json(200, "
                    '{"text": self.engine.tokenizer.decode(body.get("tokens", []))})\n',
                ),
            ),
            Change(
                "feature",
                "[Feature] Report the prefix cache size in server_info",
                "For dashboards.",
                replace(
                    E,
                    '            "vocab_size": self.model_config.vocab_size,\n',
                    '            "vocab_size": self.model_config.vocab_size,\n'
                    '            "prefix_cache_entries": len(self.cache),\n',
                ),
            ),
            Change(
                "feature",
                "[Feature] Add --log-requests",
                "Log every request's shape for debugging.",
                insert_before(
                    L,
                    '    parser.add_argument("--disable-radix-cache", action="store_true")\n',
                    '    parser.add_argument("--log-requests", action="store_true", help="log request shapes")\n',
                ),
            ),
        ],
        "test": [
            Change(
                "test",
                "[Test] Add prefix cache unit tests",
                "Insert and match on a toy state.",
                put(
                    "test/test_mamba_cache.py",
                    "import torch\n\nfrom mini_sglang.mamba_cache import "
                    "MambaPrefixCache\n\n\ndef test_match_longest_prefix():\n    cache = MambaPrefixCache()\n"
                    "    cache.insert([1, 2, 3], torch.ones(1, 4))\n    length, state = cache.match_prefix([1, 2, "
                    "3, 4], 3)\n    assert length == 3 and state is not None\n",
                ),
            ),
            Change(
                "test",
                "[Test] Add server args tests",
                "Cover the launch_server flags.",
                _server_args_test,
            ),
            Change(
                "test",
                "[Test] Check decode cache hits reach the track boundary",
                "Second turns must reuse at least the last track boundary of the first.",
                put(
                    "test/test_decode_cache_hit.py",
                    "from mini_sglang.config import ServerArgs\nfrom "
                    "mini_sglang.engine import Engine\n\n\ndef test_second_turn_hits_boundary():\n    engine = "
                    "Engine(ServerArgs(mamba_track_interval=8))\n    prompt = list(range(1, 21))\n    params = "
                    '{"temperature": 0, "max_new_tokens": 24, "ignore_eos": True}\n    out = engine.generate('
                    '{"input_ids": prompt, "sampling_params": params})\n    second = prompt + out["output_ids"]'
                    ' + [11]\n    out2 = engine.generate({"input_ids": second, "sampling_params": params})\n'
                    '    assert out2["meta_info"]["cached_tokens"] >= 40\n',
                ),
            ),
            Change(
                "test",
                "[Test] Add tokenizer edge cases",
                "Empty strings and unknown characters.",
                append(
                    "test/test_tokenizer.py", '\n\ndef test_empty():\n    assert CharTokenizer().encode("") == []\n'
                ),
            ),
        ],
        "bench": [
            Change(
                "bench",
                "[Bench] Add a decode throughput benchmark",
                "For the benchmark table in the docs.",
                put(
                    "benchmark/bench_decode.py",
                    '"""python benchmark/bench_decode.py"""\n\nimport time\n\n'
                    "from mini_sglang.config import ServerArgs\nfrom mini_sglang.engine import Engine\n\n"
                    "engine = Engine(ServerArgs())\nprompts = [[1 + (i * 7 + j) % 63 for j in range(20)] for i in "
                    'range(16)]\ntic = time.perf_counter()\nengine.generate({"input_ids": prompts, '
                    '"sampling_params": {"temperature": 0, "max_new_tokens": 64, "ignore_eos": True}})\n'
                    'print(f"decode: {16 * 64 / (time.perf_counter() - tic):.0f} tok/s")\n',
                ),
            ),
            Change(
                "bench",
                "[Bench] Add a prefix cache benchmark",
                "Measure the second-turn speedup.",
                put(
                    "benchmark/bench_prefix_cache.py",
                    '"""Second-turn latency with and without the prefix '
                    'cache."""\n\nfrom mini_sglang.config import ServerArgs\nfrom mini_sglang.engine import '
                    "Engine\n\nfor disable in (False, True):\n    engine = Engine(ServerArgs(disable_radix_cache="
                    'disable))\n    print(disable, engine.server_info()["mamba_track_interval"])\n',
                ),
            ),
            Change(
                "bench",
                "[Bench] Document how to run the benchmarks",
                "A README for benchmark/.",
                put(
                    "benchmark/README.md",
                    "# Benchmarks\n\n```sh\npython benchmark/bench_decode.py\n"
                    "python benchmark/bench_prefix_cache.py\n```\n",
                ),
            ),
        ],
        "chore": [
            Change(
                "chore",
                "[Misc] Add CODEOWNERS",
                "Route reviews to the module owners.",
                put(
                    ".github/CODEOWNERS",
                    "/mini_sglang/mamba_cache.py @yufei-chen\n/mini_sglang/scheduler.py "
                    "@yufei-chen @lbrenner\n/docs/ @praman-dev\n/.github/ @zwei-infra\n",
                ),
            ),
            Change(
                "chore",
                "[Misc] Add a bug report template",
                "Ask for versions and the launch command.",
                put(
                    ".github/ISSUE_TEMPLATE/bug_report.md",
                    "---\nname: Bug report\nlabels: bug\n---\n\n"
                    '**Launch command**\n\n**Request**\n\n**What happened**\n\n**Version** (`python -c "import '
                    'mini_sglang; print(mini_sglang.__version__)"`)\n',
                ),
            ),
            Change(
                "chore",
                "[Misc] Add pre-commit config",
                "ruff and end-of-file fixers.",
                put(
                    ".pre-commit-config.yaml",
                    "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n"
                    "    rev: v0.6.9\n    hooks:\n      - id: ruff\n",
                ),
            ),
            Change(
                "chore",
                "[Misc] Ignore benchmark outputs",
                "Keep result files out of git.",
                append(".gitignore", "benchmark/results/\n"),
            ),
            Change(
                "chore",
                "[Misc] Add a PR template",
                "Motivation, modifications, checklist.",
                put(
                    ".github/pull_request_template.md",
                    "## Motivation\n\n## Modifications\n\n## Checklist\n\n"
                    "- [ ] Format your code\n- [ ] Add unit tests\n- [ ] Update documentation\n",
                ),
            ),
        ],
    }


def _server_args_test(tree: dict[str, str]) -> None:
    """The track-interval flag the tree's launch_server accepts: the history renames it (history.flag_rename_change)."""
    renamed = f'"{NEW_TRACK_FLAG}"' in tree["mini_sglang/launch_server.py"]
    flag = NEW_TRACK_FLAG if renamed else OLD_TRACK_FLAG
    tree["test/test_server_args.py"] = (
        "from mini_sglang.launch_server import parse_args\n\n\n"
        f'def test_track_interval():\n    assert parse_args(["{flag}", "16"])'
        ".mamba_track_interval == 16\n"
    )


def filler(k: int, rng: random.Random) -> Change:
    """An unlimited supply of small, harmless changes once the pools run dry."""
    day = 1 + k % 28
    tps = 2400 + rng.randrange(400)
    if k % 2:
        return Change(
            "bench",
            f"[Bench] Record nightly decode throughput, run {k}",
            "Nightly benchmark numbers.",
            append("docs/benchmarks.md", f"| nightly-{k:03d} | - | {tps:,} |\n"),
        )
    return Change(
        "docs",
        f"[Docs] Release notes, batch {k}",
        "Release notes.",
        append("docs/release_notes.md", f"- {day:02d}: maintenance batch {k}.\n"),
    )
