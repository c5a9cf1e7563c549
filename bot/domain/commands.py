"""`/revert-bisect ...` comments: pure parsing, with help text generated from the definitions.

Only the first line of a comment is read. Every value is validated against a strict pattern and
is never handed to a shell; a SHA here is only syntactically checked -- whether it resolves in the
repository is the handler's business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.domain.markdown import code

PREFIX = "/revert-bisect"
SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
TEST_ID = re.compile(r"^[A-Za-z0-9_.:/-]{1,120}$")
ISSUE = re.compile(r"^#?([1-9][0-9]{0,9})$")
MAX_LINE = 1000


@dataclass(frozen=True)
class Start:
    test: str
    good: str | None = None
    bad: str | None = None
    followup: int | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class Status:
    pass


@dataclass(frozen=True)
class Cancel:
    pass


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Invalid:
    """A comment that meant to talk to the bot but cannot be understood; `reply` says why and how."""

    reason: str
    reply: str = field(default="")


Command = Start | Status | Cancel | Help | Invalid


@dataclass(frozen=True)
class Definition:
    usage: str
    summary: str
    example: str
    starts_work: bool  # needs write access (or the policy's allow-list)


DEFINITIONS = {
    "start": Definition(
        "/revert-bisect <test> [good=<sha>] [bad=<sha>] [follow-up=#<n>] [dry-run]",
        "Bisect <test> (a test id from the policy) between the last green and the first red run, "
        "or between the given SHAs; "
        "revert the culprit and open a PR with the evidence (dry-run: report only).",
        "/revert-bisect qwen3-next-models good=1a2b3c4 follow-up=#12345",
        True,
    ),
    "status": Definition(
        "/revert-bisect status",
        "Show the bisections started from this thread and where they stand.",
        "/revert-bisect status",
        False,
    ),
    "cancel": Definition(
        "/revert-bisect cancel",
        "Stop the bisections started from this thread; runs in flight are cancelled.",
        "/revert-bisect cancel",
        True,
    ),
    "help": Definition("/revert-bisect help", "Show this help.", "/revert-bisect help", False),
}


def help_text() -> str:
    rows = "\n".join(
        f"| `{d.usage}` | {d.summary} | {'write, maintain or admin' if d.starts_work else 'anyone'} |"
        for d in DEFINITIONS.values()
    )
    scenarios = "\n".join(d.example for d in DEFINITIONS.values())
    return f"| command | what it does | who may use it |\n|---|---|---|\n{rows}\n\nExamples:\n```\n{scenarios}\n```"


def _invalid(reason: str) -> Invalid:
    return Invalid(reason, f"I could not read that command: {reason}.\n\n{help_text()}")


def parse(body: str | None) -> Command | None:
    """The command on the first line of a comment; None when the comment is not addressed to the bot."""
    if not isinstance(body, str):
        return None
    first = body.lstrip("\ufeff").split("\n", 1)[0].strip()
    if first != PREFIX and not first.startswith(PREFIX + " "):
        return None
    if len(first) > MAX_LINE:
        return _invalid(f"the command line is longer than {MAX_LINE} characters")
    words = first.split()[1:]
    if not words:
        return _invalid("it names no test")
    verb, rest = words[0], words[1:]
    if verb in ("status", "cancel", "help"):
        if rest:
            return _invalid(
                f"`{verb}` takes no arguments (got {code(' '.join(rest)[:60])})"
            )  # their words, quoted safely
        return Status() if verb == "status" else Cancel() if verb == "cancel" else Help()
    if not TEST_ID.match(verb):
        return _invalid("a test id is letters, digits and `_ . : / -`, up to 120 characters")
    options: dict = {}
    for word in rest:
        key, sep, value = word.partition("=")
        if word == "dry-run":
            options["dry_run"] = True
        elif sep and key in ("good", "bad"):
            if not SHA.match(value):
                return _invalid(f"`{key}=` takes a commit SHA of 7 to 40 hex digits")
            options[key] = value.lower()
        elif sep and key == "follow-up":
            match = ISSUE.match(value)
            if not match:
                return _invalid("`follow-up=` takes an issue or PR number such as `#12345`")
            options["followup"] = int(match.group(1))
        else:
            return _invalid(f"unknown option {code(word[:60])}")
    return Start(verb, **options)
