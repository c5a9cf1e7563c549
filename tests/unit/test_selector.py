"""A selector test (`probe.file: '{file}'`): every failed file its `match` covers is a test of its own, run from
the probe's cwd, and the files of one run are bisected together (bot.domain.scope.together)."""

from __future__ import annotations

import pydantic
import pytest

from bot.domain.ci_results import failed_tests
from bot.domain.policy import Policy
from bot.domain.scope import Scoped, together
from bot.service import probe as probes
from tests.support.suite_logs import File, run_suite

POLICY = {
    "repository": "o/r",
    "watch": [{"workflow": "nightly.yml"}],
    "results": {"log": {"failed": r"(?m)^\s+(?P<test>\S+\.py) \((?!\d+ attempts)"}},
    "tests": [
        {
            "id": "models",
            "match": r"test/registered/models_e2e/test_\w+\.py$",
            "probe": {"name": "unittest", "file": "{file}", "cwd": "test", "env": {"SGLANG_IS_IN_CI": "true"}},
        }
    ],
}
A, B = "test/registered/models_e2e/test_qwen3_next_models.py", "test/registered/models_e2e/test_llama.py"


def test_each_failed_file_a_selector_covers_is_a_test_of_its_own_run_from_its_cwd():
    policy = Policy.model_validate(POLICY)
    log = "\n".join(run_suite([File(A, attempts=[False, False]), File(B, attempts=[False, False])]))
    found = failed_tests(policy, log)
    assert sorted(f.test.id for f in found) == [
        "models:registered/models_e2e/test_llama.py",
        "models:registered/models_e2e/test_qwen3_next_models.py",
    ]
    llama = policy.test("models:registered/models_e2e/test_llama.py")
    assert llama is not None and llama.probe.file == "registered/models_e2e/test_llama.py"
    assert llama.probe.cwd == "test" and llama.probe.env == {"SGLANG_IS_IN_CI": "true"}
    run = probes.test_run(llama, ("TestLlama.test_gsm8k",), None)
    assert run is not None and run.file == "registered/models_e2e/test_llama.py" and run.cwd == "test"
    # the two files of one red run, one bisection
    scoped = [Scoped(f, "g" * 40, "b" * 40, 1, 9) for f in found]
    assert [len(g) for g in together(policy, scoped)] == [2]
    # an id the selector does not know stays unknown
    assert policy.test("models") is not None and policy.test("nope:registered/x.py") is None


@pytest.mark.parametrize(
    "probe, words",
    [
        ({"name": "unittest", "file": "{file}"}, "give `cwd:`"),
        ({"name": "unittest", "file": "{name}.py", "cwd": "test"}, "the only placeholder is {file}"),
    ],
)
def test_a_selector_that_cannot_find_its_files_is_refused_with_why(probe, words):
    bad = {**POLICY, "tests": [{**POLICY["tests"][0], "probe": probe}]}
    with pytest.raises(pydantic.ValidationError, match=words.replace("{", r"\{").replace("}", r"\}")):
        Policy.model_validate(bad)
