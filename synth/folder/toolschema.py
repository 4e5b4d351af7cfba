"""The portable JSON Schema subset of tools.json, and conversions to and from ToolParam.

A tool's `parameters` is always {"type": "object", "properties": {...},
"required": [...], "additionalProperties": false}, each property a primitive
(string/integer/number/boolean) or an array of primitives, optionally with an
enum and a description. Every provider's function calling and every trainer's
tool format accepts this subset, which is why nothing richer is allowed.
"""

from __future__ import annotations

import keyword
import re
from typing import Any

from synth.artifacts import ToolParam

PRIMITIVES = ("string", "integer", "number", "boolean")
PORTABLE_TYPES = PRIMITIVES + ("array",)
PY_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list"}
PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Names a parameter cannot take: the connection argument of every tool function.
RESERVED_PARAMS = frozenset({"db"})
_PROPERTY_KEYS = {"type", "description", "enum", "items"}


def params_to_schema(params: list[ToolParam]) -> dict[str, Any]:
    """list[ToolParam] -> portable JSON Schema object (property order kept)."""
    properties: dict[str, Any] = {}
    for p in params:
        prop: dict[str, Any] = {"type": p.type}
        if p.type == "array":
            prop["items"] = {"type": p.items or "string"}
            if p.enum is not None:  # an enum of an array constrains its elements
                prop["items"]["enum"] = list(p.enum)
        elif p.enum is not None:
            prop["enum"] = list(p.enum)
        if p.description:
            prop["description"] = p.description
        properties[p.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in params if p.required],
        "additionalProperties": False,
    }


def schema_to_params(schema: dict[str, Any]) -> list[ToolParam]:
    """Portable JSON Schema object -> list[ToolParam]; raises ValueError outside the subset."""
    problems = check_portable_schema(schema)
    if problems:
        raise ValueError("; ".join(problems))
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        is_array = prop["type"] == "array"
        params.append(
            ToolParam(
                name=name,
                type=prop["type"],
                description=prop.get("description", ""),
                required=name in required,
                enum=prop["items"].get("enum") if is_array else prop.get("enum"),
                items=prop["items"]["type"] if is_array else None,
            )
        )
    return params


def _value_matches(value: Any, type_: str) -> bool:
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, bool)


def check_portable_schema(schema: Any) -> list[str]:
    """Problems that keep `schema` out of the portable subset; [] when it is fine."""
    if not isinstance(schema, dict):
        return ["parameters must be a JSON object"]
    problems = []
    if schema.get("type") != "object":
        problems.append('parameters must have "type": "object"')
    extra = set(schema) - {"type", "properties", "required", "additionalProperties"}
    if extra:
        problems.append(f"parameters has unsupported keys: {', '.join(sorted(extra))}")
    if schema.get("additionalProperties", False) is not False:
        problems.append('parameters must have "additionalProperties": false')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return problems + ["properties must be an object"]
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        problems.append("required must be a list of property names")
        required = []
    for name in required:
        if name not in properties:
            problems.append(f"required names an unknown property {name!r}")
    for name, prop in properties.items():
        problems += [f"property {name!r}: {p}" for p in _check_property(name, prop)]
    return problems


def _check_property(name: str, prop: Any) -> list[str]:
    problems = []
    if not PARAM_NAME_RE.match(name) or keyword.iskeyword(name) or name in RESERVED_PARAMS:
        problems.append("name must be a Python identifier, not a keyword and not 'db'")
    if not isinstance(prop, dict):
        return problems + ["must be an object"]
    extra = set(prop) - _PROPERTY_KEYS
    if extra:
        problems.append(f"unsupported keys {', '.join(sorted(extra))} (no anyOf/$ref/nesting)")
    type_ = prop.get("type")
    if type_ not in PORTABLE_TYPES:
        return problems + [f"type must be one of {', '.join(PORTABLE_TYPES)}, got {type_!r}"]
    if "description" in prop and not isinstance(prop["description"], str):
        problems.append("description must be a string")
    if type_ == "array":
        items = prop.get("items")
        if not (isinstance(items, dict) and set(items) <= {"type", "enum"} and items.get("type") in PRIMITIVES):
            return problems + ['array items must be {"type": <string|integer|number|boolean>} (+ optional enum)']
        if "enum" in prop:
            problems.append("put the enum of an array in its items")
        if "enum" in items:
            problems += _check_enum(items["enum"], items["type"])
    elif "items" in prop:
        problems.append("items is only allowed on arrays")
    elif "enum" in prop:
        problems += _check_enum(prop["enum"], type_)
    return problems


def _check_enum(enum: Any, type_: str) -> list[str]:
    if not isinstance(enum, list) or not enum:
        return ["enum must be a non-empty list"]
    if type_ not in ("string", "integer") or not all(_value_matches(v, type_) for v in enum):
        return ["enum values must be strings or integers matching the type"]
    return []
