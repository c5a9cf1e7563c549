"""Policies: the shipped ones load; a broken one names the file, the key and the line."""

from pathlib import Path

import pytest

from bot.adapters.policy_files import PolicyError, load, load_dir, parse
from bot.domain.policy import RevertAction
from tests.support.policies import MINIMAL

POLICIES = Path(__file__).resolve().parents[2] / "policies"


def test_shipped_policies_load():
    policies = load_dir(POLICIES)
    sglang = policies["sgl-project/sglang"].for_test("qwen3-next-models")
    assert sglang is not None
    assert sglang.mode == "shadow" and sglang.watch[0].workflow == ".github/workflows/pr-test.yml"
    test = sglang.test("qwen3-next-models")
    assert test.metric.threshold == 0.002 and test.runner.labels == ["self-hosted", "4-gpu-h100"]
    assert (test.probe.name, test.probe.cwd) == ("unittest", "test")
    (mini,) = policies["mini-sglang/mini-sglang"].policies
    assert mini.revert.daily_cap == 3


def test_sglang_log_patterns_read_run_suite_output():
    import re

    log = (
        "Test Summary: 11/12 passed\n============\n✓ PASSED:\n  test_a.py\n\n✗ FAILED:\n"
        "  test_qwen3_next_decode_cache_hit.py (exit code 1)\n\n↻ RETRIED:\n  test_b.py (2 attempts, passed)\n"
        "AssertionError: avg_kl_div=0.0065 > threshold=0.002 for Qwen3-Next decode_cache_hit\n"
    )
    patterns = load(POLICIES / "sglang.yaml").results.log
    assert re.search(patterns.summary, log).groupdict() == {"passed": "11", "total": "12"}
    assert [m.group("test") for m in re.finditer(patterns.failed, log)] == ["test_qwen3_next_decode_cache_hit.py"]
    assert re.search(patterns.metric, log).groupdict() == {"value": "0.0065", "threshold": "0.002"}


def test_defaults_are_the_safe_ones():
    policy = parse(MINIMAL, "p.yaml")
    assert policy.revert.action is RevertAction.OPEN_PR and policy.revert.daily_cap == 2
    assert policy.commands.allow_roles == ["admin", "maintain", "write"] and not policy.commands.allow_edits
    assert policy.branches == ["main"] and policy.bisect.confidence == 0.99


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            MINIMAL.replace("    match: test_kl\n", "    match: test_kl\n    metirc: {name: x, threshold: 1}\n"),
            "p.yaml:7: tests[0].metirc: unknown key",
        ),
        (MINIMAL + "revert:\n  daly_cap: 5\n", "p.yaml:9: revert.daly_cap: unknown key"),
        (MINIMAL + "revert:\n  daily_cap: lots\n", "p.yaml:9: revert.daily_cap:"),
        (
            MINIMAL.replace("match: test_kl", "match: 'test_(kl'"),
            "p.yaml:6: tests[0].match: not a valid regular expression",
        ),
        (MINIMAL + "bisect:\n  flake_rate: 0.9\n", "p.yaml:9: bisect.flake_rate:"),
        (MINIMAL.replace("repository: acme/engine\n", ""), "p.yaml:1: repository: Field required"),
        (
            MINIMAL + "  - id: kl\n    match: x\n    probe: {name: command, command: [a]}\n",
            "test ids must be unique: kl",
        ),
        (MINIMAL + "default_branch: trunk\n", "default_branch 'trunk' must be one of branches"),
        (MINIMAL.replace("{name: command, command: [./run.sh]}", "{name: command}"), "probe `command` needs"),
        ("repository: [unclosed\n", "p.yaml:1: not valid YAML: the [ here is not closed"),  # where it opens
        ("- just\n- a list\n", "p.yaml:1: a policy is a mapping"),
    ],
)
def test_bad_policies_name_file_key_and_line(text, expected):
    with pytest.raises(PolicyError) as exc:
        parse(text, "p.yaml")
    assert expected in str(exc.value)


def test_a_bad_file_among_good_ones_stops_loading(tmp_path):
    (tmp_path / "good.yaml").write_text(MINIMAL)
    (tmp_path / "bad.yaml").write_text(MINIMAL.replace("acme/engine", "acme/other") + "mode: yolo\n")
    with pytest.raises(PolicyError, match=r"bad\.yaml:8: mode: Input should be 'active' or 'shadow'"):
        load_dir(tmp_path)


def test_unreadable_policy(tmp_path):
    with pytest.raises(PolicyError, match="cannot read the policy"):
        load(tmp_path / "missing.yaml")


def test_check_policy_cli(cli, tmp_path):
    ok = cli("check-policy", str(POLICIES))
    assert ok.code == 0 and "sgl-project/sglang" in ok.stdout
    (tmp_path / "bad.yaml").write_text(MINIMAL + "revert:\n  daly_cap: 5\n")
    bad = cli("check-policy", str(tmp_path / "bad.yaml"))
    assert bad.code == 2 and "bad.yaml:9: revert.daly_cap: unknown key" in bad.stderr and "Traceback" not in bad.stderr


def test_sglang_policy_runs_the_commits_own_test_file_as_ci_does():
    """SGLang's CI (_pr-test-stage.yml): `cd test`, run_suite runs `python3 <file> -f` with the stage's environment;
    the step runs the commit's own file from test/ -- no server flag of its own -- on 4 GPUs of its own."""
    from bot.service.config import bisect_config
    from bot.service.probe import probe_argv
    from runners.spec import TestRun

    policy = load(POLICIES / "sglang.yaml")
    test = policy.test("qwen3-next-models")
    failed = ("TestQwen3NextLazyExtraBuffer.test_input_output_logprobs_match_decode_cache_hit",)
    assert probe_argv(test, failed) == ["python3", "registered/models_e2e/test_qwen3_next_models.py", "-v", *failed]
    assert not any(a.startswith("--") for a in probe_argv(test, failed))  # the flags are the commit's file's
    assert test.probe.env["SGLANG_IS_IN_CI"] == "true" and test.probe.env["SGLANG_ENABLE_ASYNC_ASSERT"] == "true"
    assert test.requires.hf_models == ["Qwen/Qwen3-Next-80B-A3B-Instruct"]
    config = bisect_config(policy, test, "f" * 40, False, failed)
    run = TestRun.from_json(config.test_run)
    assert (run.framework, run.cwd, run.cases, run.transplant_from) == ("unittest", "test", failed, None)
    assert config.metric_regex == policy.results.log.metric and not config.metric_file  # read per case
    assert config.needs["gpus"] == 4 and config.needs["hf_datasets"] == ["THUDM/LongBench-v2"]
    runner = test.runner
    assert (runner.backend, runner.labels, runner.parallelism, runner.workflow) == (
        "github_actions",
        ["self-hosted", "4-gpu-h100"],
        4,
        "revert-bisect-step.yml",
    )
    assert runner.env.project == "python/pyproject.toml" and runner.env.pythonpath == ["python"]


@pytest.mark.parametrize(
    "probe, why",
    [
        ("{name: unittest}", "needs `file:`"),
        ("{name: unittest, file: /abs/test_x.py}", "must be a path inside the repository"),
        ("{name: unittest, file: t.py, cwd: ../up}", "must be a path inside the repository"),
        ("{name: unittest, file: t.py, command: [x]}", "`command:` is for probe `command`"),
        ("{name: command, command: [x], env: {A: b}}", "takes only `command:`"),
        ("{name: unittest, file: t.py, missing: guess}", "missing"),
    ],
)
def test_a_malformed_probe_is_refused_with_why(probe, why):
    with pytest.raises(PolicyError, match=why):
        parse(MINIMAL.replace("{name: command, command: [./run.sh]}", probe), "p.yaml")


def test_a_metric_read_from_the_tests_own_output_needs_the_pattern_that_reads_it():
    text = MINIMAL.replace("{name: command, command: [./run.sh]}", "{name: unittest, file: t.py}")
    text = text.replace("    match: test_kl\n", "    match: test_kl\n    metric: {name: kl, threshold: 0.002}\n")
    with pytest.raises(PolicyError, match="results.log.metric"):
        parse(text, "p.yaml")
    parse(text + "results: {log: {metric: 'kl=(?P<value>[0-9.]+)'}}\n", "p.yaml")


def test_an_actions_runner_without_labels_is_refused():
    with pytest.raises(PolicyError, match="needs `labels`"):
        parse(SNIPPET_ACTIONS, "p.yaml")


SNIPPET_ACTIONS = """
repository: o/r
watch: [{workflow: nightly}]
tests:
  - id: t
    match: t
    probe: {name: command, command: [./t.sh]}
    runner: {backend: github_actions}
"""


def test_infra_retries_per_commit_come_from_the_policy():
    from bot.service.config import BisectConfig

    policy = parse(
        SNIPPET_ACTIONS.replace("runner: {backend: github_actions}", "runner: {backend: github_actions, labels: [gpu]}")
        + "bisect: {max_infra_per_commit: 5}\n",
        "p.yaml",
    )
    assert policy.bisect.max_infra_per_commit == 5
    config = BisectConfig(command=("x",), max_infra_per_commit=policy.bisect.max_infra_per_commit)
    assert config.settings().max_infra_per_commit == 5
    assert BisectConfig.from_json(config.to_json()).settings().max_infra_per_commit == 5  # stored with the bisection
    with pytest.raises(PolicyError, match="max_infra_per_commit"):
        parse(
            SNIPPET_ACTIONS.replace(
                "runner: {backend: github_actions}", "runner: {backend: github_actions, labels: [gpu]}"
            )
            + "bisect: {max_infra_per_commit: 0}\n",
            "p.yaml",
        )
