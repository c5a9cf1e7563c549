"""Migration 0016: every bisection stored as its tests (bot.domain.bisect.ledger), both ways, on SQLite and PostgreSQL.

Bisections of one test and of several (a JUnit report's), finished and stopped half-way (the process driving them
died with runs in flight), are taken down to 0015's shape (one test's state in the bisection's own columns) and up
again; each finished one reads as it did, each stopped one resumes and ends as the same bisection run without a stop.
A row hand-written in 0015's shape, as the code before wrote it, is read as its one test after the upgrade."""

from __future__ import annotations

import shlex
import time
from datetime import UTC, datetime

import pytest
import sqlalchemy
from alembic import command

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import _alembic_config, connect
from bot.adapters.store.store import Store
from bot.domain.bisect.ledger import entries, runs_of
from bot.domain.bisect.model import Status
from bot.domain.requests import CiReading
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.driver import Driver
from runners.spec import CaseResult, StepResult, StepSpec
from scenarios.synthetic import build


class Stopped(Exception):
    """The process driving the bisection died."""


class Truth:
    """Runs every step at once, as the history says: a test fails from its culprit on (`culprits`: test -> index in
    `shas`, None for the whole step's one test); after `stop_after` results the process dies, runs left in flight."""

    def __init__(self, shas: list[str], culprits: dict[str | None, int], workers: int = 2, stop_after: int = 0):
        self.index = {sha: i for i, sha in enumerate(shas)}
        self.culprits, self.workers, self.stop_after = culprits, workers, stop_after
        self.pending: list[StepSpec] = []
        self.delivered = 0

    @property
    def free(self) -> int:
        return self.workers - len(self.pending)

    def submit(self, spec: StepSpec) -> None:
        self.pending.append(spec)

    def _broken(self, sha: str, test: str | None) -> bool:
        return self.index.get(sha, -1) >= self.culprits[test]

    def wait(self, timeout: float | None) -> list[StepResult]:
        if self.stop_after and self.delivered >= self.stop_after:
            raise Stopped
        if not self.pending:
            time.sleep(0.01)
            return []
        spec = self.pending.pop(0)
        self.delivered += 1
        now = datetime.now(UTC)
        cases = tuple(
            CaseResult(t, "bad" if self._broken(spec.sha, t) else "good") for t in self.culprits if t is not None
        )
        failed = any(c.outcome == "bad" for c in cases) or (None in self.culprits and self._broken(spec.sha, None))
        return [StepResult(spec.step_id, spec.sha, int(failed), None, None, "truth", 1.0, "", now, now, cases=cases)]

    def cancel(self, step_ids: list[int]) -> None:
        self.pending = [s for s in self.pending if s.step_id not in step_ids]

    def waiting(self) -> dict[int, str]:
        return {}

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        return False

    def close(self) -> None:
        pass


def _migrate(engine, how, revision: str) -> None:
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        how(cfg, revision)


def _answer(store: Store, bid: int) -> tuple:
    row = store.get(bid)
    return row.status, (row.outcome or {}).get("culprit"), [(e.test, e.word, e.culprit) for e in entries(row.tests)]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_bisections_of_one_test_and_of_several_finished_and_in_flight_survive_0016_both_ways(
    backend, tmp_path, request
):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = connect(url)
    store = Store(engine)
    repo = build(tmp_path / "repo", 16, 99)
    git = GitRepo(repo.path)
    one = {None: 6}
    several = {"t.A": 4, "t.B": 11}
    single = BisectConfig(command=("true",), workers=2)
    junit = BisectConfig(command=("true",), workers=2, junit="report.xml")

    def start(config: BisectConfig):
        return setup.create(store, git, repo.good, repo.bad, config)

    def drive(loaded, culprits, stop_after=0):
        backend = Truth(repo.shas, culprits, stop_after=stop_after)
        return Driver(store, loaded.id, loaded.problem, loaded.config, backend).run()

    done_one, done_several = start(single), start(junit)
    assert drive(done_one, one).status is Status.FOUND
    assert drive(done_several, several).status is Status.FOUND
    flying_one, flying_several = start(single), start(junit)
    for loaded, culprits in ((flying_one, one), (flying_several, several)):
        with pytest.raises(Stopped):
            drive(loaded, culprits, stop_after=4)
        assert store.get(loaded.id).status is None
        assert any(s.state == "running" for s in store.get(loaded.id).steps)
    finished = {bid: _answer(store, bid) for bid in (done_one.id, done_several.id)}
    assert finished[done_one.id][1] == repo.shas[6]
    assert [c for _, _, c in finished[done_several.id][2]] == [repo.shas[4], repo.shas[11]]
    tests_before = {b.id: store.get(b.id).tests for b in (done_one, flying_one)}
    runs_before = {b.id: [runs_of(s) for s in store.get(b.id).steps] for b in (done_one, flying_one)}

    _migrate(engine, command.downgrade, "0015")  # 0015's shape: one test's state in the bisection's columns
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sqlalchemy.text("SELECT * FROM bisections"))}
        steps = list(conn.execute(sqlalchemy.text("SELECT bisection_id, results FROM steps")))
    for loaded in (done_one, flying_one):
        assert rows[loaded.id].tests is None
        assert {r.results for r in steps if r.bisection_id == loaded.id} == {None}
    for loaded in (done_one, flying_one):  # its one test's state, back in the columns
        (state,) = [e["state"] for e in tests_before[loaded.id].values()]
        row = rows[loaded.id]
        assert (row.confirming, row.confirm_round, row.confirmations) == tuple(
            state[k] for k in ("confirming", "confirm_round", "confirmations")
        )
    assert rows[done_one.id].confirming == repo.shas[6]
    for loaded in (done_several, flying_several):  # a JUnit report's tests stay its tests
        assert rows[loaded.id].tests is not None and rows[loaded.id].merges is not None

    _migrate(engine, command.upgrade, "head")
    for bid in finished:
        assert _answer(store, bid) == finished[bid]
    for bid, tests in tests_before.items():
        assert store.get(bid).tests == tests  # named again as created: by its command
        assert [runs_of(s) for s in store.get(bid).steps] == runs_before[bid]
    (name,) = store.get(done_one.id).tests
    assert name == shlex.join(single.command)

    for loaded, culprits, twin in ((flying_one, one, done_one), (flying_several, several, done_several)):
        outcome = drive(setup.load(store, loaded.id, lambda path: git), culprits)
        assert outcome.status is Status.FOUND
        assert _answer(store, loaded.id) == _answer(store, twin.id)
        lost = [s for s in store.get(loaded.id).steps if s.state == "lost"]
        assert lost and all("stopped before it finished" in (s.infra_reason or "") for s in lost)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_row_written_by_the_code_before_0016_reads_as_its_one_test(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = sqlalchemy.create_engine(url)
    _migrate(engine, command.upgrade, "0015")
    culprit, parent = "c" * 40, "p" * 40
    outcome = {"message": "found", "culprit": culprit, "confidence": 0.995, "ab": {"passed": True}}
    now = datetime.now(UTC)
    with engine.begin() as conn:
        bid = conn.execute(
            sqlalchemy.text(
                "INSERT INTO bisections (repo, good_rev, bad_rev, good, bad, command, settings, phase, merges, "
                "confirming, confirm_round, confirmations, revert, guess, guess_probability, flake_rate, status, "
                "outcome, origin, created_at, updated_at) VALUES ('/r', 'v1', 'main', :g, :b, :cmd, :settings, "
                "'done', :merges, NULL, 3, 2, :rev, :c, 0.995, 0.01, 'found', :outcome, :origin, :now, :now) "
                "RETURNING id"
            ).bindparams(
                sqlalchemy.bindparam("cmd", type_=sqlalchemy.JSON),
                sqlalchemy.bindparam("settings", type_=sqlalchemy.JSON),
                sqlalchemy.bindparam("merges", type_=sqlalchemy.JSON),
                sqlalchemy.bindparam("outcome", type_=sqlalchemy.JSON),
                sqlalchemy.bindparam("origin", type_=sqlalchemy.JSON),
            ),
            dict(
                g="a" * 40,
                b="b" * 40,
                cmd=["python", "-m", "pytest", "test_kl.py"],
                settings={"command": ["python"], "workers": 2},
                merges=[],
                rev="r" * 40,
                c=culprit,
                outcome=outcome,
                origin={"repo": "o/r", "test": "decode-kl", "run": 7},
                now=now,
            ),
        ).scalar_one()
        for sha, kind, state, code, verdict, infra in (
            (parent, "search", "done", 0, "good", None),
            (culprit, "search", "done", 1, "bad", None),
            (culprit, "confirm", "lost", None, "infra", "lost: the runner vanished"),
            (culprit, "ab_head", "running", None, None, None),
        ):
            conn.execute(
                sqlalchemy.text(
                    "INSERT INTO steps (bisection_id, sha, kind, round, state, exit_code, verdict, infra_reason, "
                    "started_at) VALUES (:bid, :sha, :kind, 1, :state, :code, :verdict, :infra, :now)"
                ),
                dict(bid=bid, sha=sha, kind=kind, state=state, code=code, verdict=verdict, infra=infra, now=now),
            )
    _migrate(engine, command.upgrade, "head")
    row = Store(engine).get(bid)
    (test,) = entries(row.tests)
    assert test.test == "decode-kl"  # named as it was asked for
    assert test.state.confirm_round == 3 and test.state.confirmations == 2 and test.state.revert == "r" * 40
    assert test.status is Status.FOUND and test.culprit == culprit and test.told.confidence == 0.995
    assert test.flake_rate == 0.01 and test.guess == culprit
    runs = [r for s in row.steps for r in runs_of(s)]
    assert [(r.sha, r.kind.value, r.raw.exit_code, r.raw.infra_reason, r.test) for r in runs] == [
        (parent, "search", 0, None, "decode-kl"),
        (culprit, "search", 1, None, "decode-kl"),
        (culprit, "confirm", None, "lost: the runner vanished", "decode-kl"),
    ]
    assert row.steps[3].results == {"decode-kl": {"kind": "ab_head"}}  # in flight: its kind, no result yet


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_ci_readings_live_with_their_tests_and_0018_moves_them_both_ways(backend, tmp_path, request):
    """CI's readings of a test are its entry's, never steps; 0018 took the steps they were stored as into their
    tests, and gives them back on a downgrade; the bisection then ends as one that had them from the start."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = connect(url)
    store = Store(engine)
    repo = build(tmp_path / "repo", 16, 99)
    git = GitRepo(repo.path)
    ci = (
        CiReading(repo.shas[3], True, None, "https://ci/runs/3"),
        CiReading(repo.shas[9], False, None, "https://ci/runs/9", "assert kl < 0.002"),
        CiReading("f" * 40, False, None, "https://ci/runs/outside"),  # not in the range: not kept
    )
    loaded = setup.create(store, git, repo.good, repo.bad, BisectConfig(command=("true",), workers=2), ci=ci)
    (test,) = entries(store.get(loaded.id).tests)
    assert test.ci == ci[:2] and not store.get(loaded.id).steps  # no step stands for a reading

    _migrate(engine, command.downgrade, "0017")  # as 0017 kept them: steps of kind ci, already done
    with engine.connect() as conn:
        steps = conn.execute(sqlalchemy.text("SELECT sha, kind, exit_code, runner, log_tail FROM steps")).all()
        tests = conn.execute(sqlalchemy.text("SELECT tests FROM bisections")).scalar()
    assert [tuple(s) for s in steps] == [
        (repo.shas[3], "ci", 0, "https://ci/runs/3", ""),
        (repo.shas[9], "ci", 1, "https://ci/runs/9", "assert kl < 0.002"),
    ]
    assert "ci" not in str(tests)
    _migrate(engine, command.upgrade, "head")
    assert entries(store.get(loaded.id).tests)[0].ci == ci[:2] and not store.get(loaded.id).steps

    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, Truth(repo.shas, {None: 6})).run()
    assert outcome.status is Status.FOUND and outcome.culprit == repo.shas[6]
    ran = store.get(loaded.id).steps
    assert repo.shas[3] not in {s.sha for s in ran if s.kind == "search"}  # CI's pass there was believed
