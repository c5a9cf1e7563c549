"""The values of GitHub's expressions: conversion to string and number, truthiness, loose equality and
comparison, property access, toJSON and format() -- as "Evaluate expressions in workflows and actions"
describes them (docs.github.com/en/actions/reference/workflows-and-actions/expressions). Pure."""

from __future__ import annotations

import json
import math
from typing import Any


class ExpressionError(ValueError):
    """An expression GitHub would reject when evaluating it (fromJSON of text that is not JSON)."""


def as_string(value: Any) -> str:
    """GitHub's conversion of a value to a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(number(value))
    if isinstance(value, list):
        return "Array"
    if isinstance(value, dict):
        return "Object"
    return str(value)


def number(value: float) -> int | float:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return value
    return int(value) if float(value).is_integer() else value


def truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not (value == 0 or math.isnan(value))
    return True


def _as_number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object"


def equal(a: Any, b: Any) -> bool:
    if _kind(a) == _kind(b):
        if isinstance(a, str):
            return a.lower() == b.lower()
        if _kind(a) == "object":
            return a is b
        return a == b
    if "object" in (_kind(a), _kind(b)):
        return False
    return _as_number(a) == _as_number(b)


def compare(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x, y = a.lower(), b.lower()
    elif "object" in (_kind(a), _kind(b)):
        return False
    else:
        x, y = _as_number(a), _as_number(b)  # type: ignore[assignment]
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def index(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        wanted = as_string(key).lower()
        return next((v for k, v in value.items() if str(k).lower() == wanted), None)
    if isinstance(value, list) and isinstance(key, (int, float)) and not isinstance(key, bool):
        return value[int(key)] if 0 <= int(key) < len(value) else None
    return None


def to_json(value: Any) -> str:
    """toJSON(): GitHub pretty-prints with two spaces."""
    return json.dumps(value, indent=2, ensure_ascii=False)


def format_string(template: str, args: list[Any]) -> str:
    out, i = [], 0
    while i < len(template):
        ch = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            out.append(ch)
            i += 2
            continue
        if ch == "{":
            end = template.find("}", i)
            spec = template[i + 1 : end] if end > 0 else ""
            if not spec.isdigit() or int(spec) >= len(args):
                raise ExpressionError(f"The following format string is invalid: {template}")
            out.append(as_string(args[int(spec)]))
            i = end + 1
            continue
        if ch == "}":
            raise ExpressionError(f"The following format string is invalid: {template}")
        out.append(ch)
        i += 1
    return "".join(out)
