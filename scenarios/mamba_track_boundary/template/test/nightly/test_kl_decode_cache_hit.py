"""The nightly's accuracy test, shaped like SGLang's test_qwen3_next_models.py: the engine is started once per
class with the class's server flags (and environment), and the KL mixins compare its logprobs with a cold prefill.

    python3 test/nightly/test_kl_decode_cache_hit.py [-f] [-v] [TestMambaTrackInterval8.test_...]

- `test_input_output_logprobs_match_decode_cache_hit`: turn 2's decode, resumed from a decode-state checkpoint of
  turn 1, must give the logprobs a cold prefill of the same tokens gives.
- `test_input_output_logprobs_match_prefill`: turn 1's decode (no cache hit) against a cold prefill.

Each reads `avg_kl_div`, the mean over samples of mean(exp(r) - 1 - r) with r = prefill - decode, and needs it
below the class's `kl_div_thres`. The `...AllocFail` classes run with MINI_SGLANG_TEST_SKIP_CACHE_HIT_ASSERT=1
(like SGLang's SGLANG_TEST_SKIP_CACHE_HIT_ASSERT): too few decode cache hits is then no failure of its own.
"""

import math
import os
import random
import traceback
import unittest

import torch

from mini_sglang.engine import Engine
from mini_sglang.launch_server import parse_args

MODEL = "mini-sglang/tiny-mamba-64"
VOCAB, EXTRA_TOKEN, SEED = 64, 11, 0
_COMMON_ARGS = ["--model-path", MODEL]


def is_in_ci() -> bool:
    return os.environ.get("MINI_SGLANG_IS_IN_CI", "").lower() in ("true", "1")


class CustomTestCase(unittest.TestCase):
    """Like SGLang's CustomTestCase (python/sglang/test/test_utils.py): in CI a failed test method is run once more."""

    def _callTestMethod(self, method):
        max_retry = int(os.environ.get("MINI_SGLANG_TEST_MAX_RETRY", "1" if is_in_ci() else "0"))
        for attempt in range(max_retry + 1):
            try:
                return super()._callTestMethod(method)
            except Exception as exc:  # a failure and an error alike
                if attempt >= max_retry or isinstance(exc, unittest.SkipTest):
                    raise
                traceback.print_exc()
                print(f"retry() failed once ({attempt}th try, maximum {max_retry} retries). Will retry. Error: {exc}",
                      flush=True)


class EngineTestCase(CustomTestCase):
    """One engine per class, built from `other_args` as launch_server parses them, with `env` set around it."""

    model = MODEL
    other_args: list = []
    env: dict = {}
    kl_div_thres = 0.002
    num_samples = 16
    max_new_tokens = 24
    prompt_len = 20

    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(1)
        cls._saved_env = {name: os.environ.get(name) for name in cls.env}
        os.environ.update(cls.env)
        try:
            cls.engine = Engine(parse_args(cls.other_args))
        except SystemExit as exc:  # argparse refused the flags: the server would not have started
            cls._restore_env()
            raise RuntimeError(f"Server process exited with code {exc.code}: launch_server {cls.other_args}") from None
        except BaseException:
            cls._restore_env()
            raise

    @classmethod
    def tearDownClass(cls):
        cls._restore_env()

    @classmethod
    def _restore_env(cls):
        for name, value in cls._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def prompts(self):
        rng = random.Random(SEED)
        lo, hi = max(2, self.prompt_len // 2), max(2, self.prompt_len * 3 // 2)
        return [[rng.randrange(1, VOCAB) for _ in range(rng.randint(lo, hi))] for _ in range(self.num_samples)]

    def generate(self, input_ids, max_new_tokens, logprob_start_len=-1):
        return self.engine.generate({
            "input_ids": input_ids,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
            "return_logprob": True,
            "return_text_in_logprobs": False,
            "logprob_start_len": logprob_start_len,
        })

    def compare_kl_divergence(self, decode_outputs, prefill_outputs):
        """SGLang's compare_kl_divergence: each sample's decode logprobs against the cold prefill's."""
        kl_divs = []
        for decode_out, prefill_out in zip(decode_outputs, prefill_outputs):
            decode = [entry[0] for entry in decode_out["meta_info"]["output_token_logprobs"]]
            cold = [entry[0] for entry in prefill_out["meta_info"]["input_token_logprobs"][-len(decode):]]
            kl_divs.append(sum(math.expm1(c - d) - (c - d) for c, d in zip(cold, decode)) / len(decode))
        avg_kl_div = sum(kl_divs) / len(kl_divs)
        print(f"kl_divs={kl_divs}")
        print(f"avg_kl_div={avg_kl_div}", flush=True)
        if not avg_kl_div < self.kl_div_thres:
            self.fail(f"avg_kl_div={avg_kl_div} > threshold={self.kl_div_thres} for {self.model} {self._testMethodName}")


class DecodeCacheHitKLMixin:
    def test_input_output_logprobs_match_decode_cache_hit(self):
        prompts = self.prompts()
        self.engine.flush_cache()
        turn1 = self.generate(prompts, self.max_new_tokens)
        second = [p + r["output_ids"] + [EXTRA_TOKEN] for p, r in zip(prompts, turn1)]
        turn2 = self.generate(second, self.max_new_tokens)
        hits = [i for i, r in enumerate(turn2) if r["meta_info"]["cached_tokens"] > len(prompts[i]) + 1]
        print(f"decode cache hits: {len(hits)}/{self.num_samples}")
        if os.environ.get("MINI_SGLANG_TEST_SKIP_CACHE_HIT_ASSERT", "0").lower() not in ("1", "true"):
            self.assertGreater(len(hits), self.num_samples // 2, f"Too few decode cache hits: {len(hits)}")
        if not hits:
            self.skipTest("no decode cache hit to compare")
        self.engine.flush_cache()
        prefill = self.generate([second[i] + turn2[i]["output_ids"] for i in hits], 0, logprob_start_len=0)
        self.compare_kl_divergence([turn2[i] for i in hits], prefill)


class PrefillKLMixin:
    def test_input_output_logprobs_match_prefill(self):
        prompts = self.prompts()
        self.engine.flush_cache()
        decode = self.generate(prompts, self.max_new_tokens)
        self.engine.flush_cache()
        prefill = self.generate([p + r["output_ids"] for p, r in zip(prompts, decode)], 0, logprob_start_len=0)
        self.compare_kl_divergence(decode, prefill)


class TestMambaTrackInterval8(EngineTestCase, DecodeCacheHitKLMixin, PrefillKLMixin):
    other_args = [*_COMMON_ARGS, "--track-interval", "8"]


class TestMambaTrackInterval8AllocFail(TestMambaTrackInterval8):
    env = {"MINI_SGLANG_TEST_SKIP_CACHE_HIT_ASSERT": "1"}


class TestMambaTrackInterval4(EngineTestCase, DecodeCacheHitKLMixin, PrefillKLMixin):
    other_args = [*_COMMON_ARGS, "--track-interval", "4"]


class TestMambaTrackInterval4AllocFail(TestMambaTrackInterval4):
    env = {"MINI_SGLANG_TEST_SKIP_CACHE_HIT_ASSERT": "1"}


if __name__ == "__main__":
    unittest.main()
