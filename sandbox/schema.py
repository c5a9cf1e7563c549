"""GitHub's OpenAPI description (the subset the bot calls), used to hold the sandbox's response bodies to it.

Each renderer writes every field GitHub's description requires, itself. `conform(body, schema, base)`
fills nothing: it checks, and raises `SchemaGap` naming each required field a body lacks (the sandbox then
answers 500 with that message, which the contract tests report), so a missing field is caught instead of
papered over with a neutral value taken from the same description the contract check reads.

`KNOWN_GAPS` would list, by (schema, field), fields a renderer leaves to this module to fill with a neutral
value of the declared type; it is empty (every renderer writes every required field), and nothing may be added
to it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SPEC_PATH = Path(__file__).with_name("openapi") / "api.github.com.subset.json"
EPOCH_ISO = "2026-01-01T00:00:00Z"

# (top-level schema, dotted path of the field inside it) a renderer may leave to this module: none left
KNOWN_GAPS: set[tuple[str, str]] = set()


class SchemaGap(AssertionError):
    """A response body lacks fields GitHub's description requires."""


@lru_cache(maxsize=1)
def spec() -> dict:
    return json.loads(SPEC_PATH.read_text())


def component(name: str) -> dict:
    return spec()["components"]["schemas"][name]


def _resolve(schema: dict) -> dict:
    while "$ref" in schema:
        schema = component(schema["$ref"].rsplit("/", 1)[1])
    return schema


def _merged(schema: dict) -> dict:
    """allOf flattened into one object schema (properties and required united)."""
    schema = _resolve(schema)
    if "allOf" not in schema:
        return schema
    out: dict = {"type": "object", "properties": {}, "required": []}
    for part in schema["allOf"]:
        part = _merged(part)
        out["properties"].update(part.get("properties", {}))
        out["required"] += [r for r in part.get("required", []) if r not in out["required"]]
    return out


def _object_choice(schema: dict) -> dict | None:
    """The schema a dict value is checked against: itself, or the first object alternative."""
    schema = _merged(schema)
    if schema.get("type") == "object" or "properties" in schema:
        return schema
    for alt in schema.get("oneOf", []) + schema.get("anyOf", []):
        alt = _merged(alt)
        if alt.get("type") == "object" or "properties" in alt:
            return alt
    return None


def placeholder(schema: dict, name: str, base: str) -> Any:
    """A neutral value of the declared type (only for KNOWN_GAPS)."""
    schema = _merged(schema)
    if schema.get("nullable"):
        return None
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return placeholder(schema[key][0], name, base)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    fmt = schema.get("format")
    if fmt == "date-time":
        return EPOCH_ISO
    if fmt == "uri":
        return f"{base}/sandbox/{name}"
    return ""


def missing(value: Any, schema: dict | str, at: str = "") -> list[str]:
    """The dotted paths of the required fields `value` lacks (nested objects and array items included)."""
    if isinstance(schema, str):
        schema = component(schema)
    out: list[str] = []
    if isinstance(value, dict):
        target = _object_choice(schema)
        if target is None:
            return out
        props = target.get("properties", {})
        out += [f"{at}{name}" for name in target.get("required", []) if name not in value]
        for name, sub in value.items():
            if name in props and isinstance(sub, (dict, list)):
                out += missing(sub, props[name], f"{at}{name}.")
    elif isinstance(value, list):
        schema = _merged(schema)
        if schema.get("type") == "array" and "items" in schema:
            for i, item in enumerate(value):
                out += missing(item, schema["items"], f"{at}{i}.")
    return out


def conform(value: Any, schema: str, base: str) -> Any:
    """`value`, checked against the component `schema`: SchemaGap names the required fields it lacks
    (only the KNOWN_GAPS of top-level fields are filled, pending their renderers)."""
    gaps = []
    for path in missing(value, schema):
        if (schema, path) in KNOWN_GAPS and isinstance(value, dict) and "." not in path:
            props = (_object_choice(component(schema)) or {}).get("properties", {})
            value[path] = placeholder(props.get(path, {}), path, base)
        else:
            gaps.append(path)
    if gaps:
        raise SchemaGap(f"the sandbox's {schema} body lacks required field(s) {', '.join(gaps)} (GitHub's description)")
    return value
