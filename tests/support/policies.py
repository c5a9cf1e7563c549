"""A policy the guard and trust tests share, and their clock."""

from datetime import UTC, datetime

from bot.adapters.policy_files import parse

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
# the smallest policy that loads: what check-policy and the policy tests start from
MINIMAL = """\
repository: acme/engine
watch:
  - workflow: Nightly
tests:
  - id: kl
    match: test_kl
    probe: {name: command, command: [./run.sh]}
"""
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


def suite_policy(repo: str, workflow: str, jobs: str, events: str = "[schedule]"):
    """A policy watching an SGLang-shaped scheduled suite: run_suite's report read from the jobs' logs, the KL file
    `test_qwen3_next_models.py` in the jobs `jobs` matches, re-runs waited for 30 minutes."""
    return parse(
        f"""
repository: {repo}
watch: [{{workflow: {workflow}, events: {events}, rerun_grace_minutes: 30}}]
results:
  log:
    summary: 'Test Summary: (?P<passed>\\d+)/(?P<total>\\d+) passed'
    failed: '(?m)^\\s+(?P<test>\\S+\\.py) \\((?!\\d+ attempts)'
    metric: 'avg_kl_div=(?P<value>[0-9.eE+-]+)(?: > threshold=(?P<threshold>[0-9.eE+-]+))?'
tests:
  - id: kl
    match: '(?:^|/)test_qwen3_next_models\\.py$'
    jobs: '{jobs}'
    metric: {{name: avg_kl_div, threshold: 0.002}}
    probe: {{name: command, command: [./t.sh]}}
""",
        "p.yaml",
    )
