"""Model-judged borderline pairs for embedding dedup.

Embedding similarity alone is unsure in a band just below the threshold: two
apps of one domain with different purposes score close to two rewordings of the
same app. For a pair in that band the Deduper asks this judge, whose answer
decides it.

Model calls: stage "dedup_judge", subject "<candidate env id>~<nearest env id>".
Answer model: `DuplicateJudgement`.

A failed judgement never stops the stage: the pair keeps the embedding verdict
(below the threshold = not a duplicate) and the error is kept in `failures`. A
judgement refused by the budget does the same and sets `budget_hit`, so the
caller stops starting new work.
"""

from __future__ import annotations

from synth.artifacts import DuplicateJudgement, Scenario
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.prompts import render_prompt

STAGE = "dedup_judge"


def judge_subject(candidate: Scenario, nearest: Scenario) -> str:
    return f"{candidate.env_id}~{nearest.env_id}"


class ModelDuplicateJudge:
    """Async `(candidate, nearest) -> is_duplicate` backed by the gateway."""

    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        self.reasons: dict[tuple[str, str], str] = {}  # (candidate, nearest) names -> the judge's reason
        self.failures: list[tuple[str, str]] = []  # (subject, error)
        self.budget_hit: str | None = None  # the budget message once a call was refused

    async def __call__(self, candidate: Scenario, nearest: Scenario, similarity: float | None = None) -> bool:
        subject = judge_subject(candidate, nearest)
        try:
            answer = await self.gateway.structured(
                DuplicateJudgement,
                render_prompt("dedup_judge", candidate=candidate, nearest=nearest, similarity=similarity),
                stage=STAGE,
                subject=subject,
            )
        except BudgetExceeded as exc:  # first: it is a ModelError too
            self.budget_hit = str(exc)
            return False
        except ModelError as exc:
            self.failures.append((subject, str(exc)))
            return False
        self.reasons[(candidate.name, nearest.name)] = answer.reason
        return answer.is_duplicate

    def reason_for(self, candidate: Scenario, nearest: Scenario) -> str | None:
        return self.reasons.get((candidate.name, nearest.name))
