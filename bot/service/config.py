"""What a bisection was asked to do, as stored with it (so --resume needs no flags)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from bot.domain.bisect.model import Settings
from bot.domain.bisect.verdict import MetricRule
from runners.envs import EnvSpec


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

    def env_spec(self) -> EnvSpec | None:
        return None if self.env is None else EnvSpec.from_json(self.env)

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
        )

    def to_json(self) -> dict:
        data = asdict(self)
        data["command"] = list(self.command)
        return data

    @classmethod
    def from_json(cls, data: dict) -> BisectConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["command"] = tuple(values["command"])
        return cls(**values)
