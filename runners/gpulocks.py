"""Where a step's GPU locks live, and whether that directory is the host's one, shared by every runner on it.

The per-device locks (runners.gpus) keep two steps off one GPU only if every runner on the host locks in the same
directory. A runner container's own /tmp is private to it: two containers on one 8-GPU host would each lock GPUs
0-3 in their own /tmp and run on the same devices. So a step that needs GPUs refuses to start (an infra result
saying what to mount) unless it can tell its lock directory (`REVERT_BISECT_GPU_LOCKS`) is the host's:

- the host's provisioning (deploy/gpu-locks.sh, run once per machine, on the host) makes the directory and writes
  into it a marker, `.revert-bisect-gpu-locks`, naming the directory's own device and inode (`stat -c '%d %i'`);
- the step stats the directory it sees and compares. Only the host's directory itself -- reached through a bind
  mount in every container, or directly by runners on the bare machine -- has that device and inode: a copy baked
  into an image, a Docker anonymous volume seeded from one, or a directory a container made for itself has others,
  and none of the bot's code ever writes the marker.

Why not "is it a mount point" (/proc/self/mountinfo)? A mount is not a shared one: an anonymous volume is a mount
private to one container, and runners on a bare machine share /var/lib without any mount. The marker answers the
question that matters -- is this the directory the host prepared -- on both.

A host with a single runner has no one to share with: `REVERT_BISECT_SINGLE_RUNNER_HOST=1` says so, and the step
then locks in its lock directory (default `<tmp>/revert-bisect-gpus`) without the check.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

ENV = "REVERT_BISECT_GPU_LOCKS"
SINGLE_RUNNER = "REVERT_BISECT_SINGLE_RUNNER_HOST"
MARKER = ".revert-bisect-gpu-locks"
HOST_DIR = "/var/lib/revert-bisect/gpu-locks"  # where deploy/gpu-locks.sh makes it, mounted at the same path
MOUNT = (
    f"make the host's lock directory once per machine with deploy/gpu-locks.sh (on the host, not in a container) "
    f"and mount it into every runner container at {ENV} (`-v {HOST_DIR}:{HOST_DIR}`; the runner image sets "
    f"{ENV}={HOST_DIR}), or set {SINGLE_RUNNER}=1 if this is the only runner on its host"
)


class NotShared(Exception):
    """The step cannot tell its GPU lock directory is the host's: what is wrong, and what to mount."""


def lock_dir(env: dict[str, str]) -> Path:
    return Path(env.get(ENV) or Path(tempfile.gettempdir()) / "revert-bisect-gpus")


def single_runner(env: dict[str, str]) -> bool:
    value = env.get(SINGLE_RUNNER, "").strip()
    if value not in ("", "0", "1"):
        raise NotShared(f"{SINGLE_RUNNER} must be 1 (the only runner on this host) or 0, not {value!r}")
    return value == "1"


def marker_text(path: Path) -> str:
    """What deploy/gpu-locks.sh writes into the marker of the directory at `path`."""
    st = os.stat(path)
    return f"device={st.st_dev} inode={st.st_ino}\n"


def check(path: Path, env: dict[str, str]) -> None:
    """Return when `path` is the host's lock directory (or the runner is alone on its host); NotShared otherwise."""
    if single_runner(env):
        return
    marker = path / MARKER
    try:
        said = marker.read_text(errors="replace")
        seen = marker_text(path)
    except FileNotFoundError:
        where = "does not exist" if not path.exists() else f"has no {MARKER} (the host did not make it)"
        raise NotShared(
            f"the GPU lock directory {path} {where}: steps on runners that do not share one lock directory can "
            f"be handed the same GPU; {MOUNT}"
        ) from None
    except OSError as exc:
        raise NotShared(f"cannot read the GPU lock directory's marker {marker}: {exc}; {MOUNT}") from None
    if said.split() != seen.split():
        raise NotShared(
            f"the GPU lock directory {path} is not the one the host made ({MARKER} says {said.strip()!r}, the "
            f"directory is {seen.strip()!r}): a copy, or a directory this container made itself; {MOUNT}"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise NotShared(
            f"the GPU lock directory {path} is not writable by this runner (uid {os.getuid()}): make it with "
            "deploy/gpu-locks.sh and RUNNER_UID set to the runners' uid"
        )
