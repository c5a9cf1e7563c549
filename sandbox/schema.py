"""GitHub's OpenAPI description (the subset the bot calls), used to complete response bodies.

The sandbox writes the fields that carry meaning (ids, numbers, titles, shas, URLs, users...) and
`conform` fills every other *required* field with a neutral value of the declared type, so each
body has the shape GitHub's own description promises (the contract tests validate that).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SPEC_PATH = Path(__file__).with_name("openapi") / "api.github.com.subset.json"
EPOCH_ISO = "2026-01-01T00:00:00Z"


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
    """The schema a dict value is completed against: itself, or the first object alternative."""
    schema = _merged(schema)
    if schema.get("type") == "object" or "properties" in schema:
        return schema
    for alt in schema.get("oneOf", []) + schema.get("anyOf", []):
        alt = _merged(alt)
        if alt.get("type") == "object" or "properties" in alt:
            return alt
    return None


def placeholder(schema: dict, name: str, base: str) -> Any:
    schema = _merged(schema)
    if schema.get("nullable"):
        return None
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return placeholder(schema[key][0], name, base)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if kind == "object":
        return conform({}, schema, base)
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
    if fmt == "email":
        return "noreply@sandbox.invalid"
    return ""


def conform(value: Any, schema: dict | str, base: str) -> Any:
    """Complete `value` in place (and return it) with every required field `schema` declares."""
    if isinstance(schema, str):
        schema = component(schema)
    if isinstance(value, dict):
        target = _object_choice(schema)
        if target is None:
            return value
        props = target.get("properties", {})
        for name in target.get("required", []):
            if name not in value:
                value[name] = placeholder(props.get(name, {}), name, base)
        for name, sub in list(value.items()):
            if name in props and isinstance(sub, (dict, list)):
                conform(sub, props[name], base)
    elif isinstance(value, list):
        schema = _merged(schema)
        if schema.get("type") == "array" and "items" in schema:
            for item in value:
                conform(item, schema["items"], base)
    return value
