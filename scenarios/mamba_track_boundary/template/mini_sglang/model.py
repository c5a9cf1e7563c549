"""TinyMamba: a deterministic, attention-free recurrent language model.

Like a Mamba layer, the model keeps one recurrent state per request and overwrites it in place
at every token: the state after token t is all that is left of tokens 0..t. There is no KV cache
to slice, so the prefix cache can only reuse a state that was snapshotted at an exact length.

Decode (`decode_step`) and prefill (`extend`) are two code paths over the same weights, as in a
real engine: prefill projects all the new tokens at once, decode one token per request per step.
They agree to float rounding.
"""

from __future__ import annotations

import torch

from .config import ModelConfig


class TinyMamba(torch.nn.Module):
    def __init__(self, config: ModelConfig | None = None) -> None:
        super().__init__()
        self.config = config = config or ModelConfig()
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
        self.lm_bias = torch.nn.Parameter(torch.randn(v) * 0.5, requires_grad=False)

    @property
    def state_size(self) -> int:
        return self.config.hidden_size

    def empty_state(self, batch: int = 1) -> torch.Tensor:
        return torch.zeros(batch, self.config.hidden_size)

    def _mix(self, state: torch.Tensor, projected: torch.Tensor) -> None:
        """Overwrite `state` in place with the state after one more token."""
        update = torch.tanh(projected + state @ self.state_proj.T)
        state.mul_(self.decay).add_((1.0 - self.decay.abs()) * update)

    def _logprobs(self, states: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(states @ self.lm_head.T + self.lm_bias, dim=-1)

    @torch.no_grad()
    def decode_step(self, states: torch.Tensor, token_ids: list[int]) -> torch.Tensor:
        """One token for each row of `states` (B, D), in place; returns next-token logprobs (B, V)."""
        projected = self.embed[torch.tensor(token_ids, dtype=torch.long)] @ self.in_proj.T
        self._mix(states, projected)
        return self._logprobs(states)

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
        projected = self.embed[torch.tensor(token_ids, dtype=torch.long)] @ self.in_proj.T
        rows = []
        for t in range(len(token_ids)):
            self._mix(state, projected[t : t + 1])
            rows.append(state.clone())
            if track_at and offset + t + 1 in track_at:
                snapshots[offset + t + 1] = state.clone()
        return self._logprobs(torch.cat(rows, dim=0)), snapshots
