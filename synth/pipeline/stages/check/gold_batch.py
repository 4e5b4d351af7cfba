"""Gold answers for a batch of fresh tasks, repaired in the batch's own conversation.

One call answers several tasks (they share the env's context and the rows they touch); each answer
is executed in the sandbox (stages/check/gold.py `execution_problems`), and the tasks whose answers fail
go back to the same conversation in one repair turn that lists each one's problems and what its
gold calls returned, asking again for those tasks only. A real model's first answers fail on a few
tasks of most batches (a probe the verifier pays for, a value it could not see); a repair turn per
batch costs one call where a conversation per task would cost one per failing task, each carrying
the whole prompt again. An answer cut off at the output cap is asked again in halves (a real-model
trial's verifiers grew past the cap over the check loop's rounds, and a batch of four repairs was cut
off four rounds running until its tasks were dropped).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from synth.artifacts import GoldBatch, GoldTaskAnswer, Task
from synth.errors import SynthError
from synth.folder.format import normalize_body
from synth.llm import ModelError
from synth.llm.budgets import halves
from synth.llm.errors import OutputTruncated
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.check.gold_scope import gold_messages
from synth.pipeline.stages.repair import clip, problem_list
from synth.runtime.sandbox import PoolBusy

if TYPE_CHECKING:
    from synth.pipeline.stages.check.gold import GoldSolver, Result

STAGE = "gold"


def _check(solver: "GoldSolver", asked: list[Task]):
    """The gateway's shape check for a batch answer covering exactly the tasks `asked`."""
    from synth.pipeline.stages.check.gold import answer_problems

    by_id = {t.task_id: t for t in asked}

    def check(batch: GoldBatch) -> list[str]:
        # An answer for a task not asked (a repair turn answered whole again) is dropped, not refused.
        batch.tasks = [a for a in batch.tasks if a.task_id in by_id]
        given = [a.task_id for a in batch.tasks]
        problems = [f"no answer for task {i}" for i in by_id if i not in given]
        for a in batch.tasks:
            if a.task_id in by_id:
                problems += [f"task {a.task_id}: {p}" for p in answer_problems(a, by_id[a.task_id], solver.draft)]
        return problems

    return check


async def solve_batch(solver: "GoldSolver", tasks: list[Task], feedback: dict[str, list[str]] | None = None,
                      rounds: int | None = None) -> list["Result | BaseException"]:
    """Answers for `tasks`, each executed; failing ones repaired together in the batch's conversation
    for up to `rounds` (default solver.rounds) turns. With `feedback` ({task_id: problems found later,
    e.g. by the check loop}), the conversation starts from the tasks' current answers and those
    problems, as if its first answer had just failed. A task keeps its last attempt either way."""
    from synth.pipeline.stages.check.gold import GoldOutcome, apply_answer, execution_problems, previous_answer

    env_id = solver.draft.env_id
    rounds = solver.rounds if rounds is None else rounds
    subject = f"{env_id}/{'+'.join(t.task_id for t in tasks)}"
    code = not (feedback and all(t.task_id in solver.verifier_only for t in tasks))
    convo = gold_messages(solver.context, solver.draft, solver.db_bytes, tasks, code=code)
    outcomes: dict[str, GoldOutcome] = {t.task_id: GoldOutcome(task_id=t.task_id) for t in tasks}
    latest: dict[str, tuple[Task, str]] = {}
    asking = list(tasks)
    if feedback:
        shown = GoldBatch(tasks=[GoldTaskAnswer(task_id=t.task_id, **json.loads(previous_answer(solver.draft, t)))
                                 for t in tasks])
        convo = convo + [{"role": "assistant", "content": shown.model_dump_json()},
                         *render_prompt("gold_batch_repair", tasks=[
                             {"task_id": t.task_id, "problems": problem_list(feedback.get(t.task_id, [])),
                              "results": ""} for t in tasks])]
    while True:
        try:
            batch = await solver.gateway.structured(GoldBatch, convo, stage=STAGE, subject=subject,
                                                    check=_check(solver, asking), sample=solver.sample, grow=False)
        except OutputTruncated:
            if not latest and not feedback and len(tasks) > 1:  # the first answer did not fit: each half apart
                return [r for half in halves(tasks) for r in await solver.solve_batch(half)]
            if not latest and len(tasks) > 1:  # the check loop's repair of grown verifiers did not fit
                return [r for half in halves(tasks) for r in await solve_batch(
                    solver, half, {t.task_id: feedback.get(t.task_id, []) for t in half}, rounds)]
            return _finish(tasks, latest, outcomes, "a repair answer was cut off at the output cap")
        except (ModelError, SynthError) as exc:
            if not latest:
                return [exc for _ in tasks]
            return _finish(tasks, latest, outcomes, str(exc))
        answers = {a.task_id: a for a in batch.tasks}
        runs = await asyncio.gather(*(
            asyncio.to_thread(execution_problems, solver.draft, solver.db_bytes, apply_answer(t, answers[t.task_id]),
                              normalize_body(answers[t.task_id].verifier_body), solver.pool, solver.gateway.settings)
            for t in asking), return_exceptions=True)
        failing: list[tuple[Task, list[str], str]] = []
        for task, run in zip(asking, runs):
            answer, outcome = answers[task.task_id], outcomes[task.task_id]
            latest[task.task_id] = (apply_answer(task, answer), normalize_body(answer.verifier_body))
            outcome.rounds += 1
            outcome.diagnosis = clip(answer.diagnosis, 500) if answer.diagnosis else outcome.diagnosis
            if isinstance(run, PoolBusy):  # the sandbox's state, not the answer's fault: never fed back
                outcome.error = str(run)
                continue
            if isinstance(run, BaseException):
                raise run
            problems, results = run
            outcome.problems, outcome.passed = problems, not problems
            if problems:
                failing.append((task, problems, results))
        if not failing or any(outcomes[t.task_id].repairs >= rounds for t, _, _ in failing):
            return _finish(tasks, latest, outcomes)
        for task, _, _ in failing:
            outcomes[task.task_id].repairs += 1
        shown = GoldBatch(tasks=[GoldTaskAnswer.model_validate(answers[t.task_id].model_dump(
            include=set(GoldTaskAnswer.model_fields))) for t in asking])
        convo = convo + [{"role": "assistant", "content": shown.model_dump_json()},
                         *render_prompt("gold_batch_repair", tasks=[
                             {"task_id": t.task_id, "problems": problem_list(p), "results": r}
                             for t, p, r in failing])]
        asking = [t for t, _, _ in failing]


def _finish(tasks: list[Task], latest: dict[str, tuple[Task, str]], outcomes: dict[str, Any],
            error: str | None = None) -> list[Any]:
    out: list[Any] = []
    for task in tasks:
        outcome = outcomes[task.task_id]
        if error and not outcome.passed:
            outcome.error = outcome.error or clip(error, 300)
        if task.task_id in latest:
            candidate, body = latest[task.task_id]
            out.append((candidate, body, outcome))
        else:
            out.append(SynthError(error or "no answer"))
    return out
