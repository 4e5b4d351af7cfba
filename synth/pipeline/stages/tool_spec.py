"""Stage `tool_spec`: the tools of the application (tools.json), before any code.

Model calls: stage "tool_spec", subject = the scenario's env_id, or
"<env_id>/<t1>+<t2>+..." when the tools are designed in groups of tables
(a large schema, sized to the stage's output budget; an answer cut off anyway
is asked again for half the tables). The answer (ToolSpecAnswer) is checked
inside the gateway, whose repair turns feed the problems back: valid and unique
names, parameters inside the portable JSON Schema subset and not shadowing the
names tool bodies use, read_only matching what the name says, no tools for
account plumbing (read in context, see stages/plumbing.py), a sensible number
of tools. Whether a read-only tool really leaves the database alone is checked
later by execution, in the tool_code stage.
"""

from __future__ import annotations

import sqlite3

from synth.artifacts import TOOL_NAME_RE, Task, ToolSpec, ToolSpecAnswer, ToolSpecDraft
from synth.folder.database import run_script, table_columns, user_tables
from synth.folder.format import RESERVED_NAMES
from synth.folder.toolschema import check_portable_schema, params_to_schema
from synth.llm import Gateway
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.envcontext import EnvContext
from synth.pipeline.stages.plumbing import tool_plumbing
from synth.pipeline.stages.repair import StageFailed, StageReport, in_pieces

STAGE = "tool_spec"
MIN_TOOLS = 10
MAX_TOOLS = 60
# Names a tool body relies on (the rendered module's imports and helpers); a parameter may not shadow them.
BODY_NAMES = frozenset({"collections", "datetime", "decimal", "json", "math", "re", "sqlite3", "uuid", "Any",
                        "Optional", "ToolError", "db"})
READ_VERBS = frozenset({"get", "list", "search", "find", "view", "show", "lookup", "count", "browse", "query",
                        "fetch", "read", "describe", "calculate", "compute", "estimate", "quote"})
WRITE_VERBS = frozenset({"create", "add", "update", "delete", "remove", "cancel", "book", "set", "assign",
                         "unassign", "register", "record", "pay", "schedule", "reschedule", "complete", "submit",
                         "approve", "reject", "mark", "close", "transfer", "place", "edit", "change", "issue",
                         "renew", "enroll", "archive", "restore", "refund", "reserve", "insert", "modify",
                         "rename", "move", "void", "confirm", "withdraw", "deposit", "apply", "log", "upload"})
TOOLS_PER_TABLE_TOKENS = 550  # about 2-3 tools per table, ~200 output tokens each


def draft_problems(draft: ToolSpecDraft, tables: dict[str, list[str]] | None = None) -> list[str]:
    """Problems of one drafted tool ([] when fine); `tables` ({table: columns}) is the schema, the
    context that tells a domain word (a `course_sessions` table) from account plumbing."""
    name, problems = draft.name, []
    if not TOOL_NAME_RE.match(name):
        return [f"tool {name!r}: the name must match {TOOL_NAME_RE.pattern} (snake_case, e.g. create_booking)"]
    if name in RESERVED_NAMES:
        problems.append(f"tool {name!r}: the name is a Python keyword or builtin; choose a verb_noun name")
    why = tool_plumbing(name, tables)
    if why:
        problems.append(f"tool {name!r} looks like account plumbing ({why}); the user is already signed in. If it "
                        "works on a record of the application itself (a class session, a prior authorization), "
                        "name that record in the tool's name (e.g. create_course_session); otherwise drop it")
    if len(draft.description.split()) < 4:
        problems.append(f"tool {name!r}: describe what it does, its effect and what it returns")
    verb = name.split("_", 1)[0]
    if verb in READ_VERBS and not draft.read_only:
        problems.append(f"tool {name!r}: a '{verb}' tool should not change state; set read_only true "
                        "(or rename it after the change it makes)")
    if verb in WRITE_VERBS and draft.read_only:
        problems.append(f"tool {name!r}: a '{verb}' tool changes state; set read_only false")
    names = [p.name for p in draft.params]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"tool {name!r}: parameter {dup!r} is listed twice")
    for p in draft.params:
        if p.name in BODY_NAMES:
            problems.append(f"tool {name!r}: parameter {p.name!r} would shadow a name the function body needs; "
                            "rename it")
    problems += [f"tool {name!r}: {p}" for p in check_portable_schema(params_to_schema(draft.params))]
    return problems


def spec_problems(answer: ToolSpecAnswer, tables: dict[str, list[str]] | None = None, *,
                  existing: list[str] | None = None, whole: bool = True) -> list[str]:
    """Problems of a tool list (`whole`: the application's entire list, else one group's part,
    with `existing` the names designed in earlier parts); the gateway feeds them back."""
    tools = answer.tools
    problems = []
    if whole and not MIN_TOOLS <= len(tools) <= MAX_TOOLS:
        problems.append(f"there are {len(tools)} tools; an application like this needs {MIN_TOOLS}-{MAX_TOOLS} "
                        "(typically 15-40)")
    if not tools:
        problems.append("the answer has no tools")
    names = [t.name for t in tools]
    problems += [f"tool {n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"tool {n!r} was already designed for other tables; leave it out" for n in names
                 if n in set(existing or [])]
    if whole and tools and all(t.read_only for t in tools):
        problems.append("every tool is read_only; include the tools that change state")
    if whole and tools and not any(t.read_only for t in tools):
        problems.append("no tool is read_only; include the tools that look things up")
    for t in tools:
        problems += draft_problems(t, tables)
    return problems


def to_tool_specs(answer: ToolSpecAnswer) -> list[ToolSpec]:
    return [ToolSpec(name=d.name, description=" ".join(d.description.split()), parameters=params_to_schema(d.params),
                     read_only=d.read_only) for d in answer.tools]


def schema_tables(schema_sql: str) -> dict[str, list[str]]:
    conn = sqlite3.connect(":memory:")
    try:
        run_script(conn, schema_sql)
        return {t: table_columns(conn, t) for t in user_tables(conn)}
    finally:
        conn.close()


async def generate_tool_spec(
    context: EnvContext, tasks: list[Task], gateway: Gateway, *, report: StageReport | None = None,
    sample: int = 0, order: list[str] | None = None,
) -> list[ToolSpec]:
    """The application's tools, designed for all tables at once or in groups of tables (`order`:
    the tables parents-first). Raises StageFailed / synth.llm.StructuredOutputError when unusable."""
    report = report if report is not None else StageReport()
    env_id = context.scenario.env_id
    tables = schema_tables(context.schema_sql)
    order = order or list(tables)
    limit = planned_tokens(STAGE, gateway.settings.max_tokens)
    drafts: list[ToolSpecDraft] = []

    async def design(group: list[str], whole: bool) -> None:
        existing = [d.name for d in drafts]
        messages = context.messages("tool_spec", tasks=tasks, min_tools=MIN_TOOLS, group=None if whole else group,
                                    existing=[f"{d.name}: {d.description}" for d in drafts])
        answer = await gateway.structured(
            ToolSpecAnswer, messages, stage=STAGE, subject=env_id if whole else f"{env_id}/{'+'.join(group)}",
            check=report.counting(lambda a: spec_problems(a, tables, existing=existing, whole=whole)),
            sample=sample, grow=whole)
        drafts.extend(answer.tools)

    await in_pieces(pack(order, {t: TOOLS_PER_TABLE_TOKENS for t in order}, limit), design, stage=STAGE,
                    report=report, what="tools of tables")
    problems = spec_problems(ToolSpecAnswer(tools=drafts), tables)
    if problems:
        raise StageFailed(STAGE, problems, report)
    report.passed = True
    report.repairs = max(0, report.rounds - 1)
    return to_tool_specs(ToolSpecAnswer(tools=drafts))
