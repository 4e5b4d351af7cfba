"""What a gold prompt shows of an env: only the tables and tools its tasks touch.

Every table (with its columns) and every tool (signature and first sentence)
is already in the env's shared context; a gold prompt adds the rows of the
tables a task is about (the tables its instruction names or quotes a value
of, and their foreign-key neighbours), the rows the task names and the rows
linked to them first (found by query, stages/check/task_rows.py, so a task about
row 40 shows row 40), and, for a write task, the code of the
few state-changing tools whose name and description match the instruction
best (its verifier checks their effects). A read task needs no code: its tools'
descriptions say what they return, and its verifier checks the answer against
the data.
"""

from __future__ import annotations

import re
from typing import Any

from synth.artifacts import Task
from synth.folder.format import EnvDraft
from synth.pipeline.stages.envcontext import (EnvContext, data_dump, foreign_neighbours, imports_line, tables_for_text,
                                               tool_source)
from synth.pipeline.stages.check.task_rows import request_rows

GOLD_ROWS = 15  # rows per table in a gold prompt besides the rows its tasks name (always shown)
MAX_TOOLS_SHOWN = 2  # code of at most this many tools per task (every tool is described in the context)
_STOP = frozenset("a an and the of to for in on at by with from is are be it its this that their his her my our "
                  "your please can could would i we me us if or as then also all each any one".split())


def _stems(text: str) -> set[str]:
    words = re.findall(r"[a-z]+", text.lower())
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if w not in _STOP and len(w) > 2}


def relevant_tools(draft: EnvDraft, task: Task, limit: int = MAX_TOOLS_SHOWN) -> list[str]:
    """The state-changing tools a write task most likely calls: words of the instruction found in a
    tool's name (counted twice) and in its description's first sentence; the tools of an earlier gold too."""
    if task.kind != "write":
        return [c.tool for c in task.gold]
    words = _stems(task.instruction)
    scored = []
    for tool in draft.tools:
        if tool.read_only:
            continue
        name = _stems(tool.name.replace("_", " "))
        description = _stems(re.split(r"(?<=[.!?])\s", tool.description.strip(), maxsplit=1)[0])
        score = 2 * len(name & words) + len(description & words)
        if score >= 2:
            scored.append((-score, tool.name))
    names = [n for _, n in sorted(scored)[:limit]]
    return names + [c.tool for c in task.gold if c.tool not in names]


def task_tables(db_bytes: bytes, task: Task) -> list[str]:
    """The tables a task is about, with their foreign-key neighbours ([] when none is recognisable)."""
    direct = tables_for_text(db_bytes, task.instruction)
    return sorted(foreign_neighbours(db_bytes, direct)) if direct else []


def gold_messages(context: EnvContext, draft: EnvDraft, db_bytes: bytes, tasks: list[Task], *,
                  previous: str | None = None, feedback: list[str] | None = None,
                  code: bool = True) -> list[dict[str, Any]]:
    """The gold prompt for one task or a batch: the union of the tasks' tables and tools (`code=False`:
    no tool code, for a repair of verifiers whose actions already replay; the code was a third of a
    repair prompt in a real-model trial, and a verifier fix needs the previous verifier, not the tools)."""
    tables: list[str] = []
    everything = False
    tools: list[str] = []
    for task in tasks:
        scope = task_tables(db_bytes, task)
        everything = everything or not scope
        tables += [t for t in scope if t not in tables]
        tools += [n for n in relevant_tools(draft, task) if n not in tools]
    known = {t.name for t in draft.tools}
    tools = [n for n in tools if n in known] if code else []
    return context.messages(
        "gold", tasks=tasks, previous=previous, feedback=feedback or [], imports=imports_line(),
        data_dump=data_dump(db_bytes, None if everything else tables, rows=GOLD_ROWS,
                            prefer=request_rows(db_bytes, [t.instruction for t in tasks])), all_tables=everything,
        tools_src="\n\n".join(tool_source(draft, n).rstrip() for n in tools))
