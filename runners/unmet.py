"""Which requirements an interpreter does not meet, dependencies included: run *by* that interpreter.

`python unmet.py REQ...` prints a JSON list of the requirement strings that are not met by what the
interpreter sees on its sys.path (its own site-packages and, for a layered environment, its base's),
walking the requirements of every distribution that does meet one, with the extras asked for. It is
the whole "resolver" an environment layered on a runner's image needs: what the image has is kept,
only what is missing or too old is installed. It imports only the standard library and `packaging`
(found on sys.path, or in the directory given with --packaging-dir).
"""

from __future__ import annotations

import json
import sys


def unmet(requirements: list[str]) -> list[str]:
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    missing: list[str] = []
    seen: set[tuple[str, frozenset[str], str]] = set()
    queue: list[tuple[str, str]] = [(text, "") for text in requirements]  # (requirement, the extra it came from)
    while queue:
        text, extra = queue.pop()
        try:
            req = Requirement(text)
        except InvalidRequirement:
            missing.append(text)  # let the installer say what is wrong with it
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        key = (req.name.lower(), frozenset(req.extras), str(req.specifier))
        if key in seen:
            continue
        seen.add(key)
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(text)
            continue
        if req.url or not req.specifier.contains(dist.version, prereleases=True):
            if not req.url or not _installed_from(dist, req.url):
                missing.append(text)
                continue
        for sub in dist.requires or []:
            for wanted in sorted(req.extras) or [""]:
                queue.append((sub, wanted))
    return sorted(set(missing))


def _installed_from(dist, url: str) -> bool:
    """A direct reference (`name @ file:///...whl`) is met by a distribution installed from that URL."""
    raw = dist.read_text("direct_url.json")
    return bool(raw) and json.loads(raw).get("url") == url


def main(argv: list[str]) -> None:
    if argv[:1] == ["--packaging-dir"]:
        try:
            import packaging.requirements  # noqa: F401  (the environment's own, when it has one)
        except ImportError:
            sys.path.append(argv[1])
            import packaging.requirements  # noqa: F401

            sys.path.remove(argv[1])  # imported; its neighbours must not count as installed here
        argv = argv[2:]
    print(json.dumps(unmet(argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
