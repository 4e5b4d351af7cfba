"""The check loop's paraphrase check: correct answers in other words must earn the full reward.

Model calls: stage "paraphrase", subject "<env_id>/<task_id>+<task_id>+...", one per batch of read
tasks sized to the stage's output budget. The model sees each question, its expected answer and
what the gold calls returned (so a reply may also explain a record it leaves out), and writes
about COUNT replies stating exactly the same facts in other forms: 12-hour times, "Last, First"
names, amounts with and without currency, dates in words, lists in another order, and concise
replies that give only the task's facts (Task.facts) and leave the expected answer's context out
(a batch without one for a task that has facts goes back to the model). Each one is
graded on the gold solution's final state; every one must pass (the loop repairs the verifier
otherwise, after the checking agent confirms the reply is correct) and stays as a regression case.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from synth.artifacts import ParaphraseAnswer, Task
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.llm.budgets import asked_in_halves
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.check.attempts import Attempt, play, task_batches
from synth.use.agent import AgentContext
from synth.use.replay import answer_text
from synth.use.reward import helpers

STAGE = "paraphrase"
COUNT = 10
MIN_COUNT = 6
TOKENS_PER_TASK = 45 * COUNT
RESULTS_SHOWN = 4  # gold call results shown per question
CONCISE_EXTRA_WORDS = 6  # a concise reply has at most the facts' words plus this many


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
                          "facts": [f.value for f in task.facts or []],
                          "results": gold.steps()[:RESULTS_SHOWN]})
        messages = render_prompt(STAGE, title=self.context.title, today=self.context.today or "not given",
                                 tasks=shown, count=COUNT)
        ids = [t.task_id for t in tasks]
        answer = await self.gateway.structured(ParaphraseAnswer, messages, stage=STAGE,
                                               subject=f"{self.draft.env_id}/{'+'.join(ids)}",
                                               check=lambda a: self.problems(a, ids, tasks))
        by_id = {t.task_id: t for t in tasks}
        attempts = []
        for entry in answer.tasks:
            for text in dict.fromkeys(p.strip() for p in entry.paraphrases if p.strip()):
                attempt = Attempt(task=by_id[entry.task_id], source="paraphrase", answer=text)
                attempts.append(await asyncio.to_thread(play, self.env, attempt, self.volatile, gold_calls=True))
        return attempts

    @staticmethod
    def problems(answer: ParaphraseAnswer, ids: list[str], tasks: list[Task] = ()) -> list[str]:
        given = [t.task_id for t in answer.tasks]
        problems = [f"no paraphrases for {i}" for i in ids if i not in given]
        problems += [f"{i!r} was not asked for" for i in given if i not in ids]
        facts = {t.task_id: [f.value for f in t.facts] for t in tasks if t.facts}
        for entry in answer.tasks:
            distinct = {p.strip() for p in entry.paraphrases if p.strip()}
            if len(distinct) < MIN_COUNT:
                problems.append(f"{entry.task_id}: give about {COUNT} distinct replies, not {len(distinct)}")
            wanted = facts.get(entry.task_id)
            if wanted and not any(concise(p, wanted) for p in distinct):
                problems.append(f"{entry.task_id}: include a concise reply that gives only the facts "
                                f"({', '.join(wanted)}) in a few words, leaving out the context")
        return problems


def concise(reply: str, facts: list[str]) -> bool:
    """A reply that states every fact in few more words than the facts themselves."""
    words = len(re.findall(r"\w+", reply))
    return words <= len(re.findall(r"\w+", " ".join(facts))) + CONCISE_EXTRA_WORDS and \
        not helpers().answer_facts(reply, facts)["missing"]
