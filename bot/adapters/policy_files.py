"""Reading policies: YAML (safe) into the typed schema, with errors that name file, key and line."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from bot.domain.errors import RevertBisectError
from bot.domain.policy import Policy


class PolicyError(RevertBisectError):
    """A policy file that cannot be used; the message lists every problem as file:line: key: why."""


def _lines(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    """Key path -> 1-based line, for every mapping key and sequence item in the document."""
    out = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = path + (key.value,)
            out[sub] = key.start_mark.line + 1
            out.update({p: line for p, line in _lines(value, sub).items() if p != sub})
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out.update(_lines(item, path + (i,)))
    return out


def _where(lines: dict[tuple, int], loc: tuple) -> int:
    """The line of the deepest part of `loc` the document has (a missing key: its parent)."""
    loc = tuple(str(p) if not isinstance(p, int) else p for p in loc)
    for end in range(len(loc), -1, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return 1


def _dotted(loc: tuple) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def parse(text: str, source: str) -> Policy:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise PolicyError(f"{source}{line}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{source}:1: a policy is a mapping of keys (repository, watch, tests, ...)")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        lines = _lines(node)
        problems = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            why = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
            problems.append(f"{source}:{_where(lines, loc)}: {_dotted(loc)}: {why}")
        raise PolicyError("invalid policy:\n  " + "\n  ".join(problems)) from None


def load(path: Path) -> Policy:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the policy ({exc.strerror})") from None
    return parse(text, str(path))


def load_dir(directory: Path) -> dict[str, Policy]:
    """Every policies/*.yaml, by repository; all problems of all files are reported at once."""
    policies: dict[str, Policy] = {}
    problems: list[str] = []
    for path in sorted(directory.glob("*.yaml")):
        try:
            policy = load(path)
        except PolicyError as exc:
            problems.append(str(exc))
            continue
        if policy.repository in policies:
            problems.append(f"{path}: a second policy for {policy.repository}")
        policies[policy.repository] = policy
    if problems:
        raise PolicyError("\n".join(problems))
    return policies
