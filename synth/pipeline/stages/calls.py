"""Checking tool calls a model proposes (gold actions, a test's setup calls) before running them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from synth.artifacts import ToolSpec
from synth.runtime.schema_check import ArgumentError, ArgumentValidator


def call_problems(calls: Sequence[Any], tools: dict[str, ToolSpec], label: str) -> list[tuple[int, str]]:
    """(1-based index, problem) for each call ({tool, arguments}) that names an unknown tool or whose
    arguments do not fit its schema; `label` names a call in the message (e.g. "action 2")."""
    problems = []
    for i, call in enumerate(calls, 1):
        tool = tools.get(call.tool)
        if tool is None:
            problems.append((i, f"{label} {i}: unknown tool {call.tool!r}; use a name from the tool list"))
            continue
        try:
            ArgumentValidator(tool.name, tool.parameters)(call.arguments)
        except ArgumentError as exc:
            problems.append((i, f"{label} {i}: {exc}"))
    return problems
