"""The decode path's bf16 split-K matmul, and how its configuration is chosen.

A GPU GEMM for a small batch splits the reduction (K) dimension across thread blocks to fill the
device, and adds the partial sums afterwards; each partial is written in the output dtype. So the
number of splits follows the batch shape (a heuristic table, as cuBLAS and Triton kernels have),
and the order the partials are added in is what the kernel was tuned for. In bf16 both change the
last bits of every result: decode's disagreement with prefill depends on them, a little.

Which order a server uses is chosen at start (`choose_order`): read from the tuning cache, keyed
by a digest of the build (the engine's sources), so a build always decodes the same way; or, with
`kernel_autotune`, tuned afresh from timings at every start, so the choice varies from start to
start, as on a host where the autotuner's timings are noisy.
"""

from __future__ import annotations

import hashlib
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

# (largest batch, splits): small batches split K further to fill the device.
SPLITS_BY_BATCH = ((4, 8), (32, 4), (128, 2))
ORDERS = ("sequential", "reversed", "pairwise")


def bf16(x: torch.Tensor) -> torch.Tensor:
    """`x` rounded to bfloat16 (round to nearest even), kept in a float32 tensor."""
    return x.to(torch.bfloat16).to(torch.float32)


@dataclass(frozen=True)
class SplitKConfig:
    splits: int
    order: str

    @classmethod
    def for_batch(cls, batch: int, order: int) -> SplitKConfig:
        splits = next((s for limit, s in SPLITS_BY_BATCH if batch <= limit), 1)
        return cls(splits, ORDERS[order % len(ORDERS)])


def splitk_matmul(x: torch.Tensor, weight: torch.Tensor, config: SplitKConfig, bias: torch.Tensor | None = None):
    """bf16(x @ weight.T + bias): float32 accumulation within a split, bf16 partials, added in bf16."""
    k = x.shape[1]
    splits = max(1, min(config.splits, k))
    bounds = [k * i // splits for i in range(splits + 1)]
    partials = [bf16(x[:, a:b] @ weight[:, a:b].T) for a, b in zip(bounds, bounds[1:])]
    if config.order == "reversed":
        partials.reverse()
    if config.order == "pairwise":
        while len(partials) > 1:
            partials = [bf16(sum(partials[i : i + 2])) for i in range(0, len(partials), 2)]
        total = partials[0]
    else:
        total = partials[0]
        for part in partials[1:]:
            total = bf16(total + part)
    return bf16(total + bias) if bias is not None else total


def build_digest(package: Path | None = None) -> str:
    """A digest of the engine's sources: the key of the kernel tuning cache."""
    package = package or Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def choose_order(autotune: bool) -> int:
    """The reduction order of this server's decode kernels (an index into ORDERS)."""
    if autotune:
        return random.Random(os.urandom(16)).randrange(len(ORDERS))
    return int(build_digest()[:8], 16) % len(ORDERS)
