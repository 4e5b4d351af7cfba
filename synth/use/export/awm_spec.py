"""AWM's `api_spec` for an env (gen_spec.jsonl) and the request models of its server code.

Everything here is read from the env folder, nothing is executed: parameter examples
come from the arguments of real calls (the tasks' gold actions, then the check loop's
passing tests), response schemas and examples from the results those tests observed.
Parameters are flat (no anyOf): AWM's tool listing reads `type`, `description` and
`enum` of each top-level property only.
"""

from __future__ import annotations

import json
from typing import Any

from synth.folder.toolschema import schema_to_params
from synth.runtime.schema_check import _json_type
from synth.use.export.source import ExportEnv
from synth.use.replay import MAX_RESULT_CHARS

_PY = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}


def argument_examples(env: ExportEnv, tests: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """tool -> parameter -> a value some real call passed (gold actions first)."""
    calls = [(c.tool, c.arguments) for t in sorted(env.tasks, key=lambda t: t.task_id) for c in t.gold]
    calls += [(t.get("tool"), t.get("arguments") or {}) for t in tests
              if t.get("verdict") == "pass" and (t.get("expectation") or {}).get("outcome") == "success"]
    examples: dict[str, dict[str, Any]] = {}
    for tool, arguments in calls:
        if isinstance(tool, str) and isinstance(arguments, dict):
            for name, value in arguments.items():
                examples.setdefault(tool, {}).setdefault(name, value)
    return examples


def observed_results(tests: list[dict[str, Any]]) -> dict[str, Any]:
    """tool -> the result of its first passing successful test whose result was kept whole."""
    results: dict[str, Any] = {}
    for test in tests:
        observed = test.get("observed") or {}
        if test.get("verdict") != "pass" or not observed.get("ok") or test.get("tool") in results:
            continue
        result = observed.get("result")
        clipped = isinstance(result, str) and len(result) > MAX_RESULT_CHARS and result.endswith("...")
        if result is not None and not clipped:
            results[test["tool"]] = result
    return results


def _awm_type(value: Any) -> str:
    """JSON type names as AWM's specs write them (numbers with a fraction are "float")."""
    json_type = _json_type(value)
    return "float" if json_type == "number" else json_type


def value_schema(value: Any) -> dict[str, Any]:
    """AWM's response-field shape ({"type", "example"}, "items" for arrays, nested fields for
    objects) of one observed value."""
    spec: dict[str, Any] = {"type": _awm_type(value)}
    if isinstance(value, dict):
        spec["properties"] = {k: value_schema(v) for k, v in value.items()}
    elif isinstance(value, list):
        if value:
            first = value[0]
            spec["items"] = ({k: value_schema(v) for k, v in first.items()} if isinstance(first, dict)
                             else value_schema(first))
    else:
        spec["example"] = value
    return spec


def response_schema(result: Any) -> dict[str, Any]:
    """An object result as AWM's field map; any other result as its own shape."""
    if isinstance(result, dict):
        return {k: value_schema(v) for k, v in result.items()}
    return value_schema(result)


def _summary(text: str) -> str:
    first = text.strip().split(". ")[0].split("\n")[0]
    return first[:120].rstrip(".")


def endpoint(env: ExportEnv, tool: Any, examples: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    params = {}
    for p in schema_to_params(tool.parameters):
        spec: dict[str, Any] = {"type": p.type, "param_type": "body", "required": p.required,
                                "description": p.description}
        if p.enum is not None:
            spec["enum"] = list(p.enum)
        if p.items is not None:
            spec["items"] = {"type": p.items}
        if p.name in examples:
            spec["example"] = examples[p.name]
        params[p.name] = spec
    out = {"path": f"/api/{tool.name}", "method": "POST", "summary": _summary(tool.description),
           "description": tool.description, "operation_id": tool.name, "tags": [env.id],
           "request_params": params, "response": {}, "read_only": tool.read_only}
    if tool.name in results:
        out["response"] = response_schema(results[tool.name])
        out["response_example"] = results[tool.name]
    return out


def api_spec(env: ExportEnv, tests: list[dict[str, Any]]) -> dict[str, Any]:
    examples, results = argument_examples(env, tests), observed_results(tests)
    groups = [("Queries", [t for t in env.tools if t.read_only]),
              ("Actions", [t for t in env.tools if not t.read_only])]
    return {"api_groups": [{"group_name": name, "endpoints": [endpoint(env, t, examples.get(t.name, {}), results)
                                                              for t in tools]}
                           for name, tools in groups if tools]}


def request_fields(tool: Any, examples: dict[str, Any]) -> list[str]:
    """Pydantic field lines of a tool's request model, each with Field(description=...). An
    optional field accepts None but advertises the portable schema of its type (WithJsonSchema),
    so its JSON schema has no anyOf and keeps its enum at the top."""
    lines = []
    properties = tool.parameters.get("properties", {})
    for p in schema_to_params(tool.parameters):
        if p.enum is not None:
            inner = f"Literal[{', '.join(json.dumps(v) for v in p.enum)}]"
        else:
            inner = _PY[p.items or "string"] if p.type == "array" else _PY[p.type]
        annotation = f"List[{inner}]" if p.type == "array" else inner
        if not p.required:
            portable = {k: v for k, v in properties[p.name].items() if k != "description"}
            annotation = f"Annotated[Optional[{annotation}], WithJsonSchema({_py_literal(portable)})]"
        options = [f"description={json.dumps(p.description)}"]
        if p.name in examples:
            options.append(f"examples=[{_py_literal(examples[p.name])}]")
        default = "..." if p.required else "None"
        lines.append(f"{p.name}: {annotation} = Field({default}, {', '.join(options)})")
    return lines


def _py_literal(value: Any) -> str:
    """A JSON value as Python source (true/false/null differ)."""
    return repr(json.loads(json.dumps(value)))
