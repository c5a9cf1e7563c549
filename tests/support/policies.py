"""A policy the guard and trust tests share, and their clock."""

from datetime import UTC, datetime

from bot.adapters.policy_files import parse

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
POLICY = parse(
    """
repository: o/r
branches: [main]
watch: [{workflow: nightly}]
tests: [{id: t, match: t, probe: {name: command, command: [./t.sh]}}]
revert: {daily_cap: 2, max_culprit_age_days: 7, opt_out_label: no-revert, kill_switch_label: stop-bot,
         never_revert_authors: ["dependabot[bot]"]}
""",
    "p.yaml",
)
