"""The `templates` stage: the model writes task templates, and repairs one that its instances fail.

Model calls: stage "templates". Templates are asked for by kind (read, write), as many per call as
the stage's output budget holds (TOKENS_PER_TEMPLATE each), subject "<env_id>/read" or
"<env_id>/write" ("-2", "-3", ... for further calls of a kind). Each prompt shows the initial data,
for write templates the code of the state-changing tools, and the requests the env already has.
A repair is one call per template, subject "<env_id>/<template_id>", showing the template, the
problems its instances had (each naming its row) and what the calls returned on one failing row.

Checked before anything runs in the sandbox (fed back through the gateway's repair turns): names,
kinds and tools; the query is one reading SELECT (rules.run_query: no writes, no ATTACH, bounded
run time) with at least MIN_ROWS rows; every slot is a column of the query; the first usable row
fills the calls with arguments their tools accept, and the facts (read) are stated by the
expected answer; the verifier reads `params` and passes the static checks every verifier body passes.
"""

from __future__ import annotations

import ast
import asyncio
import math
import re

from synth.artifacts import TaskTemplate, TemplateBatch, TemplateDraft, TemplateRepair, ToolCall
from synth.artifacts.templates import HARD_CALLS
from synth.errors import SynthError
from synth.folder.database import open_bytes
from synth.folder.format import EnvDraft, normalize_body, render_verifiers_py
from synth.folder.rules import InvariantError, run_query
from synth.llm import Gateway
from synth.llm.budgets import planned_tokens
from synth.llm.errors import OutputTruncated
from synth.pipeline.stages.calls import call_problems
from synth.pipeline.stages.envcontext import EnvContext, data_dump, imports_line, tool_source
from synth.pipeline.stages.repair import problem_list
from synth.pipeline.stages.check.verifier_lint import loose_change_checks, substring_checks
from synth.pipeline.tasks.instances import SlotError, instance, slot_names, template_slots, usable
from synth.runtime.codecheck import check_source
from synth.use.reward import helpers
from synth.use.taskfacts import fact_problems, free_column_problems

STAGE = "templates"
TOKENS_PER_TEMPLATE = 900  # output tokens of one template (query, calls, answer, verifier)
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,39}$")
MIN_ROWS = 3  # a query with fewer valid rows is not worth a template
ROWS_WANTED = 20
DATA_ROWS = 12  # rows per table in a templates prompt
TOOLS_CHARS = 14_000  # state-changing tools' code in a prompt, cut by whole tools
EXISTING_SHOWN = 40  # requests already in the env, listed so templates differ from them


def to_template(answer: TemplateDraft, split: str = "train") -> TaskTemplate:
    return TaskTemplate(template_id=answer.name, kind=answer.kind, difficulty=answer.difficulty, split=split,
                        instruction=answer.instruction.strip(), query=answer.query.strip(),
                        actions=[ToolCall(tool=a.tool, arguments=a.arguments) for a in answer.actions],
                        expected_answer=answer.expected_answer.strip(), facts=answer.facts,
                        free_columns=answer.free_columns, verifier_body=normalize_body(answer.verifier_body))


def _reads_params(body: str) -> bool:
    try:
        tree = ast.parse("def _t(initial_db, final_db, answer, params):\n" +
                         "\n".join("    " + line for line in body.splitlines()))
    except SyntaxError:
        return True  # the code check reports it
    return any(isinstance(n, ast.Name) and n.id == "params" for n in ast.walk(tree))


def template_problems(answer: TemplateDraft, draft: EnvDraft, db_bytes: bytes, kind: str | None = None) -> list[str]:
    """What is wrong with one template before anything of it runs in the sandbox."""
    tools = {t.name: t for t in draft.tools}
    problems = []
    if not NAME_RE.match(answer.name):
        problems.append(f"name {answer.name!r} must be snake_case, 2-40 characters, starting with a letter")
    if kind is not None and answer.kind != kind:
        problems.append(f"this is a {kind} template (asked for {kind} templates), not {answer.kind}")
    if not answer.actions:
        problems.append("actions is empty: give the tool calls that solve any instance")
    unknown = [a.tool for a in answer.actions if a.tool not in tools]
    problems += [f"action uses unknown tool {t!r}; use a name from the tool list" for t in unknown]
    if answer.kind == "read":
        problems += [f"{a.tool} changes state, but this is a read template" for a in answer.actions
                     if a.tool in tools and not tools[a.tool].read_only]
    elif answer.actions and not any(a.tool in tools and not tools[a.tool].read_only for a in answer.actions):
        problems.append("this is a write template: the actions must include the state-changing call(s)")
    if answer.difficulty == "hard" and len(answer.actions) < HARD_CALLS:
        problems.append(f"a hard template chains several operations: at least {HARD_CALLS} calls (or call it "
                        "medium)")
    if not answer.expected_answer.strip():
        problems.append("expected_answer is empty")
    template = to_template(answer)
    problems += _body_problems(template, draft)
    try:
        slots = template_slots(template)
        if not slot_names(template.instruction):
            problems.append("the instruction has no {slot}: every instance would ask the same thing")
    except SlotError as exc:
        return problems + [f"slots: {exc}"]
    conn = open_bytes(db_bytes, readonly=True)
    try:
        columns, rows = run_query(conn, template.query, 5000)
    except InvariantError as exc:
        return problems + [f"query: {exc}"]
    finally:
        conn.close()
    missing = sorted(slots - set(columns))
    if missing:
        return problems + [f"slots {', '.join('{' + m + '}' for m in missing)} are not columns of the query "
                           f"(it returns {', '.join(columns) or 'no columns'})"]
    good = [dict(zip(columns, r)) for r in rows]
    good = [r for r in good if usable(r, slots) is None]
    if len(good) < MIN_ROWS:
        return problems + [f"query: it returns {len(good)} usable row(s) (a NULL in a slot's column makes a row "
                           f"unusable); a template needs at least {MIN_ROWS}, and should have {ROWS_WANTED} or more"]
    try:
        first = instance(template, good[0], 1, tools)
    except SlotError as exc:
        return problems + [f"slots: {exc}"]
    problems += [f"for the query's first row, {p}" for _, p in call_problems(first.gold, tools, "action")]
    if answer.kind == "read":
        problems += [f"facts: {p}" for p in fact_problems(first.facts, first.expected_answer, helpers())]
    else:
        problems += free_column_problems(answer.free_columns, draft.schema_sql)
    return problems


def _body_problems(template: TaskTemplate, draft: EnvDraft) -> list[str]:
    body = template.verifier_body
    if not body:
        return ["verifier_body is empty"]
    try:
        source = render_verifiers_py(draft.env_id, draft.title, [], {}, [template])
    except SynthError as exc:
        return [f"verifier_body: {exc}"]
    problems = [f"verifier_body: {p}" for p in check_source(source, "verifiers.py")]
    problems += [f"verifier_body: {p}" for p in substring_checks(body) + loose_change_checks(body)]
    if not _reads_params(body):
        problems.append("verifier_body never reads params: it must check each instance's own values "
                        "(params[\"column\"])")
    return problems


def mix(count: int) -> str:
    """The spread of difficulties a call asks for."""
    hard = max(1, count // 3) if count >= 3 else 0
    easy = max(1, (count - hard) // 2)
    medium = count - hard - easy
    return ", ".join(f"{n} {d}" for n, d in ((easy, "easy"), (medium, "medium"), (hard, "hard")) if n)


def plan_calls(env_id: str, count: int, max_tokens: int) -> list[tuple[str, int, str]]:
    """(kind, how many, subject) per call: half read and half write, as many per call as fit the budget."""
    per_call = max(1, planned_tokens(STAGE, max_tokens) // TOKENS_PER_TEMPLATE)
    calls = []
    for kind, wanted in (("read", count - count // 2), ("write", count // 2)):
        for n in range(math.ceil(wanted / per_call)):
            size = min(per_call, wanted - n * per_call)
            calls.append((kind, size, f"{env_id}/{kind}" + (f"-{n + 1}" if n else "")))
    return calls


class TemplateAsker:
    """The `templates` stage for one env."""

    def __init__(self, draft: EnvDraft, db_bytes: bytes, gateway: Gateway):
        self.draft, self.db_bytes, self.gateway = draft, db_bytes, gateway
        self.context = EnvContext.of(draft)

    def plan(self, count: int) -> list[tuple[str, int, str]]:
        return plan_calls(self.draft.env_id, count, self.gateway.settings.max_tokens)

    def tools_src(self) -> str:
        """The state-changing tools' code, whole tools only, saying how many were left out."""
        shown, used = [], 0
        writes = [t.name for t in self.draft.tools if not t.read_only]
        for name in writes:
            text = tool_source(self.draft, name).rstrip()
            if used + len(text) > TOOLS_CHARS and shown:
                break
            shown.append(text)
            used += len(text)
        left = len(writes) - len(shown)
        return "\n\n".join(shown) + (f"\n\n# ... {left} more state-changing tool(s) not shown" if left else "")

    def existing(self, taken: list[TaskTemplate]) -> list[str]:
        lines = [t.instruction for t in self.draft.tasks if t.template_id is None]
        lines += [f"{t.instruction} (template {t.template_id})" for t in taken]
        return lines[:EXISTING_SHOWN]

    def messages(self, kind: str, count: int, taken: list[TaskTemplate]) -> list[dict[str, str]]:
        return self.context.messages(
            STAGE, kind=kind, count=count, mix=mix(count), rows=ROWS_WANTED, hard_calls=HARD_CALLS,
            existing=self.existing(taken),
            data_dump=data_dump(self.db_bytes, None, rows=DATA_ROWS), imports=imports_line(),
            tools_src=self.tools_src() if kind == "write" else "")

    async def ask(self, kind: str, count: int, subject: str, taken: list[TaskTemplate]) -> list[TaskTemplate]:
        names = {t.template_id for t in taken}

        def check(batch: TemplateBatch) -> list[str]:
            problems = []
            if len(batch.templates) < count:
                problems.append(f"give {count} templates, not {len(batch.templates)}")
            seen: set[str] = set()
            for t in batch.templates:
                if t.name in names or t.name in seen:
                    problems.append(f"template name {t.name!r} is taken; choose another")
                seen.add(t.name)
                problems += [f"template {t.name}: {p}" for p in template_problems(t, self.draft, self.db_bytes, kind)]
            if count >= 3 and not any(t.difficulty == "hard" for t in batch.templates):
                problems.append("include at least one hard template (several chained operations)")
            return problems

        try:
            batch = await self.gateway.structured(TemplateBatch, self.messages(kind, count, taken), stage=STAGE,
                                                  subject=subject, check=check, grow=False)
        except OutputTruncated:
            if count < 2:
                raise
            first = await self.ask(kind, count // 2, subject + "a", taken)
            return first + await self.ask(kind, count - count // 2, subject + "b", taken + first)
        return [to_template(t) for t in batch.templates]

    async def ask_all(self, count: int, taken: list[TaskTemplate]) -> tuple[list[TaskTemplate], list[str]]:
        """`count` new templates (fewer when a call failed: its error is returned)."""
        plan = self.plan(count)
        results = await asyncio.gather(*(self.ask(kind, n, subject, taken) for kind, n, subject in plan),
                                       return_exceptions=True)
        out, errors = [], []
        for (_, _, subject), result in zip(plan, results):
            if isinstance(result, SynthError):
                errors.append(f"{subject}: {result}")
            elif isinstance(result, BaseException):
                raise result
            else:
                out += [t for t in result if t.template_id not in {x.template_id for x in out}]
        return out, errors

    async def repair(self, template: TaskTemplate, problems: list[str], results: str,
                     results_of: str) -> tuple[TaskTemplate, str]:
        """One repair turn: the template with the concrete problems its instances had; returns the
        corrected template and the model's diagnosis."""
        shown = TemplateDraft(name=template.template_id, kind=template.kind, difficulty=template.difficulty,
                              instruction=template.instruction, query=template.query,
                              actions=[{"tool": a.tool, "arguments": a.arguments} for a in template.actions],
                              expected_answer=template.expected_answer, facts=template.facts,
                              free_columns=template.free_columns, verifier_body=template.verifier_body)
        messages = self.context.messages(
            "templates_repair", template_name=template.template_id, kind=template.kind,
            template=shown.model_dump_json(indent=1),
            problems=problem_list(problems), results=results, results_of=results_of,
            data_dump=data_dump(self.db_bytes, None, rows=DATA_ROWS),
            tools_src=self.tools_src() if template.kind == "write" else "")

        def check(answer: TemplateRepair) -> list[str]:
            problems = [] if answer.name == template.template_id else [f"keep the name {template.template_id!r}"]
            return problems + template_problems(answer, self.draft, self.db_bytes, template.kind)

        answer = await self.gateway.structured(TemplateRepair, messages, stage=STAGE,
                                               subject=f"{self.draft.env_id}/{template.template_id}", check=check)
        return to_template(answer, template.split), answer.diagnosis
