"""The checking agent on the reward agents' findings: is an answer correct, and is an outcome that
differs from the gold solution's one the verifier should have failed?

Model calls: stage "reward_judge", subject "<env_id>/<item_id>+...", through the judge gateway
(`--judge-model`). It never judges from the generator's reasoning alone: each item shows the
attempt's calls with their results, the database change, how the final database compares with
the gold solution's, the verifier's checks and the task's probe rewards; the env's shared context
holds the invariants and allowed status changes. Only items that need judgement are sent, in
batches of at most MAX_ITEMS.
"""

from __future__ import annotations

from typing import Any

from synth.artifacts import RewardJudgement, RewardVerdict
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.pipeline.stages.envcontext import EnvContext

STAGE = "reward_judge"
MAX_ITEMS = 6
VERDICTS = {"answer": ("correct", "wrong"), "state": ("too_loose", "ambiguous", "acceptable")}


async def judge_items(draft: EnvDraft, gateway: Gateway, items: list[dict[str, Any]]) -> dict[str, RewardVerdict]:
    """Verdicts by item id for `items` (see attempts.judge_item), in batches."""
    out: dict[str, RewardVerdict] = {}
    for start in range(0, len(items), MAX_ITEMS):
        batch = items[start:start + MAX_ITEMS]
        questions = {i["item_id"]: i["question"] for i in batch}

        def check(answer: RewardJudgement, questions: dict[str, str] = questions) -> list[str]:
            given = [v.item_id for v in answer.verdicts]
            problems = [f"no verdict for item {i}" for i in questions if i not in given]
            problems += [f"unknown item {i!r}" for i in given if i not in questions]
            for v in answer.verdicts:
                allowed = VERDICTS.get(questions.get(v.item_id, ""), ())
                if v.item_id in questions and v.verdict not in allowed:
                    problems.append(f"item {v.item_id} asks {questions[v.item_id]!r}: answer one of {allowed}")
                if v.verdict == "ambiguous" and not v.clarified_instruction.strip():
                    problems.append(f"item {v.item_id}: an 'ambiguous' verdict needs the clarified_instruction")
            return problems

        messages = EnvContext.of(draft).messages(STAGE, items=batch)
        answer = await gateway.judge().structured(
            RewardJudgement, messages, stage=STAGE, subject=f"{draft.env_id}/{'+'.join(questions)}", check=check)
        out.update({v.item_id: v for v in answer.verdicts})
    return out
