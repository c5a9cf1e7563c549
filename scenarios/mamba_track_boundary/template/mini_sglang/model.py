"""TinyMamba: a deterministic, attention-free recurrent language model.

Like a Mamba layer, the model keeps one recurrent state per request and overwrites it in place
at every token: the state after token t is all that is left of tokens 0..t. There is no KV cache
to slice, so the prefix cache can only reuse a state that was snapshotted at an exact length.
The block is residual, as a Mamba block is: the hidden state the head reads is the token's own
vector (the residual path) plus `mixer_gain` times the recurrent state, so the context moves the
logits without owning them.

Decode (`decode_step`) and prefill (`extend`) are two code paths over the same weights, as in a
real engine, and like a GPU's they do not agree to the last bit. Prefill is the reference path,
float32 end to end. Decode is the fast path: it runs in bfloat16 (8 bits of mantissa; weights,
the recurrent state it writes back, the hidden state and the logits are rounded to bf16, each
product summed in float32), and its matmuls are split-K kernels whose number of splits depends on
the batch size and whose partial sums are added, in bf16, in the order the kernel was tuned for
(see `kernels.py`). The logits sit around `logit_offset`, as a trained model's do, where bf16
resolves 1/16 to 1/8: a healthy decode reads a KL of a few 1e-4 against a cold prefill.
"""

from __future__ import annotations

import torch

from .config import ModelConfig
from .kernels import SplitKConfig, bf16, splitk_matmul


class TinyMamba(torch.nn.Module):
    def __init__(self, config: ModelConfig | None = None, kernel_order: int = 0) -> None:
        super().__init__()
        self.config = config = config or ModelConfig()
        self.kernel_order = kernel_order  # which tuned reduction order the decode kernels use
        torch.manual_seed(config.seed)
        v, d = config.vocab_size, config.hidden_size
        self.embed = torch.nn.Parameter(torch.randn(v, d), requires_grad=False)
        self.in_proj = torch.nn.Parameter(torch.randn(d, d) * (config.input_gain / d**0.5), requires_grad=False)
        self.state_proj = torch.nn.Parameter(torch.randn(d, d) * (config.state_gain / d**0.5), requires_grad=False)
        # Per-channel decays: half in (decay_min, decay_max), from fast to long memory; half negative,
        # oscillating modes (the real part of S4D-style complex-diagonal states) that make the state
        # sensitive to the exact number of tokens it has consumed.
        half = d // 2
        self.decay = torch.nn.Parameter(torch.cat([
            torch.linspace(config.decay_min, config.decay_max, half),
            -torch.linspace(config.oscillating_min, config.oscillating_max, d - half),
        ]), requires_grad=False)
        self.lm_head = torch.nn.Parameter(torch.randn(v, d) * (config.logit_gain / d**0.5), requires_grad=False)
        self.lm_bias = torch.nn.Parameter(torch.randn(v) * 0.5 + config.logit_offset, requires_grad=False)
        # The residual path: each token's own vector in the hidden state the head reads.
        self.skip = torch.nn.Parameter(torch.randn(v, d), requires_grad=False)
        # The decode path's bf16 copies of the weights, as a GPU engine loads them.
        self._bf16 = {name: bf16(p) for name, p in self.named_parameters()}
        # The prefill path's per-token constants, computed once: the values `_mix` used to compute at every token.
        self._decay = self.decay.detach()
        self._retain = 1.0 - self._decay.abs()
        self._state_proj_t = self.state_proj.detach().T

    @property
    def state_size(self) -> int:
        return self.config.hidden_size

    def empty_state(self, batch: int = 1) -> torch.Tensor:
        return torch.zeros(batch, self.config.hidden_size)

    def _mix(self, state: torch.Tensor, projected: torch.Tensor) -> None:
        """Overwrite `state` in place with the state after one more token."""
        update = torch.tanh(projected + state @ self._state_proj_t)
        state.mul_(self._decay).add_(self._retain * update)

    def _logprobs(self, states: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
        hidden = self.skip[token_ids] + self.config.mixer_gain * states
        return torch.log_softmax(hidden @ self.lm_head.T + self.lm_bias, dim=-1)

    @torch.no_grad()
    def decode_step(self, states: torch.Tensor, token_ids: list[int]) -> torch.Tensor:
        """One token for each row of `states` (B, D), in place; returns next-token logprobs (B, V).

        The bf16 fast path: `states` holds bf16 values afterwards (the state cache's dtype)."""
        w = self._bf16
        kernel = SplitKConfig.for_batch(len(token_ids), self.kernel_order)
        ids = torch.tensor(token_ids, dtype=torch.long)
        x = w["embed"][ids]
        projected = splitk_matmul(x, w["in_proj"], kernel)
        mixed = splitk_matmul(bf16(states), w["state_proj"], kernel)
        update = bf16(torch.tanh(bf16(projected + mixed)))
        states.copy_(bf16(bf16(states) * w["decay"] + bf16(1.0 - w["decay"].abs()) * update))
        hidden = bf16(w["skip"][ids] + bf16(self.config.mixer_gain * states))
        logits = splitk_matmul(hidden, w["lm_head"], kernel, bias=w["lm_bias"])
        return torch.log_softmax(logits, dim=-1)  # the sampler's softmax is float32, over bf16 logits

    @torch.no_grad()
    def extend(self, state: torch.Tensor, token_ids: list[int], track_at: set[int] | None = None, offset: int = 0):
        """Prefill `token_ids` into one request's `state` (1, D), in place.

        Returns (logprobs (T, V): row t predicts the token after token_ids[t],
        snapshots {length: state copy} for the lengths in `track_at`, counted from the request's
        start, `offset` being the number of tokens the state already covers).
        """
        snapshots: dict[int, torch.Tensor] = {}
        if not token_ids:
            return torch.empty(0, self.config.vocab_size), snapshots
        ids = torch.tensor(token_ids, dtype=torch.long)
        projected = self.embed[ids] @ self.in_proj.T
        rows = []
        for t in range(len(token_ids)):
            self._mix(state, projected[t : t + 1])
            rows.append(state.clone())
            if track_at and offset + t + 1 in track_at:
                snapshots[offset + t + 1] = state.clone()
        return self._logprobs(torch.cat(rows, dim=0), ids), snapshots
