"""A follow-up turn resumes from the decode state tracked for the first: its first generated token must get the
logprob a cold prefill of the same tokens gives (the KL test averages drift over many tokens; this one reads the
first resumed token exactly, where a mislabelled track boundary shows at once).

    python3 test/nightly/test_mamba_prefix_reuse.py [-f] [-v]
"""

import random
import unittest

import torch

from mini_sglang.engine import Engine
from mini_sglang.launch_server import parse_args

MODEL = "mini-sglang/tiny-mamba-64"
VOCAB, EXTRA_TOKEN, SEED = 64, 11, 1
# decode and prefill accumulate differently (about 0.01 apart on a healthy engine); a state resumed one token off
# reads about 0.2 away
DRIFT_LIMIT = 0.05


class TestMambaPrefixReuse(unittest.TestCase):
    num_samples = 8
    max_new_tokens = 24

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls.engine = Engine(parse_args(["--model-path", MODEL]))

    def generate(self, input_ids, max_new_tokens):
        return self.engine.generate({
            "input_ids": input_ids,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
            "return_logprob": True,
        })

    def test_resumed_turn_matches_a_cold_prefill(self):
        rng = random.Random(SEED)
        prompts = [[rng.randrange(1, VOCAB) for _ in range(rng.randint(12, 30))] for _ in range(self.num_samples)]
        self.engine.flush_cache()
        first = self.generate(prompts, self.max_new_tokens)
        second = [p + r["output_ids"] + [EXTRA_TOKEN] for p, r in zip(prompts, first)]
        resumed = self.generate(second, 1)
        hits = [i for i, r in enumerate(resumed) if r["meta_info"]["cached_tokens"] > len(prompts[i]) + 1]
        self.assertGreater(len(hits), self.num_samples // 2, f"too few cache hits: {len(hits)}")
        self.engine.flush_cache()
        cold = self.generate([second[i] for i in hits], 1)
        drift = max(
            abs(resumed[i]["meta_info"]["output_token_logprobs"][0][0] - c["meta_info"]["output_token_logprobs"][0][0])
            for i, c in zip(hits, cold)
        )
        print(f"max_first_token_drift={drift:.6f}")
        self.assertLess(drift, DRIFT_LIMIT, f"a resumed turn's first token drifts from a cold prefill by {drift:.6f}")


if __name__ == "__main__":
    unittest.main()
