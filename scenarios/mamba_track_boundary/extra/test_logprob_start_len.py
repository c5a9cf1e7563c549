"""Input logprobs from `logprob_start_len` on are computed, never read from the prefix cache: a request whose
prompt extends a cached prefix must get the input logprobs a cold request gets.

    python3 test/nightly/test_logprob_start_len.py [-f] [-v]
"""

import random
import unittest

import torch

from mini_sglang.engine import Engine
from mini_sglang.launch_server import parse_args

MODEL = "mini-sglang/tiny-mamba-64"
VOCAB, EXTRA_TOKEN, SEED = 64, 11, 2


class TestLogprobStartLen(unittest.TestCase):
    num_samples = 6

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.engine = Engine(parse_args(["--model-path", MODEL]))

    def logprobs(self, input_ids, start):
        out = self.engine.generate({
            "input_ids": input_ids,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": 0},
            "return_logprob": True,
            "logprob_start_len": start,
        })
        return [[entry[0] for entry in r["meta_info"]["input_token_logprobs"]] for r in out]

    def test_input_logprobs_past_a_cached_prefix_match_a_cold_request(self):
        rng = random.Random(SEED)
        prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randint(20, 40))] for _ in range(self.num_samples)]
        self.engine.flush_cache()
        first = self.engine.generate({
            "input_ids": prompts,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": 16, "ignore_eos": True},
        })
        scored = [p + r["output_ids"] + [EXTRA_TOKEN] for p, r in zip(prompts, first)]  # extends a cached prefix
        warm = self.logprobs(scored, 2)
        self.engine.flush_cache()
        cold = self.logprobs(scored, 2)
        diff = max(abs(w - c) for ws, cs in zip(warm, cold) for w, c in zip(ws[1:], cs[1:]))
        print(f"max_input_logprob_diff={diff:.6f}")
        self.assertLess(diff, 1e-5, f"input logprobs past a cached prefix differ from a cold request's by {diff:.6f}")


if __name__ == "__main__":
    unittest.main()
