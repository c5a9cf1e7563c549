"""Where a watched metric's series is on the dashboard: `/series/<owner>/<name>/<test>/<metric>` (its JSON under
`/api`), for the page itself and for whatever links to it (a comment, a revert PR). Pure.

A test id and a metric name may both hold a `/` (`[A-Za-z0-9_.:/-]`); in the address it is written `~`, which
neither may hold, so every series has one address and each address names one series.
"""

from __future__ import annotations


def segment(name: str) -> str:
    """A test id or a metric name as one segment of the address."""
    return name.replace("/", "~")


def unsegment(text: str) -> str:
    return text.replace("~", "/")


def series_path(repository: str, test: str, metric: str) -> str:
    """The series' page, from the dashboard's root (`/api` before it: its JSON)."""
    return f"/series/{repository}/{segment(test)}/{segment(metric)}"
