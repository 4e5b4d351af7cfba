"""Stage `gold`: for each task, the gold actions (tool calls with arguments), the
expected answer for read tasks, and the body of its verifier
`(initial_db, final_db, answer) -> [check(name, passed, weight), ...]`.

Model calls: stage "gold", subject "<env_id>/<task_id>". The first answer and
its repairs are one conversation; a later call for the same task (the check
loop asking again after tools changed or a gate failed) starts a new one that
shows the previous attempt and the problems found.

Validation, in two layers:
- inside the gateway (its repair turns): tools exist, arguments match their
  schemas, read tasks call only read-only tools and write tasks change state,
  the verifier body passes the sandbox's static check;
- by execution in the sandbox (never in this process), on a temporary env
  folder holding just this task: the gold replay has no failed call and its
  verifier passes with score 1.0; the initial state with an empty answer fails;
  gold minus its last state-changing call fails. Problems go back to the model
  for up to settings.build_repair_rounds repairs.

A task whose answer still fails keeps its last attempt (so the check loop can
repair it once tools are fixed) and is reported as failing with its reasons.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from synth.artifacts import GoldAnswer, Task, ToolCall
from synth.config import Settings
from synth.database import build_database
from synth.envfolder import EnvDraft, normalize_body, render_verifiers_py, verifier_name, write_env
from synth.errors import SynthError
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.prompts import render_prompt
from synth.replay import gold_problems
from synth.runtime.codecheck import check_source
from synth.runtime.schema_check import ArgumentError, ArgumentValidator
from synth.stages.envcontext import (EnvContext, data_dump, foreign_neighbours, imports_line, tables_for_text,
                                    tables_in_code, tools_source)
from synth.stages.repair import clip, problem_list

STAGE = "gold"


class GoldOutcome(BaseModel):
    task_id: str
    passed: bool = False
    rounds: int = 0
    repairs: int = 0
    problems: list[str] = Field(default_factory=list)  # of the last attempt
    error: str | None = None  # the model call itself failed
    diagnosis: str = ""  # what the model said was wrong with the earlier attempt


class GoldReport(BaseModel):
    passed: bool = True
    tasks: dict[str, GoldOutcome] = Field(default_factory=dict)


def subject(draft: EnvDraft, task: Task) -> str:
    return f"{draft.env_id}/{task.task_id}"


def answer_problems(answer: GoldAnswer, task: Task, draft: EnvDraft) -> list[str]:
    """Shape problems the gateway feeds back before anything is executed."""
    tools = {t.name: t for t in draft.tools}
    problems = []
    if not answer.actions:
        problems.append("actions is empty: give the tool calls that solve the task")
    for i, action in enumerate(answer.actions, 1):
        tool = tools.get(action.tool)
        if tool is None:
            problems.append(f"action {i}: unknown tool {action.tool!r}; use a name from the tool list")
            continue
        try:
            ArgumentValidator(tool.name, tool.parameters)(action.arguments)
        except ArgumentError as exc:
            problems.append(f"action {i}: {exc}")
        if task.kind == "read" and not tool.read_only:
            problems.append(f"action {i}: {tool.name} changes state, but this is a read task")
    if task.kind == "write" and answer.actions and not any(
            a.tool in tools and not tools[a.tool].read_only for a in answer.actions):
        problems.append("this is a write task: the actions must include the state-changing call(s)")
    if task.kind == "read" and not (answer.expected_answer or "").strip():
        problems.append("this is a read task: give the expected_answer")
    body = normalize_body(answer.verifier_body)
    if not body:
        problems.append("verifier_body is empty")
    else:
        try:
            source = render_verifiers_py(draft.env_id, draft.title, [task], {task.task_id: body})
        except SynthError as exc:
            problems.append(f"verifier_body: {exc}")
        else:
            problems += [f"verifier_body: {p}" for p in check_source(source, "verifiers.py")]
    return problems


def apply_answer(task: Task, answer: GoldAnswer) -> Task:
    return task.model_copy(update={
        "gold": [ToolCall(tool=a.tool, arguments=a.arguments) for a in answer.actions],
        "expected_answer": answer.expected_answer,
        "verifier": verifier_name(task),
    })


def execution_problems(draft: EnvDraft, db_bytes: bytes, task: Task, body: str, pool: Any) -> list[str]:
    """Run the candidate in the sandbox on a temporary env folder holding only this task."""
    from synth.runtime import Env

    trial = draft.model_copy(update={"tasks": [task], "verifier_bodies": {task.task_id: body}, "tests": [],
                                     "status": "built", "report": {}})
    with tempfile.TemporaryDirectory(prefix="synth-gold-") as tmp:
        folder = write_env(trial, Path(tmp) / draft.env_id, db_bytes=db_bytes)
        try:
            env = Env.load(folder, pool=pool)
        except SynthError as exc:
            return [f"the verifier could not be loaded: {exc}"]
        try:
            return gold_problems(env, task)
        except SynthError as exc:
            return [f"replaying the task failed: {exc}"]
        finally:
            env.close()


def task_scope(draft: EnvDraft, db_bytes: bytes, task: Task) -> tuple[list[str], list[str]]:
    """(tables whose rows the gold prompt shows, tools whose code it shows) for one task: the tables
    the instruction names or quotes a value of, with their foreign-key neighbours, and the tools
    whose SQL touches the tables it names (its earlier gold's tools too). Every other table and
    tool is still listed, by name, columns and signature, in the shared context."""
    names = [t.name for t in draft.tools]
    direct = tables_for_text(db_bytes, task.instruction)
    tables = sorted(foreign_neighbours(db_bytes, direct)) if direct else []
    touched = set(direct) or set(tables)
    tools = [n for n in names if touched and tables_in_code(draft.tool_bodies.get(n, ""), sorted(touched))]
    tools += [c.tool for c in task.gold if c.tool in names and c.tool not in tools]
    if not tables:  # nothing recognisable in the instruction: show everything
        return [], names
    return tables, [n for n in names if n in set(tools)]


async def _solve_task(draft: EnvDraft, db_bytes: bytes, task: Task, context: EnvContext, gateway: Gateway,
                      rounds: int, feedback: list[str], pool: Any,
                      sample: int) -> tuple[Task, str | None, GoldOutcome]:
    outcome = GoldOutcome(task_id=task.task_id)
    previous = None
    if task.gold and task.task_id in draft.verifier_bodies:
        previous = GoldAnswer(actions=[{"tool": c.tool, "arguments": c.arguments} for c in task.gold],
                              expected_answer=None if task.expected_answer is None else str(task.expected_answer),
                              verifier_body=draft.verifier_bodies[task.task_id]).model_dump_json(indent=1)
    tables, tools = task_scope(draft, db_bytes, task)
    convo = context.messages(STAGE, task=task, previous=previous if feedback else None,
                             feedback=problem_list(feedback), imports=imports_line(),
                             data_dump=data_dump(db_bytes, tables or None),
                             tools_src=tools_source(draft, tools), all_tools_shown=len(tools) == len(draft.tools))
    best_task, best_body = task, draft.verifier_bodies.get(task.task_id)
    while True:
        answer = await gateway.structured(GoldAnswer, convo, stage=STAGE, subject=subject(draft, task),
                                          check=lambda a: answer_problems(a, task, draft), sample=sample)
        outcome.rounds += 1
        outcome.diagnosis = clip(answer.diagnosis, 500) if answer.diagnosis else outcome.diagnosis
        candidate, body = apply_answer(task, answer), normalize_body(answer.verifier_body)
        problems = await asyncio.to_thread(execution_problems, draft, db_bytes, candidate, body, pool)
        best_task, best_body, outcome.problems = candidate, body, problems
        if not problems:
            outcome.passed = True
            return best_task, best_body, outcome
        if outcome.repairs >= rounds:
            return best_task, best_body, outcome
        outcome.repairs += 1
        convo = convo + [{"role": "assistant", "content": answer.model_dump_json()},
                         *render_prompt("gold_repair", problems=problem_list(problems))]


async def generate_gold(draft: EnvDraft, gateway: Gateway, settings: Settings, *, task_ids: list[str] | None = None,
                        feedback: dict[str, list[str]] | None = None, pool: Any = None,
                        db_bytes: bytes | None = None, sample: int = 0) -> tuple[EnvDraft, GoldReport]:
    """Gold actions, expected answers and verifiers for `task_ids` (default: every task
    lacking gold actions or a verifier). Returns the updated draft and a report; a task
    that fails keeps its last attempt. BudgetExceeded propagates after the calls in
    flight have finished; other model errors are recorded on the task. `sample` gives a
    later attempt with the same prompt its own cache key."""
    feedback = feedback or {}
    if task_ids is None:
        task_ids = [t.task_id for t in draft.tasks if not t.gold or t.task_id not in draft.verifier_bodies]
    wanted = [t for t in draft.tasks if t.task_id in set(task_ids)]
    report = GoldReport()
    if not wanted:
        return draft, report
    db_bytes = db_bytes if db_bytes is not None else build_database(draft.schema_sql, draft.data_sql)
    context = EnvContext.of(draft)
    results = await asyncio.gather(
        *(_solve_task(draft, db_bytes, t, context, gateway, settings.build_repair_rounds,
                      [clip(p) for p in feedback.get(t.task_id, [])], pool, sample) for t in wanted),
        return_exceptions=True,
    )
    tasks = {t.task_id: t for t in draft.tasks}
    bodies = dict(draft.verifier_bodies)
    budget: BudgetExceeded | None = None
    for task, result in zip(wanted, results):
        if isinstance(result, BudgetExceeded):
            budget = result
            report.tasks[task.task_id] = GoldOutcome(task_id=task.task_id, error=str(result))
        elif isinstance(result, (ModelError, SynthError)):  # this task failed; the others stand
            report.tasks[task.task_id] = GoldOutcome(task_id=task.task_id, error=str(result))
        elif isinstance(result, BaseException):
            raise result
        else:
            new_task, body, outcome = result
            tasks[task.task_id] = new_task
            if body:
                bodies[task.task_id] = body
            report.tasks[task.task_id] = outcome
    report.passed = all(o.passed for o in report.tasks.values())
    updated = draft.model_copy(update={"tasks": [tasks[t.task_id] for t in draft.tasks], "verifier_bodies": bodies})
    if budget is not None:
        raise GoldBudgetStop(updated, report, budget)
    return updated, report


class GoldBudgetStop(BudgetExceeded):
    """The budget ran out mid-stage; carries the work finished before it."""

    def __init__(self, draft: EnvDraft, report: GoldReport, cause: BudgetExceeded):
        super().__init__(str(cause))
        self.draft, self.report = draft, report
