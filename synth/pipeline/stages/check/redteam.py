"""The check loop's red team: given the task, the tools and the verifier's code, it tries to earn
the reward without doing the task.

Model calls: stage "red_team", subject "<env_id>/<task_id>+<task_id>+...", one per batch of tasks
sized to the stage's output budget, with the env's scenario, rules and tools (the verifiers' code
shows the tables they read) and the helpers' API. Each attempt (calls, then an answer) is played on a fresh episode and graded; one
that earns at least settings.probe_threshold and ends in another database than the gold
solution's is an exploit. One whose database is the gold's (a read task's answer, typically) is
an exploit only if the checking agent finds its answer wrong.
"""

from __future__ import annotations

import asyncio
from typing import Any

from synth.artifacts import RedTeamAnswer, Task, ToolCall
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.llm.budgets import asked_in_halves
from synth.pipeline.stages.calls import call_problems
from synth.pipeline.stages.check.attempts import Attempt, play, task_batches
from synth.pipeline.stages.envcontext import EnvContext, data_dump, tables_in_code
from synth.pipeline.stages.check.task_rows import request_rows

STAGE = "red_team"
ROWS_SHOWN = 15  # rows per table the red team sees besides the rows the tasks name
MAX_ATTEMPTS = 3
TOKENS_PER_TASK = 220  # output tokens of one task's attempts (most tasks get one or two)


def attack_source(draft: EnvDraft, task_id: str) -> str:
    """The verifier's code as the red team sees it: its body (the task is shown above it), not the gold calls."""
    body = draft.verifier_bodies.get(task_id, "")
    return "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())


class RedTeamAgent:
    def __init__(self, draft: EnvDraft, env: Any, gateway: Gateway, volatile: list[str]):
        self.draft, self.env, self.gateway, self.volatile = draft, env, gateway, volatile
        self.tools = {t.name: t for t in draft.tools}

    def batches(self, tasks: list[Task]) -> list[list[Task]]:
        return task_batches(STAGE, tasks, TOKENS_PER_TASK, self.gateway.settings.max_tokens)

    def draft_tables(self) -> list[str]:
        from synth.folder.database import open_bytes, user_tables

        conn = open_bytes(self.env.initial_db, readonly=True)
        try:
            return user_tables(conn)
        finally:
            conn.close()

    async def attack(self, tasks: list[Task]) -> list[Attempt]:
        """Every attempt at `tasks`, played and graded; a cut-off answer is asked again in halves."""
        return await asked_in_halves(self._attack, tasks)

    async def _attack(self, tasks: list[Task]) -> list[Attempt]:
        shown = [{"task_id": t.task_id, "kind": t.kind, "instruction": t.instruction,
                  "source": attack_source(self.draft, t.task_id)} for t in tasks]
        # The scenario, the rules and the tools; not the schema: the verifiers' code shows what they read.
        context = EnvContext.of(self.draft)
        context.schema_sql = ""
        # The rows the tasks name and the tables their verifiers read: real ids and values to attack with.
        db = self.env.initial_db
        read = sorted({t for task in tasks for t in tables_in_code(self.draft.verifier_bodies.get(task.task_id, ""),
                                                                    list(self.draft_tables()))})
        rows = data_dump(db, read, rows=ROWS_SHOWN, prefer=request_rows(db, [t.instruction for t in tasks]))
        messages = context.messages(STAGE, tasks=shown, max_attempts=MAX_ATTEMPTS, data_dump=rows)
        ids = [t.task_id for t in tasks]
        answer = await self.gateway.structured(RedTeamAnswer, messages, stage=STAGE,
                                               subject=f"{self.draft.env_id}/{'+'.join(ids)}",
                                               check=lambda a: self.problems(a, ids))
        by_id = {t.task_id: t for t in tasks}
        attempts = []
        for entry in answer.tasks:
            for tried in entry.attempts[:MAX_ATTEMPTS]:
                attempt = Attempt(task=by_id[entry.task_id], source="red_team", answer=tried.answer,
                                  note=tried.idea, calls=[ToolCall(tool=c.tool, arguments=c.arguments)
                                                          for c in tried.calls])
                attempts.append(await asyncio.to_thread(play, self.env, attempt, self.volatile))
        return attempts

    def problems(self, answer: RedTeamAnswer, ids: list[str]) -> list[str]:
        given = [t.task_id for t in answer.tasks]
        problems = [f"no attempts for {i}" for i in ids if i not in given]
        problems += [f"{i!r} was not asked for" for i in given if i not in ids]
        for entry in answer.tasks:
            if not 1 <= len(entry.attempts) <= MAX_ATTEMPTS:
                problems.append(f"{entry.task_id}: give 1 to {MAX_ATTEMPTS} attempts, not {len(entry.attempts)}")
            for n, tried in enumerate(entry.attempts, 1):
                problems += [f"{entry.task_id} attempt {n}: {p}" for _, p in call_problems(tried.calls, self.tools,
                                                                                           "call")]
        return problems
