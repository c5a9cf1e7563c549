"""Which red tests of one run are bisected together (bot.domain.scope.together): `bisect.max_tests` does what it
says."""

from __future__ import annotations

from bot.domain.policy import Policy
from bot.domain.scope import FailedTest, Scoped, together

RUNNER = {"backend": "github_actions", "labels": ["self-hosted", "gpu"]}


def policy(max_tests: int) -> Policy:
    own = lambda i, runner: {  # noqa: E731
        "id": f"t{i}",
        "match": f"test_{i}\\.py$",
        "probe": {"name": "unittest", "file": f"test_{i}.py"},
        "runner": runner,
    }
    return Policy.model_validate(
        {
            "repository": "o/r",
            "watch": [{"workflow": "nightly.yml"}],
            "bisect": {"max_tests": max_tests},
            "tests": [
                *(own(i, RUNNER) for i in range(5)),
                own(5, {**RUNNER, "labels": ["self-hosted", "cpu"]}),  # another runner: never in the GPU group
                {"id": "cmd", "match": "cmd", "probe": {"name": "command", "command": ["./t.sh"]}, "runner": RUNNER},
            ],
        }
    )


def scoped(p: Policy, test_id: str) -> Scoped:
    return Scoped(FailedTest(p.test(test_id), test_id), "g" * 40, "b" * 40, 1, 9)


def ids(groups: list[list[Scoped]]) -> list[list[str]]:
    return [[s.test.test.id for s in g] for g in groups]


def test_tests_on_one_runner_go_together_up_to_max_tests_and_the_others_alone():
    p = policy(3)
    red = [scoped(p, t) for t in ("t0", "t1", "t2", "t3", "t4", "t5", "cmd")]
    assert ids(together(p, red)) == [["t0", "t1", "t2"], ["t3", "t4"], ["t5"], ["cmd"]]


def test_max_tests_one_bisects_every_test_alone():
    p = policy(1)
    red = [scoped(p, t) for t in ("t0", "t1", "cmd")]
    assert ids(together(p, red)) == [["t0"], ["t1"], ["cmd"]]
