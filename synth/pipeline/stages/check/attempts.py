"""Attempts at a task made by the check loop's reward agents (solver, red team, paraphrases), played
on a loaded env in the sandbox and described for the checking agent.

An attempt is a list of tool calls with what each returned, a final answer, the final database,
the verifier's rubric reward, and whether that database equals the one the gold solution makes
(every table, volatile and free columns aside: synth/use/reward.py's comparison).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from synth.artifacts import Reward, Task, ToolCall, VerifierCase
from synth.errors import SynthError
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.check.judge import describe_diff
from synth.pipeline.stages.repair import clip
from synth.use.replay import canonical, preview, state_diff
from synth.use.reward import gold_final, table_checks

RESULT_CHARS = 1500  # a tool result as an agent or the judge sees it: cut by whole items, saying how many


def task_batches(stage: str, tasks: list[Task], tokens_per_task: int, max_tokens: int,
                 most: int | None = None) -> list[list[Task]]:
    """Consecutive groups of tasks whose answers fit one request of `stage` at the model's cap
    (and, with `most`, of at most that many tasks: each one's tool results fill the prompt)."""
    ids = [t.task_id for t in tasks]
    by_id = {t.task_id: t for t in tasks}
    groups = pack(ids, {i: tokens_per_task for i in ids}, planned_tokens(stage, max_tokens))
    if most:
        groups = [g[i:i + most] for g in groups for i in range(0, len(g), most)]
    return [[by_id[i] for i in group] for group in groups]


def observation_text(observation: dict[str, Any], limit: int = RESULT_CHARS) -> str:
    if observation.get("ok"):
        return canonical(preview(observation.get("result"), limit))
    return f"error: {clip(str(observation.get('error')), 300)}"


@dataclass
class Attempt:
    task: Task
    source: str  # solver | red_team | paraphrase
    calls: list[ToolCall] = field(default_factory=list)
    observations: list[dict[str, Any]] = field(default_factory=list)
    answer: str | None = None
    note: str = ""  # the red team's idea
    final_db: bytes | None = None
    reward: Reward | None = None
    same_state: bool = False  # the final database equals the gold solution's
    error: str | None = None

    @property
    def score(self) -> float:
        return 0.0 if self.reward is None or self.reward.error else self.reward.reward

    def steps(self) -> list[str]:
        return [f"{c.tool}({canonical(c.arguments)}) -> {observation_text(o)}"
                for c, o in zip(self.calls, self.observations)]

    def case(self, case_id: str, expect: str, note: str = "") -> VerifierCase:
        return VerifierCase(case_id=case_id, task_id=self.task.task_id, source=self.source,  # type: ignore[arg-type]
                            use_gold=self.source == "paraphrase", calls=[] if self.source == "paraphrase" else
                            list(self.calls), answer=self.answer, expect=expect, note=clip(note or self.note, 300),
                            found_reward=round(self.score, 4))


def finish(env: Any, attempt: Attempt, episode: Any, volatile: list[str]) -> Attempt:
    """Grade an attempt played on `episode` (still open): the rubric, its final state, and whether
    that state is the gold solution's."""
    try:
        attempt.final_db = episode.snapshot()
    except SynthError as exc:
        attempt.error = str(exc)
        return attempt
    attempt.reward = episode.evaluate(attempt.answer, state=False)
    gold = gold_final(env, attempt.task)
    attempt.same_state = isinstance(gold, bytes) and all(  # free columns count as written or not
        c.passed for c in table_checks(env, attempt.task, gold, attempt.final_db, volatile))
    return attempt


def play(env: Any, attempt: Attempt, volatile: list[str], *, gold_calls: bool = False) -> Attempt:
    """Play an attempt's calls (or the task's gold calls) on a fresh episode, then grade its answer."""
    calls = list(attempt.task.gold) if gold_calls else attempt.calls
    with env.episode(attempt.task.task_id) as episode:
        attempt.observations = [episode.call(c.tool, dict(c.arguments)) for c in calls]
        attempt.calls = calls
        return finish(env, attempt, episode, volatile)


def judge_item(env: Any, attempt: Attempt, item_id: str, question: str, volatile: list[str],
               probes: list[dict[str, Any]]) -> dict[str, Any]:
    """What the checking agent is shown about one attempt (see templates/prompts/reward_judge.j2)."""
    gold = gold_final(env, attempt.task)
    if attempt.final_db is None:
        diff, versus = "unknown (the episode was lost)", "unknown"
    else:
        diff = describe_diff(state_diff(env.initial_db, attempt.final_db, volatile))
        if isinstance(gold, str):
            versus = gold
        elif attempt.same_state:
            versus = "the same"
        else:
            versus = "different: " + describe_diff(state_diff(gold, attempt.final_db, volatile)) + \
                     " (rows as they are in the attempt's database relative to the reference's)"
    checks = ", ".join(f"{c.name}: {'passed' if c.passed else 'FAILED'}" for c in attempt.reward.checks) \
        if attempt.reward is not None else "none"
    return {"item_id": item_id, "task_id": attempt.task.task_id, "kind": attempt.task.kind, "question": question,
            "instruction": attempt.task.instruction, "expected": attempt.task.expected_answer,
            "calls": "; ".join(attempt.steps()) or "none", "answer": attempt.answer, "diff": diff,
            "versus_gold": versus, "checks": clip(checks, 800), "reward": f"{attempt.score:.2f}",
            "probes": ", ".join(f"{p.get('probe')} {float(p.get('reward') or 0):.2f}" for p in probes) or "none"}
