"""Reading policies: YAML (safe) into the typed schema, with errors that name file, key and line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml
from pydantic import ValidationError

from bot.domain.errors import RevertBisectError
from bot.domain.policy import Policy
from bot.domain.repo_policies import RepoPolicies, conflicts


class PolicyError(RevertBisectError):
    """A policy file that cannot be used; the message lists every problem, one a line, as file:line: key: why
    (the file's own path, also when it was read from a directory)."""

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


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


# Errors yaml finds only where the document goes on: its context_mark is where the mistake is (the bracket or
# quote never closed, the key with no colon), its problem_mark where yaml gave up -- lines further down.
_OPENED_AT_CONTEXT = {
    "while parsing a flow sequence": "the [ here is not closed",
    "while parsing a flow mapping": "the { here is not closed",
    "while scanning a quoted scalar": "the quote here is not closed",
    "while scanning a simple key": "a key here has no ':'",
}


# yaml's names of its tokens, in words
_TOKENS = {
    "'?'": "a key",
    "'<stream end>'": "the end of the file",
    "'<block mapping start>'": "a mapping",
    "'<block sequence start>'": "a list",
    "<block end>": "the end of the block",
}


def _not_yaml(exc: yaml.YAMLError, source: str) -> str:
    """`source:line: not valid YAML: why`, at the line of the mistake. yaml's marks count lines from 0."""
    problem_mark = getattr(exc, "problem_mark", None)
    context_mark = getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    for token, words in _TOKENS.items():
        problem = problem.replace(token, words)
    opened = _OPENED_AT_CONTEXT.get(getattr(exc, "context", None) or "")
    if opened and context_mark is not None and problem_mark is not None and context_mark.line < problem_mark.line:
        return f"{source}:{context_mark.line + 1}: not valid YAML: {opened} ({problem} on line {problem_mark.line + 1})"
    mark = problem_mark or context_mark
    return f"{source}:{mark.line + 1 if mark else 1}: not valid YAML: {problem}"


def _parse(text: str, source: str) -> tuple[Policy, dict[tuple, int]]:
    """The policy and the line of each of its keys."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(_not_yaml(exc, source)) from None
    if not isinstance(data, dict) or node is None:
        raise PolicyError(f"{source}:1: a policy is a mapping of keys (repository, watch, tests, ...)")
    lines = _lines(node)
    try:
        return Policy.model_validate(data), lines
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-")))
            why = "unknown key" if error["type"] == "extra_forbidden" else error["msg"].removeprefix("Value error, ")
            problems.append(f"{source}:{_where(lines, loc)}: {_dotted(loc)}: {why}")
        raise PolicyError(problems) from None


def parse(text: str, source: str) -> Policy:
    return _parse(text, source)[0]


def _read(path: Path) -> tuple[Policy, dict[tuple, int]]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise PolicyError(f"{path}: cannot read the policy ({why})") from None
    return _parse(text, str(path))


def load(path: Path) -> Policy:
    return _read(path)[0]


def check_files(paths: Sequence[Path]) -> tuple[dict[Path, Policy], list[str]]:
    """Each file on its own, then the files of one repository together (bot.domain.repo_policies.conflicts: a test id
    declared twice, a workflow watched twice, different `commands`): the files that load, by path, and every problem,
    each at its own file and line, naming the other file and line where two files disagree. A file with a problem is
    not among those that load."""
    read: dict[Path, tuple[Policy, dict[tuple, int]]] = {}
    problems: list[str] = []
    for path in dict.fromkeys(paths):
        try:
            read[path] = _read(path)
        except PolicyError as exc:
            problems.extend(exc.problems)
    by_repo: dict[str, list[Path]] = {}
    for path, (policy, _) in read.items():
        by_repo.setdefault(policy.repository, []).append(path)
    refused: set[Path] = set()
    for files in by_repo.values():
        for conflict in conflicts([read[f][0] for f in files]):
            path, other = files[conflict.index], files[conflict.other]
            line = _where(read[path][1], conflict.loc)
            other_line = _where(read[other][1], conflict.other_loc)
            problems.append(f"{path}:{line}: {_dotted(conflict.loc)}: {conflict.why} (also {other}:{other_line})")
            refused.add(path)
    return {path: policy for path, (policy, _) in read.items() if path not in refused}, problems


def check_dir(directory: Path) -> tuple[dict[Path, Policy], list[str]]:
    """Every policies/*.yaml, as check_files reads them."""
    return check_files(sorted(directory.glob("*.yaml")))


def by_repository(loaded: dict[Path, Policy]) -> dict[str, RepoPolicies]:
    """The policies that loaded, by repository, each repository's in the order of their files."""
    grouped: dict[str, list[Path]] = {}
    for path, policy in loaded.items():
        grouped.setdefault(policy.repository, []).append(path)
    return {
        repo: RepoPolicies(tuple(loaded[p] for p in paths), tuple(str(p) for p in paths))
        for repo, paths in grouped.items()
    }


def load_dir(directory: Path) -> dict[str, RepoPolicies]:
    """Every policies/*.yaml, by repository (several files may speak for one); all problems of all files are
    reported at once."""
    loaded, problems = check_dir(directory)
    if problems:
        raise PolicyError(problems)
    return by_repository(loaded)
