"""GPUs of a step's own on a shared host: disjoint devices per step, idle before the test starts.

Several runner instances often share one multi-GPU machine (two TP-4 steps on one 8-GPU host). Each step takes the
devices it needs by holding a lock file per device in the host's lock directory (`REVERT_BISECT_GPU_LOCKS`, which
runners.gpulocks checks is the one every runner of the host shares): a device locked by another step is never handed
out. Of the unlocked devices it then
waits, within a bounded time, for ones that are idle (`nvidia-smi`'s memory.used at most `IDLE_MIB`), as SGLang's CI
waits for idle GPUs before a test; the test sees exactly its own through CUDA_VISIBLE_DEVICES. Devices the runner
itself was limited to (its own CUDA_VISIBLE_DEVICES, as indices) are the only candidates. The locks go with the step.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from runners import gpulocks
from runners.locks import take as take_lock

IDLE_MIB = 1024  # a device using more memory than this is busy (a driver context alone takes a few hundred MiB)
POLL_S = 5.0


class GpuError(Exception):
    """The step cannot have the GPUs it needs: an infra result, with what to do."""


@dataclass(frozen=True)
class Device:
    index: int
    memory_used_mib: int


def devices(env: dict[str, str]) -> list[Device]:
    """The host's GPUs as nvidia-smi lists them, limited to the runner's own CUDA_VISIBLE_DEVICES when set."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        raise GpuError("the step needs GPUs, but nvidia-smi is not on this runner's PATH: is this a GPU runner?")
    query = [smi, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"]
    try:
        done = subprocess.run(query, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GpuError(f"nvidia-smi did not answer: {exc}") from None
    if done.returncode != 0:
        raise GpuError(f"nvidia-smi failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    found = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            used = int(parts[1]) if parts[1].isdigit() else 1 << 30  # [N/A]: not known to be idle
            found.append(Device(int(parts[0]), used))
    allowed = env.get("CUDA_VISIBLE_DEVICES")
    if allowed is not None and all(p.strip().isdigit() for p in allowed.split(",") if p.strip()):
        keep = {int(p) for p in allowed.split(",") if p.strip()}
        found = [d for d in found if d.index in keep]
    return found


@dataclass
class Assignment:
    indices: list[int]
    _locks: list[IO[str]] = field(default_factory=list)

    @property
    def visible(self) -> str:
        return ",".join(str(i) for i in self.indices)

    def release(self) -> None:
        for f in self._locks:
            f.close()  # closing the descriptor drops its flock
        self._locks.clear()


def assign(
    count: int,
    env: dict[str, str],
    timeout_s: float,
    log: Callable[[str], None],
    locks: Path | None = None,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Assignment:
    """`count` idle devices no other step holds, held until `release()`; GpuError when the lock directory is not the
    host's shared one (runners.gpulocks), when the host has too few, or they do not come free within `timeout_s`."""
    locks = locks or gpulocks.lock_dir(env)
    try:
        gpulocks.check(locks, env)
    except gpulocks.NotShared as exc:
        raise GpuError(str(exc)) from None
    locks.mkdir(parents=True, exist_ok=True)
    deadline = clock() + timeout_s
    said = False
    while True:
        found = devices(env)
        if len(found) < count:
            raise GpuError(
                f"the step needs {count} GPU(s); this runner has {len(found)} (nvidia-smi"
                f"{', limited by CUDA_VISIBLE_DEVICES' if env.get('CUDA_VISIBLE_DEVICES') is not None else ''}): "
                "give the test's runner labels only to machines with enough GPUs"
            )
        held: list[tuple[Device, IO[str]]] = []
        for device in found:
            if len(held) == count:
                break
            if device.memory_used_mib > IDLE_MIB:
                continue
            f = take_lock(locks / f"gpu-{device.index}.lock", wait=False)
            if f is not None:
                held.append((device, f))
        if len(held) == count:
            return Assignment([d.index for d, _ in held], [f for _, f in held])
        for _, f in held:
            f.close()
        if clock() >= deadline:
            busy = ", ".join(f"{d.index} ({d.memory_used_mib} MiB used)" for d in found)
            raise GpuError(
                f"waited {timeout_s:g}s for {count} idle GPU(s) no other step holds; the devices: {busy}. "
                "Another job or a leftover server holds them: free the machine, "
                "or raise runner.gpu_idle_timeout_minutes"
            )
        if not said:
            log(f"revert-bisect: waiting up to {timeout_s:g}s for {count} idle GPU(s)")
            said = True
        sleep(min(poll_s, max(0.0, deadline - clock())))
