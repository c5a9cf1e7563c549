"""What a bisection ended with, as stored in `bisections.outcome` (JSON) and read everywhere as this model.

Two writers fill it: the driver (the engine's answer: message, culprit, confidence, candidates, the A/B
proof) and the publisher, later (the publishing facts: the culprit's PR, the revert PR or why it was
refused, an earlier revert found on the branch, where the evidence was posted). `outcome_of` reads a row
tolerantly: rows written before this model, or by hand, may lack keys, carry others (kept, so a rewrite
loses nothing) or hold a value of the wrong type (dropped to its default rather than failing a page).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from bot.domain.reasons import Reason

if TYPE_CHECKING:
    from bot.domain.bisect.readings import Effect


class AB(BaseModel):
    """The revert's proof: HEAD fails and HEAD + revert passes, run for run."""

    model_config = ConfigDict(extra="allow")

    head: str | None = None
    revert: str | None = None
    passed: bool = False
    head_verdicts: list[str] = []
    revert_verdicts: list[str] = []
    head_from: str = ""  # what stood for HEAD's side instead of runs of its own ("": its own A/B runs)

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    def in_words(self) -> str:
        """`HEAD fails (2 runs), HEAD + revert passes (1 run)`, naming what stood for HEAD's runs when something did."""
        runs = lambda n: f"{n} run{'s' if n != 1 else ''}"  # noqa: E731
        head = runs(len(self.head_verdicts)) + (f"; {self.head_from}" if self.head_from else "")
        return f"HEAD fails ({head}), HEAD + revert passes ({runs(len(self.revert_verdicts))})"


class StoredPassedOver(BaseModel):
    """A candidate for the follow-up that was not linked (bot.ports.PassedOver as stored): its number, the reason's
    code (bot.domain.followup.Passed) and what it shares with the culprit."""

    model_config = ConfigDict(extra="allow")

    number: int
    reason: str = ""
    files: list[str] = []
    definitions: list[str] = []


class StoredEffect(BaseModel):
    """What the culprit did to a sampled metric (bot.domain.bisect.readings.Effect as stored): `words`, the shift as
    the outcome said it ("-4.1% +/- 0.9% at the culprit (95%)"); the shift of the level with its interval's half-width
    at `level` (0.95); the mean before the culprit; the readings' spread; the drift fitted beside the change (in words,
    and its slope a round); the readings at the culprit and at its parent. A row written before this field kept the
    effect among its facts: read as this, without the numbers it did not keep (`before`, `noise`, the drift)."""

    model_config = ConfigDict(extra="allow")

    words: str
    shift: float | None = None
    half_width: float | None = None
    level: float | None = None
    before: float | None = None
    noise: float | None = None
    drift: str | None = None
    slope: float | None = None
    culprit: list[float] = []
    parent: list[float] = []

    @classmethod
    def of(cls, effect: Effect) -> StoredEffect:
        """The engine's effect (bot.domain.bisect.sampled) as stored."""
        return cls(
            words=effect.describe(),
            shift=effect.shift,
            half_width=effect.half_width,
            level=effect.level,
            before=effect.before,
            noise=effect.noise,
            drift=effect.drift,
            slope=effect.slope,
            culprit=list(effect.culprit),
            parent=list(effect.parent),
        )


# where rows written before `BisectionOutcome.effect` kept the effect in `facts`: the fact's key -> StoredEffect's
_EFFECT_FACTS = dict(
    effect="words",
    shift="shift",
    half_width="half_width",
    level="level",
    culprit_readings="culprit",
    parent_readings="parent",
)


class BisectionOutcome(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: str | None = None  # the row's status column is the authority; kept here when a writer gives it
    message: str | None = None
    culprit: str | None = None  # only once found (bot.domain.bisect.model.Outcome): the commit to revert
    first_parent_culprit: str | None = None
    best_guess: str | None = None  # an answer short of found: the commit it points at, never reverted
    confidence: float | None = None  # the culprit's posterior, else the best guess's
    candidates: list[str] = []
    revert_error: str | None = None
    ab: AB | None = None
    reason: str | None = None  # bot.domain.reasons.Reason's code: each surface words its remedy from it and `facts`
    facts: dict[str, Any] = {}
    effect: StoredEffect | None = None  # a sampled metric's: what the culprit did to it
    # the publishing facts
    culprit_pr: int | None = None
    culprit_subject: str | None = None
    revert_pr: int | None = None
    revert_pr_url: str | None = None
    revert_refused: str | None = None
    revert_refused_reason: str | None = None  # the guard's key, e.g. "kill_switch"
    already_reverted: dict[str, Any] | None = None  # RevertFound.as_json()
    evidence_on: int | None = None
    pr_body: str | None = None
    branch: str | None = None
    followup: int | None = None
    notes: list[str] = []  # what publishing skipped or was refused on the way (a reviewer GitHub refused), said
    followup_passed_over: list[StoredPassedOver] = []  # the follow-up finder's candidates it did not link, with why

    @model_validator(mode="before")
    @classmethod
    def _effect_from_facts(cls, data: Any) -> Any:
        """A row written before `effect` kept it in `facts` (its words under "effect", its numbers beside them):
        read as the typed field, the facts without it (when its numbers do not fit, its words alone)."""
        if not isinstance(data, dict) or "effect" in data:
            return data
        facts = data.get("facts")
        if not isinstance(facts, dict) or not isinstance(facts.get("effect"), str):
            return data
        lifted = {new: facts[old] for old, new in _EFFECT_FACTS.items() if old in facts}
        try:
            effect = StoredEffect.model_validate(lifted)
        except ValidationError:
            effect = StoredEffect(words=facts["effect"])
        rest = {k: v for k, v in facts.items() if k not in _EFFECT_FACTS}
        return {**data, "facts": rest, "effect": effect}

    @field_validator("revert_pr", "culprit_pr", "evidence_on", "followup", mode="before")
    @classmethod
    def _pr_number(cls, value: Any) -> Any:
        """A PR or issue number; written by hand as `#12` too, never a bool (True is no PR)."""
        if isinstance(value, bool):
            raise ValueError("a PR number, not a bool")
        return value.lstrip("#") if isinstance(value, str) else value

    @property
    def legacy_revert_pr(self) -> Any:
        """The revert PR under `pr_number`, the key rows written before `revert_pr` kept (None when absent)."""
        return (self.model_extra or {}).get("pr_number")

    def with_facts(self, **facts: Any) -> BisectionOutcome:
        """This outcome with the publisher's facts added (validated like a stored row)."""
        return parse_outcome({**self.as_json(), **facts})

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)  # the keys the writer gave, nulls included


FOUND = "found"


def culprit_of(status: str | None, outcome: BisectionOutcome) -> str | None:
    """The commit to revert: the outcome's culprit when `status` (the row's, the authority) is found, else None."""
    return outcome.culprit or None if status == FOUND else None


def best_guess_of(status: str | None, outcome: BisectionOutcome) -> str | None:
    """The commit an answer short of found points at, None once found: its best guess (or, in a row written before
    migration 0015 that it did not rewrite, its culprit: what such a row named there was never confirmed)."""
    return None if status == FOUND else outcome.best_guess or outcome.culprit or None


def parse_outcome(data: Any) -> BisectionOutcome:
    """`data` as an outcome; a field whose value does not fit is dropped (a damaged row still shows the rest)."""
    if not isinstance(data, dict):
        return BisectionOutcome()
    data = dict(data)
    for _ in range(len(data) + 1):  # each pass drops at least one bad key, so this ends
        try:
            return BisectionOutcome.model_validate(data)
        except ValidationError as exc:
            bad = {err["loc"][0] for err in exc.errors() if err["loc"]}
            if not bad & data.keys():
                break
            for key in bad:
                data.pop(key, None)
    return BisectionOutcome()


def outcome_of(row: Any) -> BisectionOutcome | None:
    """The row's outcome, or None while it has none (the bisection is still running)."""
    data = getattr(row, "outcome", None)
    return parse_outcome(data) if data else None


# -- the cause an outcome names: what the runs behind it did, and where their logs are ---------------------------

NOT_RUN_EXITS = (126, 127)  # a shell's "found but not executable" and "not found": the command never started


@dataclass(frozen=True)
class RunSeen:
    """A finished run, as far as telling an outcome's cause goes."""

    sha: str
    exit_code: int | None
    metric: float | None = None
    infra_reason: str | None = None
    log_tail: str = ""
    log: str | None = None  # where the run's whole log is, when its backend keeps one

    @property
    def not_run(self) -> bool:
        return self.infra_reason is None and self.exit_code in NOT_RUN_EXITS


def run_cause(run: RunSeen, metric: str | None = None, timeout_s: float | None = None) -> str:
    """What one run did, in words: `exited 1`, `killed at the timeout after 60 s`, `exited 127 (cannot run
    './test.sh': No such file or directory)`, `the metric regex never matched the output (the test exited 0)`.
    `metric`: how the bisection reads a metric ("regex", "file"), None when the exit code decides."""
    if run.infra_reason is not None:
        if run.infra_reason.startswith("timeout") and timeout_s is not None:
            return f"killed at the timeout after {timeout_s:g} s"
        return run.infra_reason
    code = run.exit_code
    if code is None:
        return "gave no exit status"
    if code == 0 and run.metric is None and metric and (why := _no_metric(run.log_tail)):
        return why
    if code == 0 and run.metric is None and metric == "regex":
        return "the metric regex never matched the output (the test exited 0)"
    if code == 0 and run.metric is None and metric == "file":
        return "the test wrote no metric to $REVERT_BISECT_RESULT (it exited 0)"
    said = f"exited {code}"
    if code == 125:
        said += " (cannot be tested)"
    if run.not_run and (last := _last_line(run.log_tail)):
        said += f" ({last})"
    if run.metric is not None:
        said += f", metric {run.metric:g}"
    return said


def _no_metric(tail: str) -> str:
    """The step's own account of a missing metric (runners.step logs what was expected and what came)."""
    marker = "revert-bisect: no metric: "
    lines = [line.strip() for line in tail.splitlines() if line.strip().startswith(marker)]
    return f"no metric: {lines[-1].removeprefix(marker)[:300]}" if lines else ""


def _last_line(tail: str) -> str:
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return lines[-1].removeprefix("revert-bisect: ")[:200] if lines else ""


def _said_nothing(run: RunSeen, metric: str | None) -> bool:
    """A run that is no evidence about its commit: infra, a skip, or (judged by a metric) one with no reading."""
    code = run.exit_code
    return (
        run.infra_reason is not None
        or code is None
        or code >= 128
        or code < 0
        or code == 125
        or bool(metric and code == 0 and run.metric is None)
    )


def _with_log(cause: str, run: RunSeen) -> str:
    return f"{cause}; its log: {run.log}" if run.log else cause


def explain(
    status: str | None,
    outcome: BisectionOutcome,
    runs: list[RunSeen],
    good: str,
    metric: str | None = None,
    timeout_s: float | None = None,
) -> tuple[str | None, BisectionOutcome]:
    """The outcome with its real cause named, from the runs behind it (`runs`: the finished ones, oldest first):
    a command that could not be run anywhere (status untestable, Reason.COMMAND_NOT_RUN) rather than "GOOD fails
    too"; a GOOD that could not run it rather than one that fails; the timeout, the metric that was never read,
    the exit code -- each with the log of the run that tells it. (status, outcome), unchanged when the runs add
    nothing."""

    def cause(run: RunSeen) -> str:
        return _with_log(run_cause(run, metric, timeout_s), run)

    def at(sha: str) -> list[RunSeen]:
        return [r for r in runs if r.sha == sha]

    def updated(new_status: str | None, **changes: Any) -> tuple[str | None, BisectionOutcome]:
        return new_status, outcome.with_facts(**changes)

    if runs and all(r.not_run for r in runs):
        first = runs[0]
        return updated(
            "untestable",
            message=f"the command could not be run at any commit: {cause(first)}",
            reason=Reason.COMMAND_NOT_RUN.value,
            facts={"exit_code": first.exit_code, "log": first.log},
        )
    reason, facts = outcome.reason, dict(outcome.facts)
    mine = at(good)
    if status == "good_fails" and mine and all(r.not_run for r in mine):
        facts = dict(endpoint="GOOD", side="good", sha=good, log=mine[0].log, exit_code=mine[0].exit_code)
        return updated(
            "untestable",
            message=f"the GOOD endpoint {good[:12]} could not run the command: {cause(mine[0])}",
            reason=Reason.ENDPOINT_UNTESTABLE.value,
            facts=facts,
        )
    if status == "good_fails" and (failed := [r for r in mine if r.exit_code not in (0, None)]):
        return updated(status, message=f"{outcome.message}; GOOD's first run {cause(failed[0])}")
    if reason == Reason.ENDPOINT_UNTESTABLE.value and facts.get("sha"):
        said = [r for r in at(facts["sha"]) if _said_nothing(r, metric)]
        if not said:
            return status, outcome
        name, first, facts = facts.get("endpoint", "the"), said[0], {**facts, "log": said[0].log}
        if metric and all(r.infra_reason is None and r.exit_code == 0 for r in said):
            return updated(
                status,
                message=f"the {name} endpoint {facts['sha'][:12]} could not be judged: {cause(first)}",
                reason=Reason.METRIC_MISSING.value,
                facts=facts,
            )
        if timeout_s is not None and all((r.infra_reason or "").startswith("timeout") for r in said):
            facts["timeout_s"] = timeout_s
            return updated(
                status, message=f"{outcome.message}: {cause(first)}", reason=Reason.TIMED_OUT.value, facts=facts
            )
        if first.exit_code == 125 and first.infra_reason is None:
            return updated(status, message=_with_log(outcome.message or "", first), facts=facts)
        return updated(status, message=f"{outcome.message}: {cause(first)}", facts=facts)
    if reason == Reason.METRIC_MISSING.value:
        unread = [r for r in runs if r.metric is None and r.infra_reason is None]
        if unread:
            return updated(status, message=f"{outcome.message}; {unread[0].sha[:12]} {cause(unread[0])}")
    return status, outcome
