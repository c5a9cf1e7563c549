"""A repository's policy: what to watch, which tests and metrics, runners, bisect and revert limits.

Typed and closed: an unknown key is an error (a typo must not silently disable a safety limit).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class Watch(Closed):
    """A workflow whose red runs are bisected. Only its runs of `events`, on `branch`, whose head commit comes from
    the policy's repository itself count, for the red run and for the history read for a test's last good run (a
    fork's pull request from its own `main` has `head_branch: main` too)."""

    workflow: str = Field(
        description="The workflow file's path (.github/workflows/pr-test.yml): names change, paths rarely do; "
        "its name is still accepted"
    )
    branch: str = "main"
    events: list[str] = Field(default_factory=lambda: ["schedule"])
    history: int = Field(
        20,
        ge=1,
        le=200,
        description="At most this many earlier runs are read, newest first, for the last one in which a failed "
        "test ran and passed",
    )
    rerun_grace_minutes: float = Field(
        30,
        ge=0,
        le=24 * 60,
        description="After a red run completes, wait this long for re-runs of its failed jobs to start; "
        "the run is scoped once its last attempt has completed. A failure already reproduced (a re-run attempt "
        "that completed red, or the suite runner's own retry failing every watched failing test again) is scoped "
        "at once",
    )


class LogPatterns(Closed):
    """Regexes over a job log, e.g. SGLang's run_suite output."""

    summary: str | None = Field(None, description="Named groups `passed` and `total`")
    failed: str | None = Field(None, description="Named group `test`: one failed test per match")
    metric: str | None = Field(None, description="Named groups `value` and optionally `threshold`")

    _check = field_validator("summary", "failed", "metric")(_regex)


class Results(Closed):
    """Where a run's results are read from, in order of preference."""

    junit_artifact: str | None = None
    metrics_artifact: str | None = None
    log: LogPatterns = Field(default_factory=LogPatterns)


class Direction(str, Enum):
    HIGHER_IS_WORSE = "higher_is_worse"
    LOWER_IS_WORSE = "lower_is_worse"


class OnSlowdown(str, Enum):
    """What the bot does once a slowdown of a watched metric (a change point of a `tests[].metrics` series in its worse
    direction, at least `min_effect` in size) is bisected to a culprit and proven (bot.service.slowdowns)."""

    COMMENT = "comment"  # the evidence on the culprit PR, and on the follow-up where the fix is worked on
    ISSUE = "issue"  # an issue of its own with the evidence
    REVERT = "revert"  # the revert PR, as for a red test (`revert.action` and its guards), stating the effect


class Metric(Closed):
    """What the test's output reads (`results.log.metric`'s `value`, or the command's metric file) and which way is
    worse. With a `threshold` it is CI's cut (SGLang's KL check: `avg_kl_div` above 0.002 fails); without one it is a
    benchmark (a throughput, a latency), which no cut decides."""

    name: str
    threshold: float | None = Field(
        None,
        allow_inf_nan=False,
        description="CI's cut: a reading worse than it fails. Without a threshold the metric is a benchmark: the "
        "bisection judges each commit against GOOD's and BAD's readings (worse than GOOD is the signal), sampled "
        "until it is told apart at the stated error rate (`bisect.confidence`)",
    )
    direction: Direction = Direction.HIGHER_IS_WORSE

    @field_validator("threshold", mode="before")
    @classmethod
    def _number(cls, value: object) -> object:
        if isinstance(value, bool):  # YAML's `yes`/`true` would otherwise be read as 1.0
            raise ValueError("a threshold is a number (leave it out for a benchmark)")
        return value


def _value_group(value: str | None) -> str | None:
    if value is not None and "value" not in re.compile(_regex(value) or "").groupindex:
        raise ValueError("a metric's pattern needs a named group `value`: (?P<value>[0-9.]+)")
    return value


class TableCell(Closed):
    """A number in a Markdown table the test prints (SGLang's perf report: one table per model, a row per batch
    size): the cell of `column` in the row whose cells match `row`, in the table after the `after` line."""

    column: str = Field(
        min_length=1,
        description="The column's header as the table prints it (case and runs of spaces aside): "
        "`output throughput (tok/s)`",
    )
    row: dict[str, str] = Field(
        min_length=1,
        description="Column header -> the cell's text that picks the row (`{batch size: 64, input len: 4096}`), "
        "compared as text; several rows that match: the last one printed is read",
    )
    after: str | None = Field(
        None,
        description="Regex over the line the table follows (SGLang: the model's `### meta-llama/Llama-3.1-8B-"
        "Instruct [2-gpu-h100]` header): only the first table after the last line it matches is read, so another "
        "model's table is never read in its place. Unset: every table in the log",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)

    _check = field_validator("after")(_regex)

    @field_validator("row")
    @classmethod
    def _cells(cls, value: dict[str, str]) -> dict[str, str]:
        if any(not k.strip() for k in value):
            raise ValueError("a row selector names its column by its header: an empty header picks nothing")
        return value


class Series(Closed):
    """One metric of a test's output, read from each CI run's job log as a series of its own: by a regex of its own
    (`pattern`) or a cell of a Markdown table (`table`) (bot.domain.perf.readings). A shift of the series in its worse
    direction, at least `min_effect` in size, is bisected with the test's other metrics that shifted at the same run
    (a member each of one group search, each read the same way from each step's one run of the test), and acted on as
    the test's `on_slowdown` says (bot.domain.perf.slowdowns). A bisection of a red test judges the test's `metric`,
    read with `results.log.metric`."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.:/-]{1,120}$", description="The series' name, unique in the test")
    pattern: str | None = Field(
        None,
        description="Regex over the test's job log with a named group `value`; its last match is the reading",
    )
    table: TableCell | None = Field(None, description="A cell of a Markdown table the test prints")
    direction: Direction = Field(
        description="Which way is worse (a throughput: lower_is_worse, a latency: higher_is_worse), no default: "
        "no reading tells. Only a shift the worse way is bisected",
    )
    min_effect: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="The smallest relative change worth acting on (0.03: 3%): a smaller change point is neither "
        "reported nor bisected. Unset: 2% (bot.domain.perf.changes.ChangeSettings)",
    )

    _check = field_validator("pattern")(_value_group)

    @model_validator(mode="after")
    def _one_reading(self) -> Series:
        if (self.pattern is None) == (self.table is None):
            raise ValueError(
                f"metric {self.name}: give `pattern` (a regex with a group `value`) or `table` (a column and a row "
                "of a Markdown table), one of them"
            )
        return self


SELECTED = "{file}"  # in probe.file: the failed file a selector test stands for, relative to probe.cwd


class Probe(Closed):
    """How a step runs the test at a commit. `unittest` / `pytest`: the repository's own test file, as its CI runs it
    (from `cwd`, with CI's `env`), narrowed to the cases that failed on the red run (runners.testrun). `command`:
    an argv run in the worktree, judged by its exit status (git bisect run's meanings)."""

    name: Literal["unittest", "pytest", "command"]
    command: list[str] = Field(default_factory=list, description="For `command`: argv run in the worktree")
    file: str | None = Field(
        None,
        description="For `unittest`/`pytest`: the test file, relative to `cwd`; `{file}` makes the test a selector: "
        "every failed file its `match` covers is a test of its own (id `<id>:<file>`), that file run from `cwd`",
    )
    cwd: str = Field(".", description="Where CI runs the file from, relative to the repository root")
    python: str = Field("python3", description="The interpreter CI runs it with (on the runner's PATH)")
    args: list[str] = Field(
        default_factory=list, description="CI's own arguments to the file (the step adds -v and the cases)"
    )
    env: dict[str, str] = Field(default_factory=dict, description="CI's environment for the test")
    build: list[str] = Field(
        default_factory=list,
        description="For `unittest`/`pytest`: an argv run first from the repository root (e.g. python3 -m compileall "
        "-q -f pkg); a commit where it fails does not build: untestable, never a verdict",
    )
    missing: Literal["untestable", "transplant"] = Field(
        "untestable",
        description="A commit without the file or the failed class: untestable (never a verdict), or `transplant` "
        "the file from BAD",
    )

    @model_validator(mode="after")
    def _complete(self) -> Probe:
        if self.name == "command" and not self.command:
            raise ValueError("probe `command` needs `command: [argv...]`")
        if self.name != "command":
            if not self.file:
                raise ValueError(f"probe `{self.name}` needs `file:` (the test file, relative to `cwd`)")
            if self.command:
                raise ValueError(f"probe `{self.name}` runs `file:`; `command:` is for probe `command`")
            for path in (self.file, self.cwd):
                if path.startswith("/") or ".." in path.split("/"):
                    raise ValueError(f"{path!r} must be a path inside the repository")
            if "{" in self.file.replace(SELECTED, "") or "}" in self.file.replace(SELECTED, ""):
                raise ValueError(f"file {self.file!r}: the only placeholder is {SELECTED} (the failed file)")
            if SELECTED in self.file and self.cwd == ".":
                raise ValueError(
                    f"file {self.file!r} selects failed files, named as the log prints them (absolute paths): give "
                    "`cwd:` (the directory CI runs them from), so each is found below it"
                )
        elif self.file or self.args or self.env or self.build or self.cwd != "." or self.missing != "untestable":
            raise ValueError("probe `command` takes only `command:` (file, cwd, args, env, build, missing are not its)")
        return self


class Requires(Closed):
    """What the runner must already hold; a step on a runner without it ends as infra naming what to provision."""

    hf_models: list[str] = Field(
        default_factory=list, description="Models in the runner's Hugging Face cache (the step sets HF_HUB_OFFLINE=1)"
    )
    hf_datasets: list[str] = Field(
        default_factory=list, description="Datasets in the runner's Hugging Face cache (HF_DATASETS_OFFLINE=1 too)"
    )
    files: list[str] = Field(default_factory=list, description="Files on the runner (absolute, or in the worktree)")


class RunnerEnv(Closed):
    """A Python environment per set of dependency pins, made with uv on the runner and reused."""

    project: str = Field("pyproject.toml", description="The pyproject.toml whose dependencies key the environment")
    extras: list[str] = Field(default_factory=list)
    pythonpath: list[str] = Field(
        default_factory=lambda: ["."], description="Worktree dirs the code under test is imported from"
    )
    offline: bool = False


class Runner(Closed):
    backend: Literal["local", "github_actions"] = "local"
    labels: list[str] = Field(default_factory=list, description="runs-on of the step workflow")
    timeout_minutes: float = Field(60, gt=0)
    parallelism: int = Field(1, ge=1, le=64, description="Steps in flight at once on these runners")
    workflow: str = Field("revert-bisect-step.yml", description="The step workflow file, on the default branch")
    queue_timeout_minutes: float = Field(
        60, gt=0, description="A step no runner picks up within this is given up (infra)"
    )
    poll_seconds: float = Field(15, gt=0)
    find_timeout_seconds: float = Field(
        120,
        gt=0,
        description="A dispatch whose answer was lost (an error, or 204 without run details) is sent again when its "
        "run has not shown up by its run-name within this",
    )
    env: RunnerEnv | None = None
    gpus: int = Field(
        0,
        ge=0,
        le=64,
        description="GPUs a step takes for itself on its host (CUDA_VISIBLE_DEVICES from the runner's assignment)",
    )
    gpu_idle_timeout_minutes: float = Field(
        30, gt=0, description="How long a step waits for its GPUs to be idle before it reports infra"
    )

    @model_validator(mode="after")
    def _labelled(self) -> Runner:
        if self.backend == "github_actions" and not self.labels:
            raise ValueError(
                "backend github_actions needs `labels` "
                "(the self-hosted runners' labels, e.g. [self-hosted, 4-gpu-h100])"
            )
        return self


class Test(Closed):
    id: str = Field(pattern=r"^[A-Za-z0-9_.:/-]{1,120}$")
    match: str = Field(description="Regex matched against test names in the results (failed, passed, retried)")
    jobs: str | None = Field(
        None,
        description="Regex over the names of the jobs that can run this test (e.g. '^base-c-test-4-gpu-h100 '): "
        "only their logs are read; such a job whose log has no per-test report speaks for the test by its "
        "conclusion. Unset: every job that ran is read, and a job's conclusion alone says nothing of the test",
    )
    metric: Metric | None = None
    metrics: list[Series] = Field(
        default_factory=list,
        description="The metrics its output prints, each read from a CI run's log as a series of its own (a "
        "benchmark's throughput per batch size), its slowdowns bisected and acted on (`on_slowdown`). Unset: "
        "`metric`, read with `results.log.metric`",
    )
    on_slowdown: OnSlowdown | None = Field(
        None,
        description="What a proven slowdown of one of `metrics` leads to: `comment` (the evidence on the culprit PR), "
        "`issue` or `revert`. Unset: the policy's `on_slowdown`",
    )
    probe: Probe
    requires: Requires = Field(default_factory=Requires)
    runner: Runner = Field(default_factory=Runner)

    _check = field_validator("match", "jobs")(_regex)

    @field_validator("metrics")
    @classmethod
    def _unique(cls, value: list[Series]) -> list[Series]:
        names = [m.name for m in value]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"metric names must be unique in a test (each is a series): {', '.join(dupes)}")
        return value

    @model_validator(mode="after")
    def _slowdowns_of_metrics(self) -> Test:
        if self.on_slowdown is not None and not self.metrics:
            raise ValueError(
                f"test {self.id}: `on_slowdown` acts on a slowdown of a series in `metrics`, and the test has none"
            )
        return self

    @model_validator(mode="after")
    def _one_direction(self) -> Test:
        same = next((m for m in self.metrics if self.metric is not None and m.name == self.metric.name), None)
        if same is not None and self.metric is not None and same.direction is not self.metric.direction:
            raise ValueError(
                f"test {self.id}: metric {same.name} is {same.direction.value} in `metrics` and "
                f"{self.metric.direction.value} in `metric`: one metric, one direction"
            )
        return self

    @property
    def selects(self) -> bool:
        """A selector: every failed file `match` covers is a test of its own (probe.file holds `{file}`)."""
        return SELECTED in (self.probe.file or "")

    def selected(self, file: str) -> Test:
        """The test of one file a selector covers (`file` relative to probe.cwd): its own id, match and probe file."""
        return self.model_copy(
            update={
                "id": f"{self.id}:{file}",
                "match": f"(?:^|/){re.escape(file)}$",
                "probe": self.probe.model_copy(update={"file": (self.probe.file or "").replace(SELECTED, file)}),
            }
        )

    def selected_name(self, name: str) -> str | None:
        """A failed name as the results print it (an absolute path, or one from the repository root) as a file below
        probe.cwd, or None when it is not below it."""
        cwd = self.probe.cwd.strip("/")
        if name.startswith(cwd + "/"):
            return name[len(cwd) + 1 :]
        marker = f"/{cwd}/"
        return name.rsplit(marker, 1)[1] if marker in name else None


class Bisect(Closed):
    confidence: float = Field(0.99, ge=0.5, lt=1)
    flake_rate: Literal["auto"] | float = "auto"
    first_parent: bool = True
    descend_merges: bool = False
    max_commits: int = Field(2000, ge=1)
    max_tests: int = Field(
        8,
        ge=1,
        le=64,
        description="Red tests of one run bisected together, in one search (each step runs every test still "
        "undecided at its commit): those with the same `runner` whose probe runs the repository's own test; more "
        "start another bisection. 1: one bisection per test",
    )
    max_infra_per_commit: int = Field(
        3,
        ge=1,
        le=20,
        description="Infrastructure failures (lost runner, timeout, no result) "
        "a commit may have before it counts as untestable; each one is retried elsewhere",
    )

    @field_validator("flake_rate")
    @classmethod
    def _rate(cls, value: str | float) -> str | float:
        if not isinstance(value, str) and not 0 <= value < 0.5:
            raise ValueError("a flake rate is 'auto' or a probability in [0, 0.5)")
        return value


class RevertAction(str, Enum):
    OPEN_PR = "open_pr"
    DRAFT_PR = "draft_pr"
    COMMENT_ONLY = "comment_only"


class Revert(Closed):
    action: RevertAction = RevertAction.OPEN_PR
    labels: list[str] = Field(default_factory=lambda: ["revert-bisect"])
    reviewers: list[str] = Field(default_factory=list)
    request_review_from_author: bool = True
    daily_cap: int = Field(2, ge=0)
    max_culprit_age_days: float = Field(14, gt=0)
    opt_out_label: str = "no-revert-bisect"
    kill_switch_label: str = "revert-bisect-stop"
    # Who may turn the kill switch on, besides `commands.allow_users`: narrower than `commands.allow_roles`, since
    # anyone whose issue carries the label stops the bot for everyone.
    kill_switch_roles: list[Role] = Field(default_factory=lambda: list[Role](["admin", "maintain"]))
    never_revert_authors: list[str] = Field(default_factory=lambda: ["dependabot[bot]", "renovate[bot]"])


Role = Literal["admin", "maintain", "write", "triage", "read"]


class Commands(Closed):
    allow_roles: list[Role] = Field(default_factory=lambda: list[Role](["admin", "maintain", "write"]))
    allow_users: list[str] = Field(default_factory=list)
    allow_edits: bool = False


class Policy(Closed):
    repository: str = Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
    default_branch: str = "main"
    branches: list[str] = Field(default_factory=lambda: ["main"], description="The only branches the bot ever touches")
    mode: Literal["active", "shadow"] = "active"
    watch: list[Watch] = Field(min_length=1)
    results: Results = Field(default_factory=Results)
    tests: list[Test] = Field(min_length=1)
    bisect: Bisect = Field(default_factory=Bisect)
    revert: Revert = Field(default_factory=Revert)
    commands: Commands = Field(default_factory=Commands)
    followups: dict[int, int] = Field(default_factory=dict, description="culprit PR number -> follow-up issue or PR")
    on_slowdown: OnSlowdown = Field(
        OnSlowdown.COMMENT,
        description="What a proven slowdown of a test's `metrics` leads to, unless the test says otherwise: `comment` "
        "(the evidence on the culprit PR and its follow-up), `issue` (an issue with the evidence) or `revert` (the "
        "revert PR, under `revert`'s guards); never anything in shadow mode",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Policy:
        ids = [t.id for t in self.tests]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"test ids must be unique: {', '.join(dupes)}")
        if self.default_branch not in self.branches:
            raise ValueError(f"default_branch {self.default_branch!r} must be one of branches {self.branches}")
        for t in self.tests:
            if t.metric is not None and t.probe.name != "command" and not self.results.log.metric:
                raise ValueError(
                    f"test {t.id} has a metric and runs its own test file: `results.log.metric` must say how the "
                    "metric is read from the test's output"
                )
        return self

    def test(self, test_id: str) -> Test | None:
        """The test with this id; `<id>:<file>` is one file a selector test (`probe.file: '{file}'`) covers."""
        found = next((t for t in self.tests if t.id == test_id), None)
        base_id, sep, file = test_id.partition(":")
        if found is None and sep and file:
            base = next((t for t in self.tests if t.id == base_id), None)
            return base.selected(file) if base is not None and base.selects else None
        return found
