"""A repository's policies: several files may speak for one repository (SGLang's accuracy nightly in one, its
performance nightly in another), each with its own watch, results, tests and limits. Pure.

What the bot looks up, and in which policy:

- a red run: the policy whose `watch` names its workflow (bot.domain.scope.watched); that policy's `results` read the
  run and its `tests` are the ones scoped;
- a test (`/revert-bisect <test>`, a bisection being admitted): the policy that declares it; its bisect, revert and
  runner settings are the ones used;
- who may command the bot (`commands`): one answer per repository (`/revert-bisect cancel` and `status` name no
  test), so every policy of a repository must say the same.

What makes them ambiguous, refused when they are loaded (`conflicts`): a test id declared in two of them (a command
naming it could mean either), two of them watching the same workflow on the same branch for the same event (a red
run would be read twice, by two `results`, and a failed file matched by two `tests` would be bisected twice: which
tests overlap is a question about regexes no loader can answer, so the watch itself may not be shared -- one
workflow's tests go in one policy, each test with its own metrics), and different `commands`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from bot.domain.policy import Commands, Policy, Test, Watch
from bot.domain.scope import RunInfo, watched

Loc = tuple[str | int, ...]  # a key's path in its policy file, as pydantic writes it: ("tests", 0, "id")


@dataclass(frozen=True)
class Conflict:
    """Policy `index` (loaded after `other`) says `loc` where policy `other` says `other_loc`, and both cannot hold."""

    index: int
    loc: Loc
    other: int
    other_loc: Loc
    why: str


def _workflow_key(workflow: str) -> str:
    """The watched workflow as a comparable key: a path's file name (`.github/workflows/x.yml` and `x.yml` are one
    file), else its name as written."""
    text = workflow.strip()
    return text.rsplit("/", 1)[-1] if text.endswith((".yml", ".yaml")) else text


def _shared(a: Watch, b: Watch) -> bool:
    return (
        _workflow_key(a.workflow) == _workflow_key(b.workflow)
        and a.branch == b.branch
        and bool(set(a.events) & set(b.events))
    )


def conflicts(policies: Sequence[Policy]) -> list[Conflict]:
    """What makes these policies of one repository ambiguous together, each named at the later policy's key."""
    out: list[Conflict] = []
    for j, later in enumerate(policies):
        for i, earlier in enumerate(policies[:j]):
            ids = {t.id: k for k, t in enumerate(earlier.tests)}
            for k, test in enumerate(later.tests):
                if test.id in ids:
                    out.append(
                        Conflict(
                            j,
                            ("tests", k, "id"),
                            i,
                            ("tests", ids[test.id], "id"),
                            f"test id {test.id} is declared by two policies of {later.repository}: a test id names one "
                            "test in its repository",
                        )
                    )
            for k, watch in enumerate(later.watch):
                m = next((m for m, w in enumerate(earlier.watch) if _shared(w, watch)), None)
                if m is not None:
                    events = ", ".join(sorted(set(watch.events) & set(earlier.watch[m].events)))
                    out.append(
                        Conflict(
                            j,
                            ("watch", k, "workflow"),
                            i,
                            ("watch", m, "workflow"),
                            f"{watch.workflow} ({events} on {watch.branch}) is watched by two policies of "
                            f"{later.repository}: a red run is read by one policy; put that workflow's tests in one "
                            "policy (each test reads its own `metrics`)",
                        )
                    )
            if later.commands != earlier.commands:
                out.append(
                    Conflict(
                        j,
                        ("commands",),
                        i,
                        ("commands",),
                        f"`commands` differs between two policies of {later.repository}: who may command the bot "
                        "(`/revert-bisect cancel` and `status` name no test) is one answer per repository",
                    )
                )
    return out


@dataclass(frozen=True)
class RepoPolicies:
    """Every policy of one repository, in the order they were read, and the file each came from (for messages)."""

    policies: tuple[Policy, ...]
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError("a repository's policies: at least one")
        if len({p.repository for p in self.policies}) != 1:
            raise ValueError(f"policies of several repositories: {sorted({p.repository for p in self.policies})}")
        if self.sources and len(self.sources) != len(self.policies):
            raise ValueError("one source per policy")
        found = conflicts(self.policies)
        if found:
            raise ValueError("; ".join(c.why for c in found))

    @classmethod
    def one(cls, policy: Policy, source: str = "") -> RepoPolicies:
        return cls((policy,), (source,) if source else ())

    @property
    def repository(self) -> str:
        return self.policies[0].repository

    @property
    def commands(self) -> Commands:
        """Who may command the bot here: the same in every policy of the repository (`conflicts`)."""
        return self.policies[0].commands

    def __iter__(self) -> Iterator[Policy]:
        return iter(self.policies)

    def source(self, policy: Policy) -> str:
        """The file the policy came from, or its repository when it was not read from a file."""
        k = next(k for k, p in enumerate(self.policies) if p is policy)
        return self.sources[k] if self.sources else f"policy {k + 1} of {self.repository}"

    @property
    def tests(self) -> list[Test]:
        return [t for p in self.policies for t in p.tests]

    def for_test(self, test_id: str) -> Policy | None:
        """The policy that declares the test (a selector's `<id>:<file>` too): a declared id before a selector's."""
        exact = next((p for p in self.policies if any(t.id == test_id for t in p.tests)), None)
        return exact or next((p for p in self.policies if p.test(test_id) is not None), None)

    def test(self, test_id: str) -> Test | None:
        policy = self.for_test(test_id)
        return policy.test(test_id) if policy is not None else None

    def watching(self, run: RunInfo) -> list[tuple[Policy, Watch]]:
        """Every policy that watches this run, with its watch entry. More than one can only be a workflow named by
        its path in one policy and by its name in another (`conflicts` refuses the same path twice): ambiguous, the
        caller says so and reads the run with neither."""
        return [(p, w) for p in self.policies if (w := watched(p, run)) is not None]
