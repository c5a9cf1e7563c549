"""The nightly's accuracy test: turn 2's decode, served from the decode cache, must give the logprobs a cold
prefill of the same tokens gives (like SGLang's test_input_output_logprobs_match_decode_cache_hit)."""

import math
import random

import torch

from mini_sglang.engine import Engine
from mini_sglang.launch_server import parse_args

MODEL = "mini-sglang/tiny-mamba-64"
THRESHOLD = 0.002
SAMPLES, MAX_NEW_TOKENS, PROMPT_LEN, VOCAB, EXTRA_TOKEN, SEED = 16, 24, 20, 64, 11, 0


def _prompts():
    rng = random.Random(SEED)
    lo, hi = max(2, PROMPT_LEN // 2), max(2, PROMPT_LEN * 3 // 2)
    return [[rng.randrange(1, VOCAB) for _ in range(rng.randint(lo, hi))] for _ in range(SAMPLES)]


def _generate(engine, input_ids, max_new_tokens, logprob_start_len=-1):
    return engine.generate({
        "input_ids": input_ids,
        "sampling_params": {"temperature": 0.0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
        "return_logprob": True,
        "return_text_in_logprobs": False,
        "logprob_start_len": logprob_start_len,
    })


def test_input_output_logprobs_match_decode_cache_hit():
    torch.set_num_threads(1)
    engine = Engine(parse_args(["--model-path", MODEL, "--mamba-track-interval", "8"]))
    prompts = _prompts()
    engine.flush_cache()
    turn1 = _generate(engine, prompts, MAX_NEW_TOKENS)
    second = [p + r["output_ids"] + [EXTRA_TOKEN] for p, r in zip(prompts, turn1)]
    turn2 = _generate(engine, second, MAX_NEW_TOKENS)
    hits = [i for i, r in enumerate(turn2) if r["meta_info"]["cached_tokens"] > len(prompts[i]) + 1]
    print(f"decode cache hits: {len(hits)}/{SAMPLES}")
    assert len(hits) > SAMPLES // 2, f"Too few decode cache hits: {len(hits)}/{SAMPLES}"
    engine.flush_cache()
    replay = [second[i] + turn2[i]["output_ids"] for i in hits]
    prefill = _generate(engine, replay, 0, logprob_start_len=0)
    kl_divs = []
    for k, i in enumerate(hits):
        decode = [entry[0] for entry in turn2[i]["meta_info"]["output_token_logprobs"]]
        cold = [entry[0] for entry in prefill[k]["meta_info"]["input_token_logprobs"][-len(decode):]]
        kl_divs.append(sum(math.expm1(c - d) - (c - d) for c, d in zip(cold, decode)) / len(decode))
    avg_kl_div = sum(kl_divs) / len(kl_divs)
    print(f"kl_divs={kl_divs}")
    print(f"avg_kl_div={avg_kl_div}")
    assert avg_kl_div <= THRESHOLD, (
        f"avg_kl_div={avg_kl_div} > threshold={THRESHOLD} for {MODEL} test_input_output_logprobs_match_decode_cache_hit"
    )
