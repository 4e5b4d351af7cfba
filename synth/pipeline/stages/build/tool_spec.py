"""Stage `tool_spec`: the tools of the application (tools.json), before any code.

Model calls: stage "tool_spec", subject = the scenario's env_id, or
"<env_id>/<t1>+<t2>+..." when the tools are designed in groups of tables
(a large schema, sized to the stage's output budget; an answer cut off anyway
is asked again for half the tables). The answer (ToolSpecAnswer) is checked
inside the gateway, whose repair turns feed the problems back: valid and unique
names, parameters inside the portable JSON Schema subset and not shadowing the
names tool bodies use, read_only matching what the name says, no tools for
account plumbing (read in context, see stages/build/plumbing.py), a sensible number
of tools. Whether a read-only tool really leaves the database alone is checked
later by execution, in the tool_code stage.
"""

from __future__ import annotations

import math
import sqlite3

from synth.artifacts import TOOL_NAME_RE, Task, ToolSpec, ToolSpecAnswer, ToolSpecDraft, ToolSpecRevision
from synth.folder.database import run_script, table_columns, user_tables
from synth.folder.format import RESERVED_NAMES
from synth.folder.toolschema import check_portable_schema, params_to_schema
from synth.llm import Gateway
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.envcontext import EnvContext
from synth.pipeline.stages.build.plumbing import tool_plumbing
from synth.pipeline.stages.repair import StageFailed, StageReport, clip, in_pieces

STAGE = "tool_spec"
MIN_TOOLS = 10
MAX_TOOLS = 48
TOOLS_PER_TABLE = 2.5  # the tool budget: a lookup or search and one or two changes per table
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
                  existing: list[str] | None = None, whole: bool = True, budget: int = MAX_TOOLS) -> list[str]:
    """Problems of a tool list (`whole`: the application's entire list, else one group's part,
    with `existing` the names designed in earlier parts); the gateway feeds them back."""
    tools = answer.tools
    problems = []
    if whole and not MIN_TOOLS <= len(tools) <= max(budget, MIN_TOOLS):
        problems.append(f"there are {len(tools)} tools; this application needs {MIN_TOOLS}-{max(budget, MIN_TOOLS)}: "
                        + ("merge tools (one search with filters instead of several lookups) or leave out the least "
                           "needed" if len(tools) > budget else "add the ordinary operations that are missing"))
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


def tool_budget(tables: int) -> int:
    """How many tools the whole application gets: about TOOLS_PER_TABLE per table, within the limits."""
    return max(MIN_TOOLS + 2, min(MAX_TOOLS, math.ceil(TOOLS_PER_TABLE * tables)))


def part_budgets(groups: list[list[str]], total: int) -> list[int]:
    """The tool budget of each part, in proportion to its tables, adding up to exactly `total`
    (largest remainders get the leftover tools; every part gets at least 2)."""
    tables = sum(len(g) for g in groups) or 1
    shares = [total * len(g) / tables for g in groups]
    budgets = [max(2, math.floor(s)) for s in shares]
    by_remainder = sorted(range(len(groups)), key=lambda i: shares[i] - math.floor(shares[i]), reverse=True)
    for i in by_remainder[:max(0, total - sum(budgets))]:
        budgets[i] += 1
    return budgets


def revise(drafts: list[ToolSpecDraft], revision: ToolSpecRevision) -> list[ToolSpecDraft]:
    """The merged list after a consolidation turn's edits."""
    dropped = set(revision.drop)
    replaced = {d.name: d for d in revision.replace}
    kept = [replaced.get(d.name, d) for d in drafts if d.name not in dropped]
    return kept + list(revision.add)


def revision_problems(drafts: list[ToolSpecDraft], revision: ToolSpecRevision,
                      tables: dict[str, list[str]]) -> list[str]:
    names = {d.name for d in drafts}
    problems = [f"drop: there is no tool {n!r}" for n in revision.drop if n not in names]
    problems += [f"replace: there is no tool {d.name!r} to replace (put new tools in add)" for d in revision.replace
                 if d.name not in names]
    problems += [f"add: tool {d.name!r} already exists (put changed tools in replace)" for d in revision.add
                 if d.name in names]
    return problems or spec_problems(ToolSpecAnswer(tools=revise(drafts, revision)), tables)


async def generate_tool_spec(
    context: EnvContext, tasks: list[Task], gateway: Gateway, *, report: StageReport | None = None,
    sample: int = 0, order: list[str] | None = None,
) -> list[ToolSpec]:
    """The application's tools, designed for all tables at once or in groups of tables (`order`:
    the tables parents-first). Each part is told its share of the tool budget (the shares add up
    to the whole) and checked against it; what only the merged list shows goes to a
    consolidation turn. Raises StageFailed / synth.llm.StructuredOutputError when unusable."""
    report = report if report is not None else StageReport()
    env_id = context.scenario.env_id
    tables = schema_tables(context.schema_sql)
    order = order or list(tables)
    total = tool_budget(len(order))
    limit = planned_tokens(STAGE, gateway.settings.max_tokens)
    drafts: list[ToolSpecDraft] = []
    budgets: dict[tuple[str, ...], int] = {}

    def budget_of(group: list[str]) -> int:
        if tuple(group) not in budgets:  # a part asked again in halves: its budget is shared out too
            budgets[tuple(group)] = part_budgets([group], max(2, round(total * len(group) / len(order))))[0]
        return budgets[tuple(group)]

    async def design(group: list[str], whole: bool) -> None:
        existing = [d.name for d in drafts]
        budget = total if whole else budget_of(group)

        def problems(answer: ToolSpecAnswer) -> list[str]:
            found = spec_problems(answer, tables, existing=existing, whole=whole, budget=budget)
            if not whole and len(answer.tools) > budget:
                found.append(f"this part has {len(answer.tools)} tools, over its budget of {budget} (the "
                             f"application's {total} tools are shared out between its parts): merge tools "
                             "(one search with filters instead of several lookups) or leave out the least needed")
            return found

        messages = context.messages("tool_spec", tasks=tasks, min_tools=MIN_TOOLS, group=None if whole else group,
                                    existing=[f"{d.name}: {d.description}" for d in drafts], budget=budget,
                                    total=total, parts=len(groups), all_tables=order)
        answer = await gateway.structured(
            ToolSpecAnswer, messages, stage=STAGE, subject=env_id if whole else f"{env_id}/{'+'.join(group)}",
            check=report.counting(problems), sample=sample, grow=whole)
        drafts.extend(answer.tools)

    groups = pack(order, {t: TOOLS_PER_TABLE_TOKENS for t in order}, limit)
    for group, share in zip(groups, part_budgets(groups, total)):
        budgets[tuple(group)] = share
    done = await in_pieces(groups, design, stage=STAGE, report=report, what="tools of tables")
    if len(done) > 1 and spec_problems(ToolSpecAnswer(tools=drafts), tables):
        drafts = await consolidate(context, drafts, tables, gateway, report=report, sample=sample)
    problems = spec_problems(ToolSpecAnswer(tools=drafts), tables)
    if problems:
        raise StageFailed(STAGE, problems, report)
    report.passed = True
    report.repairs = max(0, report.rounds - 1)
    return to_tool_specs(ToolSpecAnswer(tools=drafts))


async def consolidate(context: EnvContext, drafts: list[ToolSpecDraft], tables: dict[str, list[str]],
                      gateway: Gateway, *, report: StageReport, sample: int) -> list[ToolSpecDraft]:
    """A turn over the merged list of every part's tools that sees what is wrong with the whole
    (too many tools, no read-only tool, ...) and merges, drops or adds tools to fix it."""
    problems = spec_problems(ToolSpecAnswer(tools=drafts), tables)
    report.add_problems(problems)
    report.notes.append(clip("the merged tool list needed a consolidation turn: " + "; ".join(problems)))
    listed = [f"{d.name}({', '.join(p.name + ('' if p.required else '?') for p in d.params)})"
              f" [{'read-only' if d.read_only else 'changes data'}]: {' '.join(d.description.split())}"
              for d in drafts]
    messages = context.messages("tool_spec_revise", tools=listed, problems=problems, min_tools=MIN_TOOLS,
                                max_tools=MAX_TOOLS)
    revision = await gateway.structured(
        ToolSpecRevision, messages, stage=STAGE, subject=f"{context.scenario.env_id}/consolidate",
        check=report.counting(lambda r: revision_problems(drafts, r, tables)), sample=sample)
    return revise(drafts, revision)
