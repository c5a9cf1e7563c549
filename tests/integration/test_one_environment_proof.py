"""The proof runs in one environment (issue 30): on the nightly path -- CI read BAD red and reproduced it, the
endpoints taken as read, CI's red reading stored with the bisection -- HEAD's failure is reproduced on the bisect
runner before a revert is proven, with the same kind of failure as CI's. A runner that errors at every commit (a model
file it lacks: an error CI's log never showed) names no culprit and proves no revert: an infra outcome naming the
runner. Real git, a real store, the repository's own unittest file run by the local pool's steps."""

from __future__ import annotations

import io
import sys
from pathlib import Path

from rich.console import Console

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli.session import run_bisection
from bot.domain.requests import CiReading
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.wording import said
from runners.spec import TestRun
from tests.support.history import linear_history

TEST_FILE = """\
import os
import unittest

from kernels import VALUE


class TestKL(unittest.TestCase):
    def test_decode_cache_hit(self):
        with open(os.path.join(os.environ["MODEL_DIR"], "model.bin")) as f:  # the runner must hold the model
            f.read()
        print(f"avg_kl_div={VALUE}")
        self.assertLessEqual(VALUE, 0.002, f"avg_kl_div={VALUE} > threshold=0.002")


if __name__ == "__main__":
    unittest.main()
"""
CI_LINE = "AssertionError: 0.0065 not less than or equal to 0.002 : avg_kl_div=0.0065 > threshold=0.002"


def _history(root: Path, n: int = 12, culprit: int = 7) -> list[str]:
    def files(i: int) -> dict[str, str]:  # a note of its own per commit: the culprit reverts cleanly
        return {"test_kl.py": TEST_FILE, "kernels.py": f"VALUE = {0.0065 if i >= culprit else 0.0004}\n",
                f"note_{i}.txt": f"change {i}\n"}  # fmt: skip

    return linear_history(root, n, files, author="t", message=lambda i: f"Change {i} (#{100 + i})")


def _nightly(tmp_path: Path, model_dir: Path):
    root = tmp_path / "repo"
    root.mkdir()
    shas = _history(root)
    good, bad = shas[0], shas[-1]
    own = TestRun("unittest", "test_kl.py", ".", sys.executable, (), (("MODEL_DIR", str(model_dir)),), ("TestKL",))
    config = BisectConfig(
        command=(sys.executable, "test_kl.py"),
        workers=2,
        verify_revert=True,
        test_run=own.to_json(),
        trust_endpoints=True,  # the nightly path: CI's red reading reproduced by a re-run attempt
        workdir=str(tmp_path / "work"),
    )
    url = "https://github.com/o/r/actions/runs/"
    ci = [CiReading(good, True, None, url + "1"), CiReading(bad, False, None, url + "2", CI_LINE)]
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    loaded = setup.create(store, GitRepo(root), good, bad, config, ci=ci)
    quiet = Console(file=io.StringIO())
    run_bisection(store, loaded, quiet, quiet)
    return store.get(loaded.id), shas


def test_a_runner_that_errors_at_every_commit_reverts_nothing_and_names_the_runner(tmp_path):
    empty = tmp_path / "no-model"
    empty.mkdir()
    row, shas = _nightly(tmp_path, empty)
    outcome = row.outcome or {}
    assert row.status == "untestable" and outcome.get("reason") == "runner_error", outcome
    runner = outcome["facts"]["runner"]
    assert runner and runner in outcome["message"] and "FileNotFoundError" in outcome["message"], outcome
    assert outcome.get("culprit") is None and outcome.get("ab") is None and row.revert is None
    ran = [s for s in row.steps if s.kind != "ci" and s.state == "done"]  # (search runs cancelled as moot aside)
    assert ran and all(s.verdict == "infra" and f"runner {s.runner}: " in (s.infra_reason or "") for s in ran), [
        (s.kind, s.state, s.verdict, s.infra_reason) for s in row.steps
    ]
    assert not [s for s in row.steps if s.kind in ("ab_head", "ab_revert")]
    # what the status comment says: what happened, and what to do about it
    told = said("decode-cache-hit", outcome["message"], outcome["reason"], outcome["facts"])
    assert f"fix the runner {runner}" in told and "/revert-bisect decode-cache-hit good=" in told


def test_a_runner_that_holds_the_model_reproduces_heads_failure_before_the_revert_is_proven(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.bin").write_text("weights")
    row, shas = _nightly(tmp_path, model)
    outcome = row.outcome or {}
    assert row.status == "found" and outcome["culprit"] == shas[7], outcome
    ab = outcome["ab"]
    assert ab["passed"] and ab["head_verdicts"] == ["bad", "bad"] and "1 of them CI's" in ab["head_from"], ab
    head_runs = [s for s in row.steps if s.kind == "ab_head"]
    assert len(head_runs) == 1 and head_runs[0].verdict == "bad" and head_runs[0].sha == shas[-1]
