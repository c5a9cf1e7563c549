"""The typed outcome (bot.domain.outcome), the steps' backend column (migration 0011) and a best guess never stored as
the culprit (migration 0015)."""

from types import SimpleNamespace

import pytest
import sqlalchemy
from alembic import command

from bot.adapters.store.db import _alembic_config, connect
from bot.adapters.store.store import NewBisection, NewStep, Store
from bot.domain.bisect.ledger import conclusion, entries
from bot.domain.bisect.model import Status
from bot.domain.outcome import AB, BisectionOutcome, outcome_of, parse_outcome
from tests.support.old_rows import bisections as table
from tests.support.old_rows import old_bisection


def test_a_driver_outcome_round_trips_with_the_publishers_facts():
    out = BisectionOutcome(
        message="found",
        culprit="c" * 40,
        confidence=0.99,
        candidates=[],
        revert_error=None,
        ab=AB(head="h", revert="r", passed=True, head_verdicts=["bad"], revert_verdicts=["good"]),
    )
    stored = out.as_json()
    assert stored["revert_error"] is None and "revert_pr" not in stored  # the keys given, no more
    row = SimpleNamespace(outcome=stored)
    published = outcome_of(row).with_facts(culprit_pr=7, revert_pr=12, revert_pr_url="https://x/pull/12", branch=None)
    again = outcome_of(SimpleNamespace(outcome=published.as_json()))
    assert again == published and again.ab.passed and again.revert_pr == 12 and again.branch is None
    assert "branch" in published.as_json()  # an explicit null is kept: the API says "no branch pushed"


def test_rows_written_before_read_tolerantly():
    assert outcome_of(SimpleNamespace(outcome=None)) is None
    old = parse_outcome({"message": "x", "note": "written by hand", "revert_pr": "#13", "pr_number": 4})
    assert old.message == "x" and old.revert_pr == 13 and old.culprit is None and old.candidates == []
    assert old.as_json()["note"] == "written by hand" and old.as_json()["pr_number"] == 4  # unknown keys kept
    bad = parse_outcome(
        {"message": 5, "culprit": 3, "candidates": "x", "ab": "nope", "confidence": "high", "status": "found"}
    )
    assert bad.as_json() == {"status": "found"}  # each value that does not fit is dropped, the rest kept
    assert parse_outcome({"revert_pr": True}).revert_pr is None  # True is no PR number
    assert parse_outcome(["not", "a", "dict"]) == BisectionOutcome()


def test_new_steps_record_their_backend(tmp_path):
    store = Store(connect(f"sqlite:///{tmp_path / 'db.sqlite'}"))
    bid = store.create(NewBisection("/r", "v1", "main", "a" * 40, "b" * 40, ["./t.sh"], {}), "calibrating")
    store.add_steps(
        bid, [NewStep("a" * 40, "calibrate", 1, backend="github_actions"), NewStep("b" * 40, "calibrate", 1)]
    )
    assert [s.backend for s in store.get(bid).steps] == ["github_actions", None]


def test_migration_0011_backfills_the_backend_from_the_runner(tmp_path):
    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0010")
        # (no bisection row: SQLite does not enforce the foreign key without its pragma)
        for i, runner in enumerate(
            ["local/wt-0", "actions-runner-3 (http://h/o/r/actions/runs/17)", "ssh://gpu-box", None]
        ):
            conn.execute(
                sqlalchemy.text(
                    "INSERT INTO steps (id, bisection_id, sha, kind, round, state, runner, started_at) "
                    "VALUES (:id, 1, 'a', 'search', 1, 'done', :runner, '2026-01-01')"
                ),
                {"id": i + 1, "runner": runner},
            )
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0011")
        got = conn.execute(sqlalchemy.text("SELECT backend FROM steps ORDER BY id")).scalars().all()
    assert got == ["local", "github_actions", None, None]


def test_the_ab_in_words_counts_each_side_and_names_what_stood_for_head():
    own = AB(head_verdicts=["bad", "bad"], revert_verdicts=["good"], passed=True)
    assert own.in_words() == "HEAD fails (2 runs), HEAD + revert passes (1 run)"
    stood = AB(head_verdicts=["bad"], revert_verdicts=["good"], head_from="BAD itself, read red by CI")
    assert stood.in_words() == "HEAD fails (1 run; BAD itself, read red by CI), HEAD + revert passes (1 run)"


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_migration_0015_moves_an_unfound_answers_culprit_to_its_best_guess(backend, tmp_path, request):
    """Rows written before: an inconclusive or ambiguous answer (and a group's test) kept its commit under `culprit`,
    which a script would revert; after 0015 it is the `best_guess` and the culprit is null. A found one is kept."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = sqlalchemy.create_engine(url)
    cfg = _alembic_config()

    def migrate(how, revision):
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            how(cfg, revision)

    migrate(command.upgrade, "0014")
    guess, culprit = "9" * 40, "c" * 40

    def ended(status, outcome, tests=None, phase="done"):  # as the code before 0015 wrote it
        return old_bisection(engine, phase=phase, status=status, outcome=outcome, tests=tests)

    def get(bid):
        with engine.connect() as conn:
            return conn.execute(sqlalchemy.select(table).where(table.c.id == bid)).one()

    said = "stopped after 40 runs without reaching confidence 0.99 (best guess P=0.930)"
    inconclusive = ended("inconclusive", {"message": said, "culprit": guess, "confidence": 0.93, "revert_pr": None})
    ambiguous = ended(
        "ambiguous",
        {"message": "one of 2", "culprit": guess, "first_parent_culprit": guess, "candidates": ["8" * 40, guess]},
    )
    found = ended("found", {"message": "found", "culprit": culprit, "first_parent_culprit": culprit, "confidence": 1})
    no_culprit = ended("no_culprit", {"message": "BAD passed on re-runs", "culprit": None})
    members = {
        "t1": {"good": "a" * 40, "status": "found", "outcome": {"message": "found", "culprit": culprit}},
        "t2": {"good": "a" * 40, "status": "inconclusive", "outcome": {"message": said, "culprit": guess}},
    }
    group = ended("inconclusive", {"message": "1 culprit for 2 tests", "culprit": culprit}, tests=members)
    running = ended(None, None, phase="searching")
    before = {bid: (get(bid).outcome, get(bid).tests) for bid in (found, no_culprit, running)}

    migrate(command.upgrade, "0015")
    got = get(inconclusive).outcome
    assert got == {"message": said, "culprit": None, "first_parent_culprit": None, "best_guess": guess,
                   "confidence": 0.93, "revert_pr": None}  # fmt: skip
    got = get(ambiguous).outcome
    assert got["culprit"] is None and got["first_parent_culprit"] is None and got["best_guess"] == guess
    assert got["candidates"] == ["8" * 40, guess]
    assert {bid: (get(bid).outcome, get(bid).tests) for bid in before} == before  # nothing to move
    row = get(group)
    assert row.outcome["culprit"] is None and row.outcome["best_guess"] == culprit
    assert row.tests["t1"] == members["t1"]  # a test of the group that found its culprit keeps it
    assert row.tests["t2"]["outcome"] == {"message": said, "culprit": None, "first_parent_culprit": None,
                                          "best_guess": guess}  # fmt: skip
    assert outcome_of(get(inconclusive)).best_guess == guess

    migrate(command.downgrade, "0014")  # back as the code before wrote it
    assert get(inconclusive).outcome["culprit"] == guess and "best_guess" not in get(inconclusive).outcome
    assert get(group).tests["t2"]["outcome"]["culprit"] == guess
    assert get(found).outcome == before[found][0]


def test_a_group_not_found_names_no_culprit_only_the_best_guess_of_the_test_that_decided_it():
    found = {"status": "found", "outcome": {"message": "found", "culprit": "c" * 40, "first_parent_culprit": "c" * 40}}
    stopped = {"status": "inconclusive", "outcome": {"message": "stopped", "best_guess": "9" * 40, "confidence": 0.93}}
    status, told = conclusion(entries({"t1": found, "t2": stopped}))
    assert status is Status.INCONCLUSIVE  # t1's culprit stays t1's own (its entry): the group's answer is not found
    assert told.culprit is None and told.first_parent_culprit is None
    assert told.best_guess == "9" * 40 and told.confidence == 0.93
    status, told = conclusion(entries({"t1": found, "t2": {"status": "no_culprit", "outcome": {"message": "a flake"}}}))
    assert status is Status.FOUND and told.culprit == "c" * 40 and told.best_guess is None
