"""GitHub's `${{ }}` expressions, as the sandbox's runner evaluates them. Pure: no I/O, no state.

Written from GitHub's reference ("Evaluate expressions in workflows and actions",
docs.github.com/en/actions/reference/workflows-and-actions/expressions, and "Contexts reference"):

- literals: null, true, false, numbers (also 0x.. and 1e3), strings in single quotes ('it''s');
- contexts github, inputs, env, vars, secrets, runner, steps, job (keys case-insensitive), read with
  `a.b`, `a['b']`, `a[0]`; a missing property is null;
- operators, by precedence: `( )`, `[ ] .`, `!`, `< <= > >=`, `== !=`, `&&`, `||`. Values of different
  types are compared as numbers (null 0, true 1, '' 0, other strings parsed, NaN otherwise); strings
  compare case-insensitively; arrays and objects are equal only to themselves. `&&` and `||` give an
  operand, not a boolean, and short-circuit. Falsy: false, 0, -0, '', null, NaN;
- functions (names case-insensitive): contains(), startsWith(), endsWith(), format(), join(), toJSON(),
  fromJSON(), and the status functions success(), failure(), always(), cancelled().

`matrix`, `needs` and `strategy` are the job's (a matrix entry; `needs.<job>.result`; outputs are not emulated:
`{}`). Anything else -- another context (jobs), another function (hashFiles), the
`*` filter, a syntax error -- raises `Unsupported` naming it, so the run fails loudly instead of reading
an empty string. GitHub's own evaluation errors (fromJSON of text that is not JSON) raise
`ExpressionError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .values import ExpressionError, as_string, equal, format_string, index, number, to_json, truthy
from .values import compare as _compare

__all__ = ["ExpressionError", "Unsupported", "as_string", "condition", "evaluate", "expression", "number", "truthy"]

CONTEXTS = ("github", "inputs", "env", "vars", "secrets", "runner", "steps", "job", "matrix", "needs", "strategy")
JOB_CONTEXTS = ("matrix", "needs", "strategy")
STATUS = ("success", "failure", "always", "cancelled")
FUNCTIONS = {
    "contains": (2, 2),
    "startswith": (2, 2),
    "endswith": (2, 2),
    "format": (1, None),
    "join": (1, 2),
    "tojson": (1, 1),
    "fromjson": (1, 1),
    **{name: (0, 0) for name in STATUS},
}
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>0x[0-9a-fA-F]+|-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][\w-]*)|(?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,*])|(?P<bad>\S))"
)


class Unsupported(ExpressionError):
    """An expression the sandbox does not evaluate (GitHub might): refused, never read as ''."""


# -- parsing: an expression into a tree of tuples --


def parse(text: str) -> tuple:
    """The expression's tree; Unsupported for what the sandbox does not evaluate or cannot read."""
    tokens = []
    for m in TOKEN.finditer(text):
        if m.lastgroup == "bad":
            raise Unsupported(f"unexpected symbol {m.group('bad')!r} in expression `{text.strip()}`")
        if m.lastgroup:
            tokens.append((m.lastgroup, m.group(m.lastgroup)))
    if not tokens:
        raise Unsupported("an empty expression `${{ }}` (GitHub: an expression was expected)")
    p = _Parser(tokens, text.strip())
    tree = p.disjunction()
    if p.pos != len(tokens):
        raise Unsupported(f"unexpected {tokens[p.pos][1]!r} in expression `{text.strip()}`")
    return tree


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], text: str) -> None:
        self.tokens, self.text, self.pos = tokens, text, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def accept(self, *ops: str) -> str | None:
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] in ops:
            self.pos += 1
            return tok[1]
        return None

    def expect(self, op: str) -> None:
        if self.accept(op) is None:
            found = self.peek()
            raise Unsupported(f"expected {op!r}, found {found[1] if found else 'the end'!r} in `{self.text}`")

    def disjunction(self) -> tuple:
        left = self.conjunction()
        while self.accept("||"):
            left = ("or", left, self.conjunction())
        return left

    def conjunction(self) -> tuple:
        left = self.equality()
        while self.accept("&&"):
            left = ("and", left, self.equality())
        return left

    def equality(self) -> tuple:
        left = self.comparison()
        while op := self.accept("==", "!="):
            left = (op, left, self.comparison())
        return left

    def comparison(self) -> tuple:
        left = self.unary()
        while op := self.accept("<", "<=", ">", ">="):
            left = (op, left, self.unary())
        return left

    def unary(self) -> tuple:
        if self.accept("!"):
            return ("not", self.unary())
        return self.postfix(self.primary())

    def primary(self) -> tuple:
        tok = self.peek()
        if tok is None:
            raise Unsupported(f"an expression ends too early: `{self.text}`")
        kind, text = tok
        self.pos += 1
        if kind == "str":
            return ("lit", text[1:-1].replace("''", "'"))
        if kind == "num":
            return ("lit", number(float(int(text, 16)) if text.lower().startswith("0x") else float(text)))
        if kind == "op" and text == "(":
            inner = self.disjunction()
            self.expect(")")
            return inner
        if kind != "name":
            raise Unsupported(f"unexpected {text!r} in expression `{self.text}`")
        lowered = text.lower()
        if lowered in ("true", "false", "null"):
            return ("lit", {"true": True, "false": False, "null": None}[lowered])
        if self.accept("("):
            return self.call(text)
        if lowered not in CONTEXTS:
            raise Unsupported(f"the context `{text}` (the sandbox evaluates {', '.join(CONTEXTS)})")
        return ("ctx", lowered)

    def call(self, name: str) -> tuple:
        function = name.lower()
        if function not in FUNCTIONS:
            raise Unsupported(f"the function `{name}()` (the sandbox evaluates {', '.join(_NAMES)})")
        args: list[tuple] = []
        if not self.accept(")"):
            args.append(self.disjunction())
            while self.accept(","):
                args.append(self.disjunction())
            self.expect(")")
        low, high = FUNCTIONS[function]
        if len(args) < low or (high is not None and len(args) > high):
            most = high if high is not None else "n"
            raise Unsupported(f"`{name}()` with {len(args)} arguments (it takes {low}..{most})")
        return ("call", function, args)

    def postfix(self, value: tuple) -> tuple:
        while True:
            if self.accept("."):
                tok = self.peek()
                if tok is not None and tok == ("op", "*"):
                    raise Unsupported(f"the object filter `.*` in `{self.text}`")
                if tok is None or tok[0] != "name":
                    raise Unsupported(f"a property name must follow '.' in `{self.text}`")
                self.pos += 1
                value = ("index", value, ("lit", tok[1]))
            elif self.accept("["):
                if self.peek() == ("op", "*"):
                    raise Unsupported(f"the object filter `[*]` in `{self.text}`")
                key = self.disjunction()
                self.expect("]")
                value = ("index", value, key)
            else:
                return value


_NAMES = ["contains", "startsWith", "endsWith", "format", "join", "toJSON", "fromJSON", *[f + "()" for f in STATUS]]


def uses_status_function(tree: tuple) -> bool:
    if tree[0] == "call" and tree[1] in STATUS:
        return True
    return any(isinstance(part, tuple) and uses_status_function(part) for part in tree[1:]) or any(
        isinstance(part, list) and any(uses_status_function(a) for a in part) for part in tree[1:]
    )


# -- evaluation --


def run(tree: tuple, ctx: dict) -> Any:
    """The value of a parsed expression in `ctx` (contexts by lower-case name; `job.status` answers the
    status functions: success, failure or cancelled)."""
    kind = tree[0]
    if kind == "lit":
        return tree[1]
    if kind == "ctx":
        if tree[1] in JOB_CONTEXTS and tree[1] not in ctx:  # e.g. `run-name`, planned before any job
            raise Unsupported(f"the context `{tree[1]}` here (a job's context, where there is no job)")
        return index(ctx, tree[1])
    if kind == "index":
        return index(run(tree[1], ctx), run(tree[2], ctx))
    if kind == "not":
        return not truthy(run(tree[1], ctx))
    if kind == "and":
        left = run(tree[1], ctx)
        return run(tree[2], ctx) if truthy(left) else left
    if kind == "or":
        left = run(tree[1], ctx)
        return left if truthy(left) else run(tree[2], ctx)
    if kind in ("==", "!="):
        same = equal(run(tree[1], ctx), run(tree[2], ctx))
        return same if kind == "==" else not same
    if kind in ("<", "<=", ">", ">="):
        return _compare(kind, run(tree[1], ctx), run(tree[2], ctx))
    return _call(tree[1], [run(a, ctx) for a in tree[2]], ctx)


def _call(function: str, args: list[Any], ctx: dict) -> Any:
    status = as_string(index(index(ctx, "job"), "status")) or "success"
    if function == "always":
        return True
    if function == "success":
        return status == "success"
    if function == "failure":
        return status == "failure"
    if function == "cancelled":
        return status == "cancelled"
    if function == "contains":
        search, item = args
        if isinstance(search, list):
            return any(equal(x, item) for x in search)
        return as_string(item).lower() in as_string(search).lower()
    if function == "startswith":
        return as_string(args[0]).lower().startswith(as_string(args[1]).lower())
    if function == "endswith":
        return as_string(args[0]).lower().endswith(as_string(args[1]).lower())
    if function == "format":
        return format_string(as_string(args[0]), args[1:])
    if function == "join":
        sep = as_string(args[1]) if len(args) > 1 else ","
        return sep.join(as_string(x) for x in args[0]) if isinstance(args[0], list) else as_string(args[0])
    if function == "tojson":
        return to_json(args[0])
    try:  # fromjson
        return json.loads(as_string(args[0]))
    except ValueError:
        raise ExpressionError(f"Error reading JToken from JsonReader: fromJSON({as_string(args[0])!r})") from None


def expression(text: str, ctx: dict) -> Any:
    """One expression's value (null as None). Unsupported / ExpressionError, as above."""
    return run(parse(text), ctx)


def spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, inner text) of each `${{ ... }}` in `text`; a `}}` inside a '...' literal does not end
    one. Unsupported for an expression that is never closed."""
    out, i = [], 0
    while (start := text.find("${{", i)) >= 0:
        j, quoted = start + 3, False
        while j < len(text):
            if text[j] == "'":
                quoted = not quoted  # '' inside a literal toggles twice: still inside
            elif not quoted and text.startswith("}}", j):
                break
            j += 1
        if j >= len(text):
            raise Unsupported(f"an expression that is never closed: `{text[start:].strip()}`")
        out.append((start, j + 2, text[start + 3 : j]))
        i = j + 2
    return out


def evaluate(value: Any, ctx: dict) -> Any:
    """A workflow value with its `${{ }}` expressions evaluated (lists and mappings: each item). A value
    that is exactly one expression keeps the expression's type; else each is interpolated as a string."""
    if isinstance(value, list):
        return [evaluate(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, ctx) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    found = spans(value)
    stripped = value.strip()
    if len(found) == 1 and found[0][1] - found[0][0] == len(stripped) and stripped.startswith("${{"):
        return expression(found[0][2], ctx)
    out, last = [], 0
    for start, end, inner in found:
        out += [value[last:start], as_string(expression(inner, ctx))]
        last = end
    return "".join([*out, value[last:]])


def condition(value: Any, ctx: dict) -> bool:
    """A step's `if:` (with or without `${{ }}`; absent: success()). Without a status function, GitHub
    reads it as `success() && (<if>)`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return truthy(expression("success()", ctx))
    if not isinstance(value, str):
        return truthy(value) and truthy(expression("success()", ctx))
    text = value.strip()
    found = spans(text)
    if len(found) == 1 and found[0][:2] == (0, len(text)):
        text = found[0][2]
    elif found:
        text = "'" + as_string(evaluate(text, ctx)).replace("'", "''") + "'"
    tree = parse(text)
    if not uses_status_function(tree):
        tree = ("and", ("call", "success", []), tree)
    return truthy(run(tree, ctx))
