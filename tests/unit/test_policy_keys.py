"""Every policy key is read by some code: a key that validates and is read nowhere is a lie in the policy file
(issue 11: `comment_only`, `first_parent`, `max_commits` and `results.log.summary` once were).

A key counts as read when a module that uses the policy (imports `bot.domain.policy` or names a `policy`) accesses it as
an attribute of something that is that key's model: `<x>.<parent>.<key>` (e.g. `policy.revert.daily_cap`,
`test.runner.labels`), `<name>.<key>` where the name is the parent key (`runner.labels`), a variable bound from
`<x>.<parent>` (`guards = policy.revert`), a parameter annotated with the model (`test: Test`), or a loop over
the parent (`for t in policy.tests`). A bare `.labels` anywhere does not count for every model with `labels`.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

from pydantic import BaseModel

from bot.domain.policy import Policy, RunnerEnv
from runners.envs import EnvSpec

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "bot" / "policy" / "schema.py"

# Read generically, not by attribute: `test.runner.env.model_dump()` is runners.envs.EnvSpec's JSON, whose
# from_json reads these keys by name (test_runner_env_keys_are_envspec_fields keeps the two in step).
GENERIC = {("RunnerEnv", name) for name in RunnerEnv.model_fields}
# Keys of what is not built yet, whose descriptions (and policies/README.md) say nothing acts on them (none now: a
# series' direction and smallest effect worth acting on are read by the slowdowns' assessment,
# bot/domain/perf/slowdowns.py).
NOT_YET: set[tuple[str, str]] = set()


def _models(annotation) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models(arg)]


def schema_fields(root: type[BaseModel]) -> dict[type[BaseModel], set[str]]:
    """Every pydantic model reachable from `root` -> the names it is reached by (the parent keys, a list key's
    singular, the class name in lower case)."""
    refs: dict[type[BaseModel], set[str]] = {root: {root.__name__.lower()}}
    todo = [root]
    while todo:
        model = todo.pop()
        for name, field in model.model_fields.items():
            for child in _models(field.annotation):
                names = {name, name.removesuffix("s"), child.__name__.lower()}
                if child not in refs:
                    refs[child] = set()
                    todo.append(child)
                refs[child] |= names
    return refs


def _tail(node: ast.AST) -> str | None:
    """The last name of an expression: `policy.revert` -> revert, `policy.test(x)` -> test, `runner` -> runner."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _annotation_names(node: ast.AST | None) -> set[str]:
    return (
        {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        | {n.value for n in ast.walk(node) if isinstance(n, ast.Constant)}
        if node
        else set()
    )


class _Module:
    """One module's attribute reads, with each variable's origin (what it was bound from)."""

    def __init__(self, tree: ast.Module):
        self.reads: list[tuple[ast.AST, str]] = [
            (n.value, n.attr) for n in ast.walk(tree) if isinstance(n, ast.Attribute)
        ]
        self.bound: dict[str, set[str]] = {}  # variable -> tails of what it was bound from, and its annotations' names
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and (tail := _tail(node.value)):
                        self.bound.setdefault(target.id, set()).add(tail)
            elif (
                isinstance(node, (ast.For, ast.comprehension))
                and isinstance(node.target, ast.Name)
                and (tail := _tail(node.iter))
            ):
                self.bound.setdefault(node.target.id, set()).add(tail)
            elif isinstance(node, ast.arg):
                self.bound.setdefault(node.arg, set()).update(_annotation_names(node.annotation))
        self.uses_policy = any(
            isinstance(n, ast.ImportFrom)
            and (n.module or "").startswith(
                ("bot.domain.policy", "bot.domain.repo_policies", "bot.adapters.policy_files")
            )
            for n in ast.walk(tree)
        ) or any(
            isinstance(n, ast.Name)
            and n.id == "policy"
            or isinstance(n, ast.Attribute)
            and n.attr == "policy"
            or isinstance(n, ast.arg)
            and n.arg == "policy"
            for n in ast.walk(tree)
        )

    def reads_field(self, model: type[BaseModel], refs: set[str], field: str) -> bool:
        names = refs | {model.__name__}
        for base, attr in self.reads:
            if attr != field:
                continue
            tail = _tail(base)
            if tail in names or (isinstance(base, ast.Name) and self.bound.get(base.id, set()) & names):
                return True
        return False


def sources() -> list[_Module]:
    paths = [p for top in ("bot", "runners") for p in sorted((ROOT / top).rglob("*.py")) if p != SCHEMA]
    modules = [_Module(ast.parse(p.read_text(), str(p))) for p in paths]
    return [m for m in modules if m.uses_policy]


def unread(root: type[BaseModel], modules: list[_Module], generic: set[tuple[str, str]]) -> list[str]:
    out = []
    for model, refs in schema_fields(root).items():
        for field in model.model_fields:
            if (model.__name__, field) not in generic and not any(m.reads_field(model, refs, field) for m in modules):
                out.append(f"{model.__name__}.{field}")
    return out


def test_every_policy_key_is_read_by_some_code():
    missing = unread(Policy, sources(), GENERIC | NOT_YET)
    assert not missing, (
        f"policy keys no code reads (make them work, or remove them from the schema and policies/): {missing}"
    )


def test_the_walk_reaches_every_model_and_catches_an_unread_key():
    """The check can fail: a key nobody reads is named, and a field with a common name (`labels`) is not counted
    as read because another model's `labels` is."""
    from bot.domain.policy import Closed, Revert, Runner, Test

    reached = schema_fields(Policy)
    assert {Test, Runner, RunnerEnv, Revert} <= set(reached) and {"runner"} <= reached[Runner]

    class Extra(Closed):
        labels: list[str] = []
        colour_of_the_bikeshed: str = "red"

    class Rooted(Closed):
        extra: Extra = Extra()
        revert: Revert = Revert()

    # Rooted's own keys: no code calls a Rooted `rooted`; Revert's keys are read (as `policy.revert.<key>`)
    assert unread(Rooted, sources(), GENERIC) == [
        "Rooted.extra",
        "Rooted.revert",
        "Extra.labels",
        "Extra.colour_of_the_bikeshed",
    ]


def test_runner_env_keys_are_envspec_fields():
    """RunnerEnv is read whole (model_dump -> EnvSpec.from_json): every key must be a field EnvSpec reads."""
    assert set(RunnerEnv.model_fields) == {f.name for f in dataclasses.fields(EnvSpec)}
    spec = EnvSpec.from_json(
        RunnerEnv(project="python/pyproject.toml", extras=["gpu"], pythonpath=["python"], offline=True).model_dump()
    )
    assert spec == EnvSpec("python/pyproject.toml", ("gpu",), ("python",), True)
