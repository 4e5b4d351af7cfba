"""Stage `gold`: for each task, the gold actions (tool calls with arguments), the
expected answer for read tasks, and the body of its verifier
`(initial_db, final_db, answer) -> [check(name, passed, weight), ...]`.

Model calls: stage "gold". Tasks with no gold yet are asked for in batches sized
to the stage's output budget (TOKENS_PER_TASK each; 4 at the default cap), subject
"<env_id>/<task_id>+<task_id>+...": they
share the env's context, and the prompt shows only the tables and tools the
tasks touch (stages/check/gold_scope.py); a lone task, each task's repairs and every
later call for a task (the check loop asking again after tools changed or a
gate failed, showing the previous attempt and the problems found) use subject
"<env_id>/<task_id>", one conversation per task.

Validation, in two layers:
- inside the gateway (its repair turns): tools exist, arguments match their
  schemas, read tasks call only read-only tools and write tasks change state,
  every task has an expected answer (a write task's reports what was done),
  a read task lists its facts (each in its kind's form and stated by the expected
  answer) and a write task's free columns exist,
  the verifier body passes the sandbox's static check and matches the answer
  with the helpers, never with a bare substring test (stages/check/verifier_lint.py);
- by execution in the sandbox (never in this process), on a temporary env
  folder holding just this task: the gold replay has no failed call and its
  verifier passes with score 1.0; the initial state with an empty answer fails;
  gold minus its last state-changing call fails; then every exploit probe
  (synth_validators.probes) scores below settings.probe_threshold and the
  task's recorded verifier cases (paraphrases, solver runs, exploits) keep
  their verdicts. Problems go back to the model for up to
  settings.build_repair_rounds repairs.

A task whose answer still fails keeps its last attempt (so the check loop can
repair it once tools are fixed) and is reported as failing with its reasons.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from synth.artifacts import GoldAnswer, Task, ToolCall, VerifierCase
from synth.config import Settings
from synth.errors import SynthError
from synth.folder.database import build_database
from synth.folder.format import EnvDraft, normalize_body, render_verifiers_py, verifier_name, write_env
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.calls import call_problems
from synth.pipeline.stages.envcontext import EnvContext
from synth.pipeline.stages.check.gold_scope import gold_messages
from synth.pipeline.stages.repair import clip, problem_list
from synth.pipeline.stages.check.verifier_lint import loose_change_checks, substring_checks
from synth.runtime.codecheck import check_source
from synth.runtime.sandbox import PoolBusy
from synth.use.replay import canonical, gold_problems, preview
from synth.use.reward import helpers
from synth.use.taskfacts import fact_problems, free_column_problems

STAGE = "gold"
TOKENS_PER_TASK = 900  # output tokens of one task's answer (actions, answer, verifier)
RESULT_CHARS = 3000  # one gold call's result in a repair prompt, cut by whole items


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
    problems += [p for _, p in call_problems(answer.actions, tools, "action")]
    for i, action in enumerate(answer.actions, 1):
        tool = tools.get(action.tool)
        if task.kind == "read" and tool is not None and not tool.read_only:
            problems.append(f"action {i}: {tool.name} changes state, but this is a read task")
    if task.kind == "write" and answer.actions and not any(
            a.tool in tools and not tools[a.tool].read_only for a in answer.actions):
        problems.append("this is a write task: the actions must include the state-changing call(s)")
    if task.kind == "read" and not (answer.expected_answer or "").strip():
        problems.append("this is a read task: give the expected_answer")
    if task.kind == "write" and not (answer.expected_answer or "").strip():
        problems.append("this is a write task: give the expected_answer, a one-line report of what was done "
                        "(the verifier checks that the agent's answer reports the work)")
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
        problems += [f"verifier_body: {p}" for p in substring_checks(body) + loose_change_checks(body)]
    if task.kind == "read":  # what the state reward checks (synth/use/taskfacts.py)
        problems += fact_problems(answer.facts, answer.expected_answer, helpers())
    else:
        problems += free_column_problems(answer.free_columns, draft.schema_sql)
    return problems


def apply_answer(task: Task, answer: GoldAnswer) -> Task:
    return task.model_copy(update={
        "gold": [ToolCall(tool=a.tool, arguments=a.arguments) for a in answer.actions],
        "expected_answer": answer.expected_answer,
        "verifier": verifier_name(task),
        "facts": answer.facts if task.kind == "read" else None,
        "free_columns": answer.free_columns if task.kind == "write" else None,
    })


def execution_problems(draft: EnvDraft, db_bytes: bytes, task: Task, body: str, pool: Any,
                       settings: Settings | None = None) -> tuple[list[str], str]:
    """Run the candidate in the sandbox on a temporary env folder holding only this task: the gold
    replay (gold_problems), then the exploit probes and the task's recorded verifier cases. Returns
    the problems and, when there are some, what each gold call returned (for the repair turn)."""
    from synth.runtime import Env

    trial = draft.model_copy(update={"tasks": [task], "verifier_bodies": {task.task_id: body}, "tests": [],
                                     "status": "built", "report": {}, "verifier_tests": []})
    with tempfile.TemporaryDirectory(prefix="synth-gold-") as tmp:
        folder = write_env(trial, Path(tmp) / draft.env_id, db_bytes=db_bytes)
        try:
            env = Env.load(folder, pool=pool)
        except PoolBusy:
            raise  # the sandbox was busy: no fault of the answer, so never fed back to the model as one
        except SynthError as exc:
            return [f"the verifier could not be loaded: {exc}"], ""
        try:
            problems = gold_problems(env, task) or attack_problems(env, draft, task, settings or Settings())
            return problems, call_results(env, task) if problems else ""
        except PoolBusy:
            raise
        except SynthError as exc:
            return [f"replaying the task failed: {exc}"], ""
        finally:
            env.close()


def call_results(env: Any, task: Task) -> str:
    """What each gold call returned on a fresh episode, every result whole or cut by items (saying
    how many were left out): the values the expected answer and the verifier must use."""
    lines = []
    with env.episode(task.task_id) as episode:
        for i, call in enumerate(task.gold, 1):
            seen = episode.call(call.tool, dict(call.arguments))
            shown = canonical(preview(seen.get("result"), RESULT_CHARS)) if seen.get("ok") else \
                f"refused: {seen.get('error')}"
            lines.append(f"{i}. {call.tool}({canonical(call.arguments)}) -> {shown}")
    return "\n".join(lines)


def attack_problems(env: Any, draft: EnvDraft, task: Task, settings: Settings) -> list[str]:
    """What the probes and the task's verifier cases (verifier_tests.jsonl) find in a sound gold solution."""
    from synth_validators.probe_kinds import new_context
    from synth_validators.probes import probe_task
    from synth_validators.reward_cases import case_problem

    ctx = new_context(env, volatile=draft.volatile_columns, tasks=draft.tasks, tests=draft.tool_tests())
    _, problems = probe_task(ctx, task, settings.probe_threshold, settings.probe_margin)
    for raw in draft.verifier_tests:
        case = VerifierCase.model_validate(raw)
        if case.task_id == task.task_id:
            problem = case_problem(env, task, case, settings.probe_threshold)
            if problem:
                problems.append(problem)
    return problems


def previous_answer(draft: EnvDraft, task: Task) -> str | None:
    """A task's current gold answer as the model would have written it (JSON), or None."""
    if not (task.gold and task.task_id in draft.verifier_bodies):
        return None
    return GoldAnswer(actions=[{"tool": c.tool, "arguments": c.arguments} for c in task.gold],
                      expected_answer=None if task.expected_answer is None else str(task.expected_answer),
                      verifier_body=draft.verifier_bodies[task.task_id], facts=task.facts,
                      free_columns=task.free_columns).model_dump_json(indent=1)


Result = tuple[Task, "str | None", GoldOutcome]


class GoldSolver:
    """Gold answers for one env's tasks: batches of fresh tasks per call, executed and repaired in the
    batch's conversation; a task asked again later (the check loop's findings) in its own."""

    def __init__(self, draft: EnvDraft, db_bytes: bytes, gateway: Gateway, rounds: int, pool: Any, sample: int,
                 verifier_only: set[str] | frozenset[str] = frozenset()):
        self.draft, self.db_bytes, self.gateway, self.rounds = draft, db_bytes, gateway, rounds
        self.pool, self.sample = pool, sample
        self.context = EnvContext.of(draft)
        self.verifier_only = frozenset(verifier_only)  # tasks sent back for their verifier alone: no tool code shown

    def batches(self, tasks: list[Task]) -> list[list[Task]]:
        limit = planned_tokens(STAGE, self.gateway.settings.max_tokens)
        # Fresh tasks share one call (and the env's context) as far as the output budget allows.
        groups = pack([t.task_id for t in tasks], {t.task_id: TOKENS_PER_TASK for t in tasks}, limit)
        by_id = {t.task_id: t for t in tasks}
        return [[by_id[i] for i in g] for g in groups]

    async def solve_batch(self, tasks: list[Task]) -> list[Result | BaseException]:
        """Fresh tasks in one call, failing ones repaired together in its conversation (stages/check/gold_batch.py)."""
        if len(tasks) == 1:
            return list(await asyncio.gather(self.solve(tasks[0], []), return_exceptions=True))
        from synth.pipeline.stages.check.gold_batch import solve_batch

        return await solve_batch(self, tasks)

    async def solve(self, task: Task, feedback: list[str], first: GoldAnswer | None = None,
                    rounds: int | None = None) -> Result:
        """One task's answer, executed and repaired in its own conversation (`first`: its answer
        from a batch call, executed before any new call)."""
        outcome = GoldOutcome(task_id=task.task_id)
        previous = previous_answer(self.draft, task) if feedback else None
        convo = gold_messages(self.context, self.draft, self.db_bytes, [task], previous=previous,
                              feedback=problem_list(feedback), code=not (feedback and task.task_id in self.verifier_only))
        answer = first
        while True:
            if answer is None:
                answer = await self.gateway.structured(GoldAnswer, convo, stage=STAGE, subject=subject(self.draft, task),
                                                       check=lambda a: answer_problems(a, task, self.draft),
                                                       sample=self.sample)
            outcome.rounds += 1
            outcome.diagnosis = clip(answer.diagnosis, 500) if answer.diagnosis else outcome.diagnosis
            candidate, body = apply_answer(task, answer), normalize_body(answer.verifier_body)
            problems, results = await asyncio.to_thread(execution_problems, self.draft, self.db_bytes, candidate,
                                                        body, self.pool, self.gateway.settings)
            outcome.problems = problems
            if not problems:
                outcome.passed = True
                return candidate, body, outcome
            if outcome.repairs >= (self.rounds if rounds is None else rounds):
                return candidate, body, outcome
            outcome.repairs += 1
            shown = GoldAnswer.model_validate(answer.model_dump(include=set(GoldAnswer.model_fields)))
            convo = convo + [{"role": "assistant", "content": shown.model_dump_json()},
                             *render_prompt("gold_repair", problems=problem_list(problems), results=results)]
            answer = None


async def generate_gold(draft: EnvDraft, gateway: Gateway, settings: Settings, *, task_ids: list[str] | None = None,
                        feedback: dict[str, list[str]] | None = None, pool: Any = None,
                        db_bytes: bytes | None = None, sample: int = 0,
                        verifier_only: set[str] | frozenset[str] = frozenset()) -> tuple[EnvDraft, GoldReport]:
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
    solver = GoldSolver(draft, db_bytes, gateway, settings.build_repair_rounds, pool, sample, verifier_only)
    fresh = [t for t in wanted if not feedback.get(t.task_id)]
    again = [t for t in wanted if feedback.get(t.task_id)]
    # Tasks sent back with findings (the check loop's) are repaired in batches too, starting from their
    # current answers; one repair turn each time, since the loop checks them again and asks again.
    from synth.pipeline.stages.check.gold_batch import solve_batch

    batches = solver.batches(fresh)
    grouped = solver.batches([t for t in again if previous_answer(draft, t) is not None])
    repairs = [b for b in grouped if len(b) > 1]
    alone = [t for t in again if not any(t in b for b in repairs)]
    outcomes = await asyncio.gather(
        *(solver.solve_batch(b) for b in batches),
        *(solve_batch(solver, b, {t.task_id: [clip(p) for p in feedback[t.task_id]] for t in b}, rounds=1)
          for b in repairs),
        *(solver.solve(t, [clip(p) for p in feedback[t.task_id]], rounds=1) for t in alone),
        return_exceptions=True)
    by_task: dict[str, Any] = {}
    for group, outcome in zip([*batches, *repairs, *([t] for t in alone)], outcomes):
        results_of = outcome if isinstance(outcome, list) else [outcome] * len(group)
        for task, result in zip(group, results_of):
            by_task[task.task_id] = result
    results = [by_task[t.task_id] for t in wanted]
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
