"""How a failed test case failed: its own check (`assertion`: an assert, a metric over its threshold) or an
`error` (an exception other than an assertion: an out-of-memory error, a missing model file, a fixture or setup
that did not come up). The bot counts only the first kind as the test failing the way CI's red run did."""

from __future__ import annotations

import re
from collections.abc import Iterable

ASSERTION, ERROR = "assertion", "error"

# an exception named at the start of a message or a traceback line (`E   torch.OutOfMemoryError: ...` in pytest)
_RAISED = re.compile(r"^(?:E\s+)?(?P<name>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt))\b", re.M)


def of_text(text: str | None) -> str:
    """A failure's kind from what it says of itself: an error when it names an exception other than AssertionError,
    else an assertion (`assert x`, `AssertionError: ...`, a bare message)."""
    names = [m.group("name").rsplit(".", 1)[-1] for m in _RAISED.finditer(text or "")]
    return ERROR if any(n != "AssertionError" for n in names) else ASSERTION


def of_cases(failures: Iterable[str | None]) -> str | None:
    """One kind for several failed cases: an assertion when any case's check failed, an error when every one
    errored, None when none said."""
    said = [f for f in failures if f is not None]
    if not said:
        return None
    return ASSERTION if ASSERTION in said else ERROR
