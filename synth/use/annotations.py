"""MCP tool annotations (behaviour hints) from what an env folder knows about its tools.

- readOnlyHint: tools.json's `read_only` flag.
- destructiveHint (write tools): from the database changes the check loop observed in
  tests.jsonl. A tool seen updating or deleting rows in a passing test is destructive;
  one seen only adding rows is additive (false); with no observed change it stays unset.
- idempotentHint: true for read-only tools (reading twice changes nothing); unset for
  write tools, whose repeat behaviour no test observes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

Hints = dict[str, bool]


def observed_changes(tests: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Per tool, the kinds of row change ("added", "changed", "removed") seen in passing tests."""
    seen: dict[str, set[str]] = {}
    for test in tests:
        if test.get("verdict") != "pass" or not isinstance(test.get("tool"), str):
            continue
        diff = (test.get("observed") or {}).get("diff") or {}
        if not isinstance(diff, dict):
            continue
        kinds = seen.setdefault(test["tool"], set())
        for table in diff.values():
            if isinstance(table, dict):
                kinds.update(kind for kind in ("added", "changed", "removed") if table.get(kind))
    return seen


def tool_hints(tools: list[Any], tests: list[dict[str, Any]]) -> dict[str, Hints]:
    """{tool name: {"read_only_hint", "destructive_hint"?, "idempotent_hint"?}} for ToolSpec-like tools."""
    changes = observed_changes(tests)
    hints: dict[str, Hints] = {}
    for tool in tools:
        if tool.read_only:
            hints[tool.name] = {"read_only_hint": True, "idempotent_hint": True}
            continue
        entry: Hints = {"read_only_hint": False}
        kinds = changes.get(tool.name, set())
        if kinds & {"changed", "removed"}:
            entry["destructive_hint"] = True
        elif kinds:
            entry["destructive_hint"] = False
        hints[tool.name] = entry
    return hints


def read_tests(env_dir: Path | str) -> list[dict[str, Any]]:
    """tests.jsonl records; a missing file or an unreadable line gives no evidence, not an error."""
    from synth.errors import InputError
    from synth.folder.files import read_optional_text

    try:
        text = read_optional_text(env_dir, "tests.jsonl") or ""
    except InputError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def env_tool_hints(env: Any) -> dict[str, Hints]:
    """Hints for a loaded env (synth.runtime.Env or an export env: `.path` and `.tools`)."""
    return tool_hints(env.tools, read_tests(env.path))
