"""Requests and the overlap scheduler.

Prefill ("extend") runs once per request, resuming from the longest cached prefix. Decode runs the
running requests as one batch per step. With the overlap schedule (the default) the scheduler
prepares and launches step N+1 before it processes the result of step N, the way a GPU engine
keeps the device busy while the CPU does bookkeeping. Preparing a step commits one more token
(`kv_committed_len += 1`, `decode_batch_idx += 1`), so while a result is processed the request's
counters may already lead that result by one step: the *lookahead*, 0 or 1.

Mamba state tracking: a decode step whose sequence length lands on a multiple of
`mamba_track_interval` snapshots the state into the request's free ping-pong slot (on the
device, during the forward). Processing that step's result then names the slot the latest
checkpoint and records the length the checkpoint covers in `mamba_last_track_seqlen`. When the
request finishes, the prefix of that length is inserted into the prefix cache with the snapshot.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field

import torch

from .mamba_cache import MambaPrefixCache
from .model import TinyMamba
from .utils import get_logger

logger = get_logger(__name__)

EOS_TOKEN_ID = 0


@dataclass
class SamplingParams:
    temperature: float = 1.0
    max_new_tokens: int = 128
    ignore_eos: bool = False


@dataclass
class Req:
    rid: str
    origin_input_ids: list[int]
    sampling_params: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    output_ids: list[int] = field(default_factory=list)
    finished_reason: dict | None = None
    created_at: float = field(default_factory=time.perf_counter)
    finished_at: float | None = None

    # Prefix cache and logprobs.
    cached_tokens: int = 0
    input_token_logprobs: list = field(default_factory=list)
    output_token_logprobs: list = field(default_factory=list)

    # Decode bookkeeping.
    state: torch.Tensor | None = None  # (1, D), overwritten in place at every token
    kv_committed_len: int = 0  # tokens committed to the state, counted when a step is prepared
    decode_batch_idx: int = 0  # decode steps prepared so far
    scheduled_tokens: int = 0  # output tokens sampled or in flight
    future_token_id: int | None = None  # the token the last launched step sampled

    # Mamba state tracking: two ping-pong slots; the latest checkpoint and the length it covers.
    track_slots: torch.Tensor | None = None  # (2, D)
    mamba_last_track_idx: int | None = None
    mamba_last_track_seqlen: int | None = None

    def finished(self) -> bool:
        return self.finished_reason is not None

    @property
    def max_new_tokens(self) -> int:
        return self.sampling_params.max_new_tokens

    def all_token_ids(self) -> list[int]:
        return self.origin_input_ids + self.output_ids


@dataclass
class DecodeBatch:
    reqs: list[Req]
    input_ids: list[int]
    seq_lens: list[int]
    decode_batch_idx: list[int]
    track_mask: list[bool]
    track_slots: list[int]
    next_token_ids: list[int] = field(default_factory=list)
    next_token_logprobs: list[float] = field(default_factory=list)


class Scheduler:
    def __init__(self, model: TinyMamba, cache: MambaPrefixCache, track_interval: int, enable_overlap: bool = True,
                 restore_fault_rate: float = 0.0) -> None:
        self.model = model
        self.cache = cache
        self.track_interval = track_interval
        self.enable_overlap = enable_overlap
        entropy = random.Random(os.urandom(16))
        self.sampling_generator = torch.Generator().manual_seed(entropy.getrandbits(63))
        # Rolled once per server start: a faulty host perturbs every state restore.
        self.restore_fault = entropy.random() < restore_fault_rate
        if self.restore_fault:
            logger.warning("state restore path is degraded on this host (restore fault injected)")

    # -- the whole lifetime of a batch of requests --

    def run(self, reqs: list[Req]) -> None:
        for req in reqs:
            self.prefill(req)
        running = [r for r in reqs if not r.finished() and r.scheduled_tokens < r.max_new_tokens]
        if not self.enable_overlap:
            while running:
                batch = self.prepare_decode(running)
                self.forward_decode(batch)
                self.process_decode_result(batch)
                running = [r for r in running if not r.finished() and r.scheduled_tokens < r.max_new_tokens]
            return
        in_flight: DecodeBatch | None = None
        while running or in_flight is not None:
            # Overlap: prepare and launch step N+1 before processing the result of step N.
            batch = self.prepare_decode(running) if running else None
            if batch is not None:
                self.forward_decode(batch)
            if in_flight is not None:
                self.process_decode_result(in_flight)
            in_flight = batch
            running = [r for r in running if not r.finished() and r.scheduled_tokens < r.max_new_tokens]

    # -- prefill --

    def prefill(self, req: Req) -> None:
        input_ids = req.origin_input_ids
        max_prefix_len = len(input_ids) - 1
        if req.return_logprob and req.logprob_start_len >= 0:
            # Input logprobs from logprob_start_len on must be computed, not read from the cache.
            max_prefix_len = min(max_prefix_len, req.logprob_start_len)
        matched, state = self.cache.match_prefix(input_ids, max_prefix_len)
        if state is None:
            matched, state = 0, self.model.empty_state()
        else:
            state = self.restore_state(state)
        req.cached_tokens = matched
        req.state = state
        req.track_slots = torch.zeros(2, self.model.state_size)
        if matched:
            req.track_slots[0].copy_(state[0])
            req.mamba_last_track_idx, req.mamba_last_track_seqlen = 0, matched

        aligned = len(input_ids) // self.track_interval * self.track_interval
        track_at = {aligned} if aligned > matched else set()
        logprobs, snapshots = self.model.extend(state, input_ids[matched:], track_at, offset=matched)
        for seqlen, snapshot in snapshots.items():
            slot = 0 if req.mamba_last_track_idx is None else 1 - req.mamba_last_track_idx
            req.track_slots[slot].copy_(snapshot[0])
            req.mamba_last_track_idx, req.mamba_last_track_seqlen = slot, seqlen
        req.kv_committed_len = len(input_ids)

        if req.return_logprob:
            start = req.logprob_start_len if req.logprob_start_len >= 0 else len(input_ids)
            for k in range(start, len(input_ids)):
                if k == start:
                    req.input_token_logprobs.append([None, input_ids[k], None])
                else:
                    value = logprobs[k - 1 - matched, input_ids[k]].item()
                    req.input_token_logprobs.append([value, input_ids[k], None])

        if req.max_new_tokens <= 0:
            self.finish(req, {"type": "length", "length": 0})
            return
        token_id, logprob = self.sample(req, logprobs[-1])
        req.scheduled_tokens = 1
        req.future_token_id = token_id
        self.append_token(req, token_id, logprob)

    def restore_state(self, snapshot: torch.Tensor) -> torch.Tensor:
        state = snapshot.clone()
        if self.restore_fault:
            state.add_(torch.randn(state.shape, generator=self.sampling_generator) * 0.5)
        return state

    # -- decode --

    def prepare_decode(self, running: list[Req]) -> DecodeBatch:
        for req in running:
            req.kv_committed_len += 1
            req.decode_batch_idx += 1
            req.scheduled_tokens += 1
        seq_lens = [req.kv_committed_len for req in running]
        return DecodeBatch(
            reqs=list(running),
            input_ids=[req.future_token_id for req in running],
            seq_lens=seq_lens,
            decode_batch_idx=[req.decode_batch_idx for req in running],
            track_mask=[seq_len % self.track_interval == 0 for seq_len in seq_lens],
            track_slots=[0 if req.mamba_last_track_idx is None else 1 - req.mamba_last_track_idx for req in running],
        )

    def forward_decode(self, batch: DecodeBatch) -> None:
        """The device's part: advance the states, snapshot tracked ones, sample."""
        states = torch.cat([req.state for req in batch.reqs], dim=0)
        logprobs = self.model.decode_step(states, batch.input_ids)
        for i, req in enumerate(batch.reqs):
            req.state.copy_(states[i : i + 1])
            if batch.track_mask[i]:
                req.track_slots[batch.track_slots[i]].copy_(states[i])
            token_id, logprob = self.sample(req, logprobs[i])
            batch.next_token_ids.append(token_id)
            batch.next_token_logprobs.append(logprob)
            req.future_token_id = token_id

    def process_decode_result(self, batch: DecodeBatch) -> None:
        """The host's part, one step behind under overlap."""
        for i, req in enumerate(batch.reqs):
            if req.finished():
                continue  # finished by a stop token while this step was in flight
            lookahead = req.decode_batch_idx - batch.decode_batch_idx[i]
            assert lookahead in (0, 1), f"decode lookahead={lookahead} for {req.rid}"
            if batch.track_mask[i]:
                # The forward wrote this step's state into the slot picked at prepare time.
                req.mamba_last_track_idx = batch.track_slots[i]
                # Under overlap the next step may already be prepared: kv_committed_len then
                # leads the snapshotted position by the lookahead.
                req.mamba_last_track_seqlen = req.kv_committed_len - lookahead
            self.append_token(req, batch.next_token_ids[i], batch.next_token_logprobs[i])

    # -- shared --

    def sample(self, req: Req, logprobs: torch.Tensor) -> tuple[int, float]:
        """Greedy at temperature 0; the logprob reported is the model's, as SGLang reports it."""
        temperature = req.sampling_params.temperature
        if temperature < 1e-6:
            token_id = int(torch.argmax(logprobs).item())
        else:
            probs = torch.softmax(logprobs / temperature, dim=-1)
            token_id = int(torch.multinomial(probs, 1, generator=self.sampling_generator).item())
        return token_id, float(logprobs[token_id].item())

    def append_token(self, req: Req, token_id: int, logprob: float) -> None:
        req.output_ids.append(token_id)
        if req.return_logprob:
            req.output_token_logprobs.append([logprob, token_id, None])
        if token_id == EOS_TOKEN_ID and not req.sampling_params.ignore_eos:
            self.finish(req, {"type": "stop", "matched": EOS_TOKEN_ID})
        elif len(req.output_ids) >= req.max_new_tokens:
            self.finish(req, {"type": "length", "length": req.max_new_tokens})

    def finish(self, req: Req, reason: dict) -> None:
        req.finished_reason = reason
        req.finished_at = time.perf_counter()
        if req.mamba_last_track_seqlen and req.mamba_last_track_idx is not None:
            prefix = req.all_token_ids()[: req.mamba_last_track_seqlen]
            self.cache.insert(prefix, req.track_slots[req.mamba_last_track_idx : req.mamba_last_track_idx + 1])
        req.state = None
        req.track_slots = None
