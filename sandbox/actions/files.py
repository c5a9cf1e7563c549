"""The files of a job's steps: what actions/upload-artifact uploads for a `path`, the GITHUB_OUTPUT / GITHUB_ENV
files a step writes, a workspace entry removed. No state."""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path


def artifact_files(paths: list[str], work: Path, hidden: bool = False) -> dict[str, bytes]:
    """The files actions/upload-artifact uploads for `paths` (files, directories, globs; relative to
    the workspace; `!` exclusions ignored), named relative to the paths' least common ancestor --
    a single directory's files relative to it. Hidden files only with `hidden`."""
    roots, found = [], []
    for path in (p for p in paths if not p.startswith("!")):
        full = Path(path) if os.path.isabs(path) else work / path
        parts = full.parts
        magic = next((i for i, part in enumerate(parts) if re.search(r"[*?\[]", part)), None)
        if magic is not None:
            roots.append(Path(*parts[:magic]))
            hits = [Path(h) for h in glob.glob(str(full), recursive=True)]
        else:
            roots.append(full if full.is_dir() else full.parent)
            hits = [full] if full.exists() else []
        for hit in hits:
            found += (
                sorted(f for f in hit.rglob("*") if f.is_file()) if hit.is_dir() else [hit] if hit.is_file() else []
            )
    if not found:
        return {}
    root = os.path.commonpath([str(r) for r in roots])
    names = {os.path.relpath(f, root): f for f in found}
    return {
        n: f.read_bytes()
        for n, f in sorted(names.items())
        if hidden or not any(part.startswith(".") for part in Path(n).parts)
    }


def remove(path: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def key_values(file: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT / GITHUB_ENV file: `name=value` lines and `name<<DELIMITER` ... `DELIMITER` blocks."""
    out: dict[str, str] = {}
    lines = file.read_text().splitlines() if file.exists() else []
    i = 0
    while i < len(lines):
        text = lines[i]
        heredoc = re.match(r"^([^=<]+)<<(.+)$", text)
        if heredoc:
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == heredoc.group(2)), len(lines))
            out[heredoc.group(1)] = "\n".join(lines[i + 1 : end])
            i = end + 1
            continue
        if "=" in text:
            key, value = text.split("=", 1)
            out[key] = value
        i += 1
    return out
