"""The revert PR: its title and its body, rendered from the evidence with a Jinja2 template."""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from jinja2 import Environment, PackageLoader, StrictUndefined

from bot.domain import markdown
from bot.domain.bisect.verdict import RawResult, Verdict
from bot.domain.body_limit import MAX_BODY, fit
from bot.domain.outcome import AB as Proof
from bot.service.case_facts import Case


@dataclass(frozen=True)
class Culprit:
    sha: str
    parent: str
    title: str
    pr: int | None = None
    author: str | None = None
    merge: bool = False


@dataclass(frozen=True)
class FailingTest:
    name: str
    metric: str | None = None
    threshold: float | None = None

    @property
    def threshold_text(self) -> str:
        if self.threshold is not None:
            return f"{self.threshold:g}"
        return "benchmark (no threshold)" if self.metric else "-"


@dataclass(frozen=True)
class Row:
    sha: str
    title: str
    verdicts: str
    values: str
    pr: int | None = None
    ci: str = ""  # CI's verdicts at this commit (scheduled runs that ran the test), apart from the runner's
    ci_values: str = ""


def verdicts_text(verdicts: Iterable[Verdict]) -> str:
    """Verdicts counted, in the verdicts' order: `bad x2 good`."""
    listed = list(verdicts)
    counts = {v: listed.count(v) for v in Verdict if v in listed}
    return " ".join(f"{v.value}" + (f" x{c}" if c > 1 else "") for v, c in counts.items())


def values_text(raws: Iterable[RawResult]) -> str:
    """What runs read: their metric, else (none read one) their exit codes (`-`: none)."""
    raws = list(raws)
    shown = [f"{r.metric:.4g}" for r in raws if r.metric is not None]
    return ", ".join(shown) if shown else ", ".join("-" if r.exit_code is None else str(r.exit_code) for r in raws)


Reading = tuple[Verdict, RawResult]  # one run as a table shows it: its verdict and what it read


@dataclass(frozen=True)
class AB:
    """One test's A/B as the PR's table shows it: the stored proof (bot.domain.outcome.AB: whether it passed, the
    verdicts it counted, what stood for HEAD's runs) beside the commits the runs ran (HEAD and the revert proposed)
    and each side's runs. HEAD's verdicts are the proof's, named as such, when something stood for its own runs
    (their values shown before its own runs'); else its runs'."""

    proof: Proof
    head: str
    revert: str
    head_runs: tuple[Reading, ...] = ()
    revert_runs: tuple[Reading, ...] = ()

    @property
    def passed(self) -> bool:
        return self.proof.passed

    @property
    def head_verdicts(self) -> str:
        if self.proof.head_from:
            return f"{verdicts_text(Verdict(v) for v in self.proof.head_verdicts)} ({self.proof.head_from})"
        return verdicts_text(v for v, _ in self.head_runs)

    @property
    def revert_verdicts(self) -> str:
        return verdicts_text(v for v, _ in self.revert_runs)

    @property
    def head_values(self) -> str:
        return values_text(r for _, r in self.head_runs)

    @property
    def revert_values(self) -> str:
        return values_text(r for _, r in self.revert_runs)


@dataclass(frozen=True)
class FixedTest:
    """One test of those the revert fixes (the tests the culprit broke), with its own A/B."""

    name: str
    ab: AB


@dataclass(frozen=True)
class PullRequestDraft:
    title: str
    body: str
    head_branch: str
    base_branch: str


@dataclass(frozen=True)
class RevertEvidence:
    repo_slug: str
    branch: str
    culprit: Culprit
    test: FailingTest
    rows: list[Row]
    ab: AB
    files: list[str]
    diffstat: str
    replay_log: str
    bisection_id: int
    confidence: float
    runs: int
    commits: int  # the window: this test's own GOOD..BAD
    ci_runs: int = 0  # CI's readings of the test inside the range, used as free evidence
    cost: str = ""  # the runners' time the runs held: GPU-hours on GPU runners (bot.domain.cost.Cost.held)
    versus_git: str = ""  # what `git bisect run` would spend on the same range (bot.domain.cost.Cost.versus_git)
    searched: int = 0  # a group's: the commits of the union of its tests' ranges, which its runs searched
    together: int = 1  # the tests bisected together in those runs
    before: list[float] = field(default_factory=list)
    after: list[float] = field(default_factory=list)
    followups: list[int] = field(default_factory=list)
    fixes: list[FixedTest] = field(default_factory=list)  # every test the revert fixes, `test` first
    case: Case | None = None  # the case point by point (bot.service.case_facts)
    good: str = ""  # the window
    bad: str = ""
    followup_why: str = ""  # what the follow-up shares with the culprit, when it was found by its changes
    effect: str = ""  # a sampled metric's shift at the culprit with its interval (bot.domain.bisect.sampled)


# Markdown, not HTML: no autoescaping; every value from elsewhere goes through a bot.domain.markdown filter.
_env = Environment(
    loader=PackageLoader("bot.service", "templates"),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
    autoescape=False,
)
_env.filters.update(md=markdown.text, code=markdown.code, fence=markdown.fence)


def _fmt(values: list[float]) -> str:
    return ", ".join(f"{v:.4g}" for v in values) or "-"


def _spread(values: list[float]) -> str:
    """A sampled metric's readings at one commit: `median 96.1, sd 1.9 over 4 runs`."""
    if not values:
        return "no readings"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"median {statistics.median(values):.4g}, sd {sd:.2g} over {len(values)} run{'s' if len(values) > 1 else ''}"


def _shorter_log(log: str, keep: int, bisection_id: int) -> str:
    """The replay log's first `keep` lines, and where the whole of it is."""
    lines = log.splitlines()
    if len(lines) <= keep:
        return log
    return "\n".join(
        [
            *lines[:keep],
            f"# ... {len(lines) - keep} more lines cut to fit GitHub's {MAX_BODY:,}-character limit: the whole log is "
            f"bisection #{bisection_id}'s (dashboard /bisections/{bisection_id}, API /api/bisections/{bisection_id})",
        ]
    )


def render(evidence: RevertEvidence, head_branch: str) -> PullRequestDraft:
    """The PR; a body over GitHub's limit is shortened (the replay log, then the bisect table), never sent whole."""
    c = evidence.culprit
    title = f'Revert "{c.title}"'
    culprit_ref = f"#{c.pr}" if c.pr else markdown.code(c.sha[:12])
    template = _env.get_template("pr_body.md.j2")

    def body_of(e: RevertEvidence) -> str:
        text = template.render(**e.__dict__, culprit_ref=culprit_ref, fmt=_fmt, spread=_spread, max_body=MAX_BODY)
        return re.sub(r"\n{3,}", "\n\n", text)

    body = body_of(evidence)
    keep = len(evidence.replay_log.splitlines())
    while len(body) > MAX_BODY and keep > 0:
        keep //= 2
        body = body_of(replace(evidence, replay_log=_shorter_log(evidence.replay_log, keep, evidence.bisection_id)))
    rows = len(evidence.rows)
    while len(body) > MAX_BODY and rows > 0:  # the culprit's row kept: the rest are in the dashboard's table
        rows //= 2
        kept = [r for i, r in enumerate(evidence.rows) if i < rows or r.sha == c.sha]
        short = _shorter_log(evidence.replay_log, 0, evidence.bisection_id)
        body = body_of(replace(evidence, rows=kept, replay_log=short))
    body = fit(body, f"bisection #{evidence.bisection_id}")  # only text from elsewhere could still be this long
    return PullRequestDraft(title, body, head_branch, evidence.branch)
