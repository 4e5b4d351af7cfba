"""The check loop's solver agent: it solves tasks through the tools without seeing their gold
solutions, so the verifiers can be tested against independent work.

Model calls: stage "solve", subject "<env_id>/<task_id>+<task_id>+...", one conversation per batch
of tasks sized to the stage's output budget, at most MAX_TURNS turns. The solver sees what an
agent in the env sees (the application, today's date, the signed-in user, every tool with its
parameters and what it does), never the schema, the data or the gold. Each turn gives, per open request, the next
calls (played at once in that request's own episode; their results are shown next turn) and/or
the final answer. Each prompt is built afresh from the requests still open, so finished requests
stop costing tokens.
"""

from __future__ import annotations

import asyncio
from typing import Any

from synth.artifacts import SolverTurn, Task, ToolCall
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.calls import call_problems
from synth.pipeline.stages.check.attempts import Attempt, finish, task_batches
from synth.pipeline.stages.envcontext import tool_line
from synth.use.agent import AgentContext, context_lines

STAGE = "solve"
MAX_TURNS = 5
MAX_CALLS_PER_TURN = 8  # per request
TOKENS_PER_TASK = 230  # output tokens of one request's step
MAX_TASKS_PER_CALL = 6  # every open request's tool results are shown whole (cut by items), so few share a turn


class SolverAgent:
    def __init__(self, draft: EnvDraft, env: Any, gateway: Gateway, volatile: list[str]):
        self.draft, self.env, self.gateway, self.volatile = draft, env, gateway, volatile
        self.context = AgentContext.of_env(env.path)
        self.tools = {t.name: t for t in draft.tools}

    def batches(self, tasks: list[Task]) -> list[list[Task]]:
        return task_batches(STAGE, tasks, TOKENS_PER_TASK, self.gateway.settings.max_tokens, MAX_TASKS_PER_CALL)

    def messages(self, attempts: list[Attempt], turn: int) -> list[dict[str, str]]:
        return render_prompt(STAGE, title=self.context.title, scenario=self.context.scenario.strip(),
                             context_lines=context_lines(self.context),
                             tools=[tool_line(t) for t in self.draft.tools],
                             tasks=[{"task_id": a.task.task_id, "instruction": a.task.instruction, "steps": a.steps()}
                                    for a in attempts],
                             turn=turn, max_turns=MAX_TURNS, last=turn == MAX_TURNS)

    async def solve(self, tasks: list[Task]) -> list[Attempt]:
        """One attempt per task, each played in its own episode (closed before returning)."""
        attempts = {t.task_id: Attempt(task=t, source="solver") for t in tasks}
        episodes = {t.task_id: await asyncio.to_thread(self.env.episode, t.task_id) for t in tasks}
        subject = f"{self.draft.env_id}/{'+'.join(t.task_id for t in tasks)}"
        done: set[str] = set()
        try:
            for turn in range(1, MAX_TURNS + 1):
                open_ = [attempts[t.task_id] for t in tasks if t.task_id not in done]
                if not open_:
                    break
                ids = [a.task.task_id for a in open_]
                answer = await self.gateway.structured(
                    SolverTurn, self.messages(open_, turn), stage=STAGE, subject=subject,
                    check=lambda a, ids=ids, last=turn == MAX_TURNS: self.problems(a, ids, last))
                for step in answer.tasks:
                    attempt, episode = attempts[step.task_id], episodes[step.task_id]
                    for action in step.calls[:MAX_CALLS_PER_TURN]:
                        call = ToolCall(tool=action.tool, arguments=action.arguments)
                        attempt.calls.append(call)
                        attempt.observations.append(await asyncio.to_thread(episode.call, call.tool,
                                                                            dict(call.arguments)))
                    if step.answer is not None:
                        attempt.answer = step.answer
                        done.add(step.task_id)
            for task in tasks:
                await asyncio.to_thread(finish, self.env, attempts[task.task_id], episodes[task.task_id],
                                        self.volatile)
        finally:
            for episode in episodes.values():
                await asyncio.to_thread(episode.close)
        return [attempts[t.task_id] for t in tasks]

    def problems(self, answer: SolverTurn, ids: list[str], last: bool) -> list[str]:
        given = [s.task_id for s in answer.tasks]
        problems = [f"no entry for request {i}" for i in ids if i not in given]
        problems += [f"request {i!r} is not open; answer only the requests listed" for i in given if i not in ids]
        for step in answer.tasks:
            problems += [f"{step.task_id}: {p}" for _, p in call_problems(step.calls, self.tools, "call")]
            if last and step.answer is None:
                problems.append(f"{step.task_id}: this is the last turn; give the final answer")
            if not step.calls and step.answer is None:
                problems.append(f"{step.task_id}: give the next calls or the final answer")
        return problems
