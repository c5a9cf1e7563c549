"""What a bisection was asked to do, as stored with it (so --resume needs no flags)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace

from bot.domain.bisect.model import Settings
from bot.domain.bisect.verdict import MetricRule
from bot.domain.policy import Direction, Policy, Test
from bot.domain.requests import JudgedMetric
from bot.service.probe import needs, probe_argv, test_run
from runners.envs import EnvSpec
from runners.spec import NamedMetric, NamedRun, Needs, TestRun


@dataclass(frozen=True)
class BisectConfig:
    command: tuple[str, ...]
    workers: int = 1
    timeout_s: float | None = None
    metric_regex: str | None = None
    metric_file: bool = False
    threshold: float | None = None
    higher_is_worse: bool = True
    confidence: float = 0.99
    flake_rate: float | None = None  # None: auto
    calibration_runs: int = 2
    max_infra_per_commit: int = 3
    descend_merges: bool = False
    verify_revert: bool = False  # revert the culprit on --onto (default BAD) and prove it with an A/B
    onto: str | None = None
    env: dict | None = None  # runners.envs.EnvSpec as JSON: environments keyed by the commit's pins
    workdir: str | None = None  # the CLI's --workdir: where the local pool's worktrees go (None: the user cache)
    test_run: dict | None = None  # runners.spec.TestRun as JSON: the repository's own test, narrowed to its cases
    needs: dict | None = None  # runners.spec.Needs as JSON: GPUs, models, files the runner must hold
    junit: str | None = None  # the CLI's --junit: the command's JUnit report, relative to the worktree (a group)
    tests: str | None = None  # the CLI's --tests: which of the report's tests (a regex over `classname.name`)
    # several of the policy's tests bisected together (bot.domain.bisect.group): test id -> its own test run, metric
    # rule ("threshold", "higher_is_worse", "metric": whether it has one); each step runs the tests it carries
    members: dict | None = None
    # a slowdown's metrics (bot.service.slowdowns), each a member of the group search named by the metric: name ->
    # "regex" (what a step reads it with from its one run's output) and "higher_is_worse"; no threshold (sampled)
    metrics: dict | None = None
    # the CLI's --json and --log (absolute paths): written again by `--resume ID` unless it is given others
    json_out: str | None = None
    log_out: str | None = None
    # GOOD passes and BAD fails as read (by CI, reproduced; or the CLI's --trust-endpoints): no endpoint run first
    trust_endpoints: bool = False
    # GOOD alone taken as read (the CLI's default, --check-good to run it first; the nightly path's GOOD, read green)
    good_as_read: bool = False

    def own_test(self) -> TestRun | None:
        return None if self.test_run is None else TestRun.from_json(self.test_run)

    def needed(self) -> Needs | None:
        return None if self.needs is None else Needs.from_json(self.needs)

    @property
    def gpus(self) -> int:
        """GPUs per run (0: not stated, a CLI command): what a run's duration costs in GPU-hours."""
        needs = self.needed()
        return needs.gpus if needs else 0

    def env_spec(self) -> EnvSpec | None:
        return None if self.env is None else EnvSpec.from_json(self.env)

    @property
    def whole_step(self) -> bool:
        """Its test is the whole step (its exit code and metric), not a case of the step's report (a JUnit report's
        tests, several of a policy's, each run under its id)."""
        return self.junit is None and self.members is None and self.metrics is None

    @property
    def uses_metric(self) -> bool:
        return self.metric_file or self.metric_regex is not None

    def settings(self) -> Settings:
        rule = MetricRule(self.threshold, self.higher_is_worse) if self.uses_metric else None
        return Settings(
            confidence=self.confidence,
            flake_rate=self.flake_rate,
            calibration_runs=self.calibration_runs,
            metric=rule,
            descend_merges=self.descend_merges,
            max_infra_per_commit=self.max_infra_per_commit,
            trust_endpoints=self.trust_endpoints,
            good_as_read=self.good_as_read,
        )

    def settings_for(self, test: str) -> Settings:
        """A group member's settings: the group's, with that test's (or metric's) own metric rule."""
        measured = (self.metrics or {}).get(test)
        if measured is not None:
            return replace(self.settings(), metric=MetricRule(None, measured["higher_is_worse"]))
        member = (self.members or {}).get(test)
        if member is None:
            return self.settings()
        rule = (
            MetricRule(member.get("threshold"), member.get("higher_is_worse", True)) if member.get("metric") else None
        )
        return replace(self.settings(), metric=rule)

    def named_runs(self, tests: Iterable[str]) -> tuple[NamedRun, ...]:
        """What a step carrying `tests` runs: each member's own test, in a stable order."""
        members = self.members or {}
        return tuple(
            NamedRun(t, TestRun.from_json(members[t]["test_run"]), members[t].get("higher_is_worse", True))
            for t in sorted(tests)
        )

    def named_metrics(self, tests: Iterable[str]) -> tuple[NamedMetric, ...]:
        """What a step carrying `tests` reads from its one run: each member metric's regex, in a stable order."""
        metrics = self.metrics or {}
        return tuple(NamedMetric(t, metrics[t]["regex"]) for t in sorted(tests) if t in metrics)

    def to_json(self) -> dict:
        data = asdict(self)
        data["command"] = list(self.command)
        return data

    @classmethod
    def from_json(cls, data: dict) -> BisectConfig:
        known = {f.name for f in fields(cls)}  # a row stored by an older version lacks the newer keys: their defaults
        values = {k: v for k, v in data.items() if k in known}
        values["command"] = tuple(values["command"])
        return cls(**values)


def group_config(
    policy: Policy, members: Sequence[tuple[Test, tuple[str, ...]]], bad: str, dry_run: bool, bad_sha: str | None
) -> BisectConfig:
    """Several of the policy's tests bisected together, each with the cases its red run failed: one bisection over
    their runner (bot.service.intake groups only tests with the same `runner`), a step running each in turn."""
    first = bisect_config(policy, members[0][0], bad, dry_run, members[0][1], bad_sha)
    runs = {}
    gpus, models, datasets, files = 0, [], [], []
    for test, cases in members:
        own = test_run(test, cases, bad_sha)
        if own is None:
            raise ValueError(
                f"test {test.id}: only the repository's own tests (probe unittest or pytest) run in a group"
            )
        runs[test.id] = dict(
            test_run=own.to_json(),
            metric=test.metric is not None,
            threshold=test.metric.threshold if test.metric else None,
            higher_is_worse=test.metric is None or test.metric.direction is Direction.HIGHER_IS_WORSE,
        )
        needed = needs(test) or Needs()
        gpus = max(gpus, needed.gpus)
        models += needed.hf_models
        datasets += needed.hf_datasets
        files += needed.files
    timeout = max(t.runner.timeout_minutes for t, _ in members) * 60
    merged = Needs(
        gpus, first.needed().gpu_idle_timeout_s if first.needs else 1800.0, *map(_unique, (models, files, datasets))
    )
    measured = any(t.metric is not None for t, _ in members)
    return replace(
        first,  # its command stands for the group's (validated, shown): each step runs its members' own tests
        test_run=None,
        metric_regex=policy.results.log.metric if measured else None,
        metric_file=False,
        timeout_s=timeout,
        members=runs,
        needs=merged.to_json() if merged != Needs() else None,
    )


def measured_by(config: BisectConfig, metrics: Sequence[JudgedMetric], onto: str | None = None) -> BisectConfig:
    """A slowdown's bisection: the group search of its metrics (each a member named by the metric), every step's one
    run read for each metric it carries with that metric's regex, no threshold (a benchmark, sampled against GOOD and
    BAD), and the A/B reverting each culprit `onto` (the newest run's commit; None: BAD); unchanged without metrics.
    `metric_regex` and `higher_is_worse` are the first metric's (the largest effect), for displays of one metric."""
    if not metrics:
        return config
    first = metrics[0]
    return replace(
        config,
        metric_regex=first.regex,
        metric_file=False,
        threshold=None,
        higher_is_worse=first.higher_is_worse,
        onto=onto or config.onto,
        metrics={m.name: dict(regex=m.regex, higher_is_worse=m.higher_is_worse) for m in metrics},
    )


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def bisect_config(
    policy: Policy, test: Test, bad: str, dry_run: bool, cases: tuple[str, ...] = (), bad_sha: str | None = None
) -> BisectConfig:
    """The bisection the policy asks for on this test, narrowed to `cases` (what failed on the red run) when its
    probe runs the repository's own test; `bad_sha`: BAD's commit, whose test file stands in where the policy
    transplants it."""
    own = test_run(test, cases, bad_sha)
    needed = needs(test)
    return BisectConfig(
        command=tuple(probe_argv(test, cases)),
        workers=test.runner.parallelism,
        timeout_s=test.runner.timeout_minutes * 60,
        # the repository's own test prints its metric (read per case with results.log.metric); a command writes it
        metric_regex=policy.results.log.metric if own is not None and test.metric is not None else None,
        metric_file=test.metric is not None and own is None,
        threshold=test.metric.threshold if test.metric else None,
        higher_is_worse=test.metric is None or test.metric.direction is Direction.HIGHER_IS_WORSE,
        confidence=policy.bisect.confidence,
        flake_rate=None if policy.bisect.flake_rate == "auto" else float(policy.bisect.flake_rate),
        # `first_parent: false` is the CLI's --all-commits: any commit may be the culprit, so merges are descended into.
        descend_merges=policy.bisect.descend_merges or not policy.bisect.first_parent,
        max_infra_per_commit=policy.bisect.max_infra_per_commit,
        verify_revert=not dry_run,
        onto=bad,
        env=None if test.runner.env is None else test.runner.env.model_dump(),  # runners.envs.EnvSpec's JSON
        test_run=None if own is None else own.to_json(),
        needs=None if needed is None else needed.to_json(),
    )
