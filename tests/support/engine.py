"""Driving the culprit finder in synchronous rounds against a results function (unit tests of the engine)."""

from dataclasses import replace

from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Run, State


def drive(problem, outcome_of, workers=4, state=State(), revert=None, given=()):
    """Synchronous rounds against a results function; returns (decision, runs).

    `revert` holds the State fields the caller sets when the engine asks for a revert; `given`, runs already
    recorded (CI's readings)."""
    runs = list(given)
    for _ in range(500):
        d = decide(problem, state, runs, (), workers)
        state = replace(d.state, **revert) if d.wants_revert else d.state
        if d.outcome:
            return d, runs
        runs += [Run(p.sha, p.kind, outcome_of(p.sha), p.round) for p in d.probes]
    raise AssertionError("did not finish")
