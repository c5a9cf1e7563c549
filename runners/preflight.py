"""What a test needs that the runner must already hold, checked before the test spends a GPU hour.

A model must be in the runner's Hugging Face cache (the step runs with HF_HUB_OFFLINE=1: a download halfway through
a bisection is slow, flaky and may fetch other weights than the runs before it); a data file must exist. A missing
one is an infra result that names what to provision, never a verdict on the commit."""

from __future__ import annotations

import os
from pathlib import Path

from runners.spec import Needs


def hub_cache(env: dict[str, str]) -> Path:
    """Where huggingface_hub looks: HF_HUB_CACHE, else HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub."""
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def cached(cache: Path, repo: str, kind: str = "model") -> bool:
    """A snapshot of `org/name` with files in it (the hub's layout: <kind>s--org--name/snapshots/<rev>/...)."""
    snapshots = cache / (f"{kind}s--" + repo.replace("/", "--")) / "snapshots"
    return snapshots.is_dir() and any(any(rev.iterdir()) for rev in snapshots.iterdir() if rev.is_dir())


def missing(needs: Needs, env: dict[str, str], tree: Path) -> list[str]:
    """What the runner lacks, each with how to provision it; [] when it holds everything."""
    out = []
    cache = hub_cache(env)
    for kind, repos in (("model", needs.hf_models), ("dataset", needs.hf_datasets)):
        for repo in repos:
            if not cached(cache, repo, kind):
                flag = "" if kind == "model" else " --repo-type dataset"
                out.append(
                    f"{kind} {repo} is not in this runner's Hugging Face cache ({cache}): "
                    f"provision it with `huggingface-cli download{flag} {repo}` as the runner's user"
                )
    for name in needs.files:
        path = Path(os.path.expandvars(name)).expanduser()
        path = path if path.is_absolute() else tree / path
        if not path.exists():
            out.append(f"file {path} does not exist on this runner: provision it before bisecting")
    return out
