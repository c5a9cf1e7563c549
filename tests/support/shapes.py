"""Payloads compared by shape with GitHub's published examples: every key the example has, with a value of
the same JSON type (null on either side matches any: GitHub's examples and events carry nullable fields
both ways), nested objects and each array item (against the example's first item) alike."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def shape_mismatches(got: Any, example: Any, at: str = "", optional: tuple[str, ...] = ()) -> list[str]:
    """Where `got` differs in shape from `example`: `<path>: missing` or `<path>: <got type> != <example type>`.
    `optional`: dotted paths the example has that `got` may lack (e.g. `organization`, sent for org repos only)."""
    out: list[str] = []
    kind, want = json_type(got), json_type(example)
    if "null" in (kind, want):
        return out
    if kind != want:
        return [f"{at or '.'}: {kind} != {want}"]
    if want == "object":
        for key, value in example.items():
            path = f"{at}.{key}" if at else key
            if key not in got:
                if path not in optional:
                    out.append(f"{path}: missing")
                continue
            out += shape_mismatches(got[key], value, path, optional)
    elif want == "array" and example and got:
        for i, item in enumerate(got):
            out += shape_mismatches(item, example[0], f"{at}[{i}]", optional)
    return out
