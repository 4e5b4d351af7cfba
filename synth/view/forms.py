"""Try-it forms: one input per parameter of a tool's portable JSON Schema, and the
conversion of the submitted strings back into typed arguments.

Conversion is lenient on purpose: a value that does not parse as its type is
sent as typed, so the runtime's own argument validation answers with the same
error an agent would see.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

PREFIX = "a."  # form field name = PREFIX + parameter name
RAW = "_json"  # optional: the whole arguments object as JSON, overriding the fields


def form_fields(parameters: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(parameters.get("required") or [])
    fields = []
    for name, prop in (parameters.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type", "string")
        items = prop.get("items") if isinstance(prop.get("items"), dict) else {}
        enum = prop.get("enum") if kind != "array" else items.get("enum")
        if kind == "boolean":
            widget = "bool"
        elif kind == "array":
            widget = "lines"
        elif enum:
            widget = "select"
        else:
            widget = "number" if kind in ("integer", "number") else "text"
        fields.append({"name": name, "field": PREFIX + name, "type": kind, "item_type": items.get("type"),
                       "enum": enum or [], "required": name in required, "widget": widget,
                       "description": prop.get("description", "")})
    return fields


def _scalar(text: str, kind: str | None) -> Any:
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            number = float(text)
            return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    except ValueError:
        return text
    if kind == "boolean":
        return {"true": True, "false": False}.get(text.lower(), text)
    return text


def parse_form(body: bytes) -> dict[str, list[str]]:
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def form_arguments(form: dict[str, list[str]], parameters: dict[str, Any]) -> dict[str, Any] | str:
    """Typed arguments from a submitted tool form; the raw JSON field wins when filled in
    (returned as the string itself when it is not a JSON object, for the runtime to reject)."""
    raw = (form.get(RAW) or [""])[0].strip()
    if raw:
        try:
            value = json.loads(raw)
        except ValueError:
            return raw
        return value if isinstance(value, dict) else raw
    args: dict[str, Any] = {}
    for f in form_fields(parameters):
        text = (form.get(f["field"]) or [""])[0]
        if text.strip() == "":
            continue
        if f["type"] == "array":
            args[f["name"]] = [_scalar(line.strip(), f["item_type"]) for line in text.splitlines() if line.strip()]
        else:
            args[f["name"]] = _scalar(text if f["type"] == "string" else text.strip(), f["type"])
    return args
