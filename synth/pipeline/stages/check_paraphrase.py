"""The check loop's paraphrase check: correct answers in other words must earn the full reward.

Model calls: stage "paraphrase", subject "<env_id>/<task_id>+<task_id>+...", one per batch of read
tasks sized to the stage's output budget. The model sees each question, its expected answer and
what the gold calls returned (so a reply may also explain a record it leaves out), and writes
about COUNT replies stating exactly the same facts in other forms: 12-hour times, "Last, First"
names, amounts with and without currency, dates in words, lists in another order. Each one is
graded on the gold solution's final state; every one must pass (the loop repairs the verifier
otherwise, after the checking agent confirms the reply is correct) and stays as a regression case.
"""

from __future__ import annotations

import asyncio
from typing import Any

from synth.artifacts import ParaphraseAnswer, Task
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.llm.budgets import asked_in_halves
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.check_attempts import Attempt, observation_text, play, task_batches
from synth.use.agent import AgentContext
from synth.use.replay import answer_text

STAGE = "paraphrase"
COUNT = 10
MIN_COUNT = 6
TOKENS_PER_TASK = 45 * COUNT
RESULTS_SHOWN = 4  # gold call results shown per question


class ParaphraseAgent:
    def __init__(self, draft: EnvDraft, env: Any, gateway: Gateway, volatile: list[str]):
        self.draft, self.env, self.gateway, self.volatile = draft, env, gateway, volatile
        self.context = AgentContext.of_env(env.path)

    def batches(self, tasks: list[Task]) -> list[list[Task]]:
        return task_batches(STAGE, tasks, TOKENS_PER_TASK, self.gateway.settings.max_tokens)

    async def check(self, tasks: list[Task]) -> list[Attempt]:
        """Every paraphrase of every task's expected answer, graded on the gold final state; a cut-off
        answer is asked again in halves."""
        return await asked_in_halves(self._check, tasks)

    async def _check(self, tasks: list[Task]) -> list[Attempt]:
        shown = []
        for task in tasks:
            gold = await asyncio.to_thread(play, self.env, Attempt(task=task, source="paraphrase"), self.volatile,
                                           gold_calls=True)
            shown.append({"task_id": task.task_id, "instruction": task.instruction,
                          "expected": answer_text(task.expected_answer),
                          "results": gold.steps()[:RESULTS_SHOWN]})
        messages = render_prompt(STAGE, title=self.context.title, today=self.context.today or "not given",
                                 tasks=shown, count=COUNT)
        ids = [t.task_id for t in tasks]
        answer = await self.gateway.structured(ParaphraseAnswer, messages, stage=STAGE,
                                               subject=f"{self.draft.env_id}/{'+'.join(ids)}",
                                               check=lambda a: self.problems(a, ids))
        by_id = {t.task_id: t for t in tasks}
        attempts = []
        for entry in answer.tasks:
            for text in dict.fromkeys(p.strip() for p in entry.paraphrases if p.strip()):
                attempt = Attempt(task=by_id[entry.task_id], source="paraphrase", answer=text)
                attempts.append(await asyncio.to_thread(play, self.env, attempt, self.volatile, gold_calls=True))
        return attempts

    @staticmethod
    def problems(answer: ParaphraseAnswer, ids: list[str]) -> list[str]:
        given = [t.task_id for t in answer.tasks]
        problems = [f"no paraphrases for {i}" for i in ids if i not in given]
        problems += [f"{i!r} was not asked for" for i in given if i not in ids]
        for entry in answer.tasks:
            distinct = {p.strip() for p in entry.paraphrases if p.strip()}
            if len(distinct) < MIN_COUNT:
                problems.append(f"{entry.task_id}: give about {COUNT} distinct replies, not {len(distinct)}")
        return problems
