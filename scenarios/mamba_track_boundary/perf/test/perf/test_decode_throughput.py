"""The nightly's performance benchmark, shaped like SGLang's test_text_models_perf.py: one batch of requests per
batch size, decoded after a prefill, and a Markdown table of latency and output throughput per batch size; it fails
only when the benchmark crashes (a slower commit stays green).

    python3 test/perf/test_decode_throughput.py [-f] [-v]

The miniature has no GPU, so the benchmark times decode on a model of one: every kernel a decode step launches
(each torch operation that makes a new tensor or writes one in place; views are free) costs a launch and its
elements, and the run's device clock is drawn once per run, 2% apart from run to run (a GPU's boost clock, its
neighbours, its temperature). The decode kernels' reduction order is pinned (sequential), as a benchmark fixes its
kernel configuration: the build's tuned choice would move the reading whenever the engine's sources change.

MINI_SGLANG_BENCH_SEED: the clock's draw is made from it and the run's id (GITHUB_RUN_ID, GITHUB_RUN_ATTEMPT), so a
story told twice reads the same; unset, from the operating system's randomness. MINI_SGLANG_BENCH_SPREAD: the
clock's spread (default 0.02).
"""

import os
import random
import unittest

import torch
from mini_sglang.engine import Engine
from mini_sglang.launch_server import parse_args
from torch.overrides import TorchFunctionMode

MODEL = "mini-sglang/tiny-mamba-64"
GPU_CONFIG = os.environ.get("GPU_CONFIG", "cpu-1")
BATCH_SIZES = (8, 32)
INPUT_LEN, OUTPUT_LEN = 16, 32
LAUNCH_US = 6.0  # a kernel launch and its smallest work
ELEMENT_US = 0.002  # each element a kernel writes
CLOCK_SPREAD = float(os.environ.get("MINI_SGLANG_BENCH_SPREAD", "0.02"))  # the clock's run-to-run spread (relative)


class DeviceMeter(TorchFunctionMode):
    """Microseconds of device time: each kernel's launch and the elements it writes."""

    def __init__(self):
        super().__init__()
        self.us = 0.0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and (out._base is None or (args and out is args[0])):
            self.us += LAUNCH_US + ELEMENT_US * out.numel()
        return out


def clock() -> float:
    """This run's device clock, relative to nominal."""
    seed = os.environ.get("MINI_SGLANG_BENCH_SEED")
    if seed is None:
        rng = random.Random(os.urandom(16))
    else:
        run = f"{os.environ.get('GITHUB_RUN_ID', '')}/{os.environ.get('GITHUB_RUN_ATTEMPT', '')}"
        rng = random.Random(f"{seed}/{run}")
    return max(0.5, rng.gauss(1.0, CLOCK_SPREAD))


class TestNightlyDecodePerformance(unittest.TestCase):
    def test_bench_one_batch(self):
        torch.set_num_threads(1)
        engine = Engine(parse_args(["--model-path", MODEL]))
        engine.model.kernel_order = 0  # pinned: see the module's docstring
        meter, decode = DeviceMeter(), engine.model.decode_step

        def metered(states, token_ids):
            with meter:
                return decode(states, token_ids)

        engine.model.decode_step = metered
        speed = clock()
        rng = random.Random(0)
        rows = []
        for batch in BATCH_SIZES:
            prompts = [[rng.randrange(1, 64) for _ in range(INPUT_LEN)] for _ in range(batch)]
            engine.flush_cache()
            meter.us = 0.0
            engine.generate(
                {
                    "input_ids": prompts,
                    "sampling_params": {"temperature": 0.0, "max_new_tokens": OUTPUT_LEN, "ignore_eos": True},
                }
            )
            seconds = meter.us / speed / 1e6
            itl_ms = seconds / OUTPUT_LEN * 1e3
            throughput = batch * OUTPUT_LEN / seconds
            rows.append(f"| {batch} | {INPUT_LEN} | {seconds:.4f} | {throughput:.2f} | {itl_ms:.3f} |")
        report = "\n".join(
            [
                f"### {MODEL} [{GPU_CONFIG}]",
                "| batch size | input len | latency (s) | output throughput (tok/s) | ITL (ms) |",
                "| ---------- | --------- | ----------- | ------------------------- | -------- |",
                *rows,
            ]
        )
        print("\n" + report + "\n", flush=True)


if __name__ == "__main__":
    unittest.main()
