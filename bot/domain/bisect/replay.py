"""A `git bisect log`-style file that `git bisect replay` accepts and that reaches the same answer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.domain.bisect.candidates import Graph, descendants
from bot.domain.bisect.verdict import Verdict


def _tally(verdicts: Sequence[Verdict]) -> str:
    return ", ".join(f"{sum(v is kind for v in verdicts)} {kind.value}" for kind in Verdict if kind in verdicts)


def _label(verdicts: Sequence[Verdict], bad_set: set[str] | None, sha: str) -> str | None:
    """good/bad/skip for one tested commit: by the final answer when there is one, else by majority."""
    if Verdict.SKIP in verdicts:
        return "skip"
    evidence = [v for v in verdicts if v.is_evidence]
    if not evidence:
        return None
    if bad_set is not None:
        return "bad" if sha in bad_set else "good"
    bad = sum(v is Verdict.BAD for v in evidence)
    return "bad" if 2 * bad > len(evidence) else "good" if 2 * bad < len(evidence) else "skip"


def render(
    graph: Graph,
    good: str,
    bad: str,
    first_parent: bool,
    verdicts: Mapping[str, Sequence[Verdict]],
    subjects: Mapping[str, str],
    culprit: str | None,
) -> str:
    """Marks follow the final answer (a commit is bad iff it contains the culprit), raw runs are
    kept as comments, and the culprit is the last `bad` mark so git ends on it."""
    bad_set = descendants(graph, culprit) if culprit else None
    start = ["--first-parent"] if first_parent else []
    lines = ["git bisect start " + " ".join(f"'{a}'" for a in start + [bad, good])]
    marks: list[tuple[str, str]] = []
    for sha, vs in verdicts.items():
        mark = None if sha in (good, bad) else _label(vs, bad_set, sha)
        if mark:
            marks.append((mark, sha))
    marks.sort(key=lambda m: (m[0] == "bad", m[1] == culprit))
    for mark, sha in marks:
        lines += [
            f"# {mark}: [{sha}] {subjects.get(sha, '')} (runs: {_tally(verdicts[sha])})",
            f"git bisect {mark} {sha}",
        ]
    if culprit:
        lines.append(f"# first bad commit: [{culprit}] {subjects.get(culprit, '')}")
    return "\n".join(lines) + "\n"
