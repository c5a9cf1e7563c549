"""The decode-cache-hit KL test itself (SGLang's compare_kl_divergence and its prompts), over a
runners.probes.sglang_api.Client; runners.probes.sglang_kl is its command line."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runners.probes.sglang_api import Client, ProtocolError, field_of, logprob_values, token_ids_of

EXIT_PASS, EXIT_FAIL, EXIT_SKIP, EXIT_INFRA = 0, 1, 125, 255
METRIC = "avg_kl_div"
TEST_NAME = "test_decode_cache_hit"
VERDICTS = {EXIT_PASS: "good", EXIT_FAIL: "bad", EXIT_SKIP: "skip", EXIT_INFRA: "infra"}


@dataclass
class Outcome:
    exit_code: int
    message: str
    value: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return VERDICTS.get(self.exit_code, "infra")


# -- the formula --


def sample_kl(prefill_logprobs: list[float], decode_logprobs: list[float]) -> float:
    """mean(exp(r) - 1 - r), r = prefill - decode: SGLang's compare_kl_divergence for one sample."""
    if len(prefill_logprobs) != len(decode_logprobs) or not decode_logprobs:
        raise ValueError(f"{len(prefill_logprobs)} prefill logprobs against {len(decode_logprobs)} decode logprobs")
    total = 0.0
    for p, d in zip(prefill_logprobs, decode_logprobs):
        r = p - d
        try:
            total += math.expm1(r) - r
        except OverflowError:
            return math.inf
    return total / len(decode_logprobs)


def _complete(values: list[float | None], problem: str) -> list[float]:
    """The logprobs, every one present; a null one is the server's protocol error."""
    present = [v for v in values if v is not None]
    if len(present) != len(values):
        raise ProtocolError(problem)
    return present


def avg_kl(prefill: list[list[float]], decode: list[list[float]]) -> tuple[float, list[float]]:
    kl_divs = [sample_kl(p, d) for p, d in zip(prefill, decode, strict=True)]
    return sum(kl_divs) / len(kl_divs), kl_divs


# -- the test --


def decode_cache_hit_kl(
    client: Client,
    prompts: list[list[int]],
    *,
    max_new_tokens: int,
    extra_token: int,
    threshold: float,
    min_cache_hit_ratio: float,
) -> Outcome:
    say = client.say
    n = len(prompts)
    say(f"Running {TEST_NAME} with {n} prompts, max_new_tokens={max_new_tokens}")

    say("Flush cache; turn 1: prefill + decode to cache decode states ...")
    client.flush("flush before turn 1")
    turn1 = client.generate("turn 1", prompts, max_new_tokens, return_logprob=True)
    second = [prompts[i] + token_ids_of(r, "turn 1", i) + [extra_token] for i, r in enumerate(turn1)]

    say("Turn 2: prompt + output + one token, which should hit the decode cache ...")
    turn2 = client.generate("turn 2", second, max_new_tokens, return_logprob=True)
    replay: list[list[int]] = []
    decode_logprobs: list[list[float]] = []
    cached: list[int] = []
    hits: list[int] = []
    for i, result in enumerate(turn2):
        cached_tokens = field_of(result, "meta_info.cached_tokens", "turn 2", i, int)
        cached.append(cached_tokens)
        out_ids = token_ids_of(result, "turn 2", i)
        values = logprob_values(result, "output_token_logprobs", "turn 2", i)
        if len(values) != len(out_ids):
            raise ProtocolError(
                f"turn 2: response {i} has {len(out_ids)} output_ids but {len(values)} output_token_logprobs"
            )
        if not out_ids:
            raise ProtocolError(
                f"turn 2: response {i} generated no tokens (max_new_tokens={max_new_tokens}, ignore_eos)"
            )
        logprobs = _complete(values, f"turn 2: response {i} field 'meta_info.output_token_logprobs' has a null logprob")
        if cached_tokens <= len(prompts[i]) + 1:
            say(f"Decode cache miss for prompt {i} (cached_tokens={cached_tokens}, prompt {len(prompts[i])}), skipping")
            continue
        hits.append(i)
        replay.append(second[i] + out_ids)
        decode_logprobs.append(logprobs)
    details: dict[str, Any] = {"samples": n, "cache_hits": len(hits), "cached_tokens": cached}
    say(f"decode cache hits: {len(hits)}/{n}")
    if len(hits) <= min_cache_hit_ratio * n:
        return Outcome(EXIT_FAIL, f"Too few decode cache hits: {len(hits)}/{n}", None, details)

    say("Flush cache; cold prefill of turn 2's input + output for the reference logprobs ...")
    client.flush("flush before the cold prefill")
    prefill = client.generate("cold prefill", replay, 0, return_logprob=True, logprob_start_len=0)
    prefill_logprobs: list[list[float]] = []
    for k, result in enumerate(prefill):
        values = logprob_values(result, "input_token_logprobs", "cold prefill", k)
        want = len(decode_logprobs[k])
        if len(values) < want:
            raise ProtocolError(
                f"cold prefill: response {k} has {len(values)} input_token_logprobs, needs at least {want}"
            )
        prefill_logprobs.append(
            _complete(
                values[-want:],
                f"cold prefill: response {k} field 'meta_info.input_token_logprobs' "
                "has a null logprob where turn 2's output tokens are",
            )
        )

    value, kl_divs = avg_kl(prefill_logprobs, decode_logprobs)
    details["kl_divs"] = kl_divs
    say(f"kl_divs={kl_divs}")
    if not value <= threshold:  # NaN fails too
        return Outcome(EXIT_FAIL, f"{METRIC}={value} > threshold={threshold}", value, details)
    return Outcome(EXIT_PASS, f"{METRIC}={value} <= threshold={threshold}", value, details)


# -- prompts --


def load_prompts(path: Path | None, samples: int, prompt_len: int, vocab_size: int, seed: int) -> list[list[int]]:
    if path is not None:
        prompts = []
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            item = json.loads(line)
            ids = item.get("input_ids") if isinstance(item, dict) else item
            if (
                not isinstance(ids, list)
                or not ids
                or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids)
            ):
                raise ValueError(f'{path}:{lineno}: expected a list of token ids or {{"input_ids": [...]}}')
            prompts.append(ids)
        if not prompts:
            raise ValueError(f"{path}: no prompts")
        return prompts[:samples]
    # Like SGLang's LongBench prompts, cut to 0.5x..1.5x of the prompt length; token 0 left out.
    rng = random.Random(seed)
    lo, hi = max(2, prompt_len // 2), max(2, prompt_len * 3 // 2)
    return [[rng.randrange(1, vocab_size) for _ in range(rng.randint(lo, hi))] for _ in range(samples)]
