"""Engine configuration: the model's shape and the server's defaults."""

from __future__ import annotations

from dataclasses import dataclass

MODEL_PATH = "mini-sglang/tiny-mamba-64"

# Checkpoint the recurrent state every this many tokens during decode (a multiple of the page size).
DEFAULT_MAMBA_TRACK_INTERVAL = 8
PAGE_SIZE = 1

# Probability, rolled once per server start, that state restores from the prefix cache are
# perturbed (a known-flaky restore path on some hosts; the nightly sees it as a noisy KL).
STATE_RESTORE_FAULT_RATE = 0.0

# Tune the decode kernels' reduction order afresh at every server start (from noisy timings), rather
# than reading the tuned order from the cache keyed by the build; see kernels.py.
KERNEL_AUTOTUNE = False


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 64
    hidden_size: int = 32
    seed: int = 1234
    input_gain: float = 2.0
    state_gain: float = 1.0
    decay_min: float = 0.55
    decay_max: float = 0.97
    oscillating_min: float = 0.9
    oscillating_max: float = 0.99
    logit_gain: float = 6.0
    logit_offset: float = 16.0  # where the logits sit: bf16 resolves 1/16 to 1/8 there
    mixer_gain: float = 0.35  # the recurrent state's weight in the residual stream


@dataclass
class ServerArgs:
    host: str = "127.0.0.1"
    port: int = 30000
    model_path: str = MODEL_PATH
    page_size: int = PAGE_SIZE
    mamba_track_interval: int = DEFAULT_MAMBA_TRACK_INTERVAL
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    max_running_requests: int = 256
    context_length: int = 4096
    state_restore_fault_rate: float = STATE_RESTORE_FAULT_RATE
    kernel_autotune: bool = KERNEL_AUTOTUNE
