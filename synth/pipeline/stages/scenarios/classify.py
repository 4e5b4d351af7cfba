"""Stage `classify`: is a candidate scenario CRUD-able?

EVERY candidate is judged, generated ones included (AWM only filtered its
seeds): its state must fit a relational database that tools read and write, its
data must be synthesizable, and it must need no live external service. A
rejection keeps the judge's reason.

Model calls: stage "classify", subject = the candidate's env id (slug of its
name, e.g. "paw_and_claw_clinic_scheduler"). Answer model: `CrudJudgement`.
Calls run concurrently with asyncio.gather; the gateway bounds concurrency.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from synth.artifacts import CrudJudgement, Scenario
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.prompts import render_prompt
from synth.pipeline.store import RunStore

STAGE = "classify"
ITEM_ATTEMPTS = 3  # a candidate whose judgement failed this often is not asked again on rerun


@dataclass
class Judged:
    candidate_id: str
    scenario: Scenario
    status: Literal["ok", "failed", "budget"]
    judgement: CrudJudgement | None = None
    error: str | None = None

    @property
    def crud_able(self) -> bool:
        return self.judgement is not None and self.judgement.crud_able


def check_judgement(judgement: CrudJudgement) -> list[str]:
    return [] if judgement.reason.strip() else ["reason is empty; give the deciding point in one or two sentences"]


async def judge(scenario: Scenario, gateway: Gateway) -> CrudJudgement:
    return await gateway.structured(
        CrudJudgement,
        render_prompt("classify", scenario=scenario),
        stage=STAGE,
        subject=scenario.env_id,
        check=check_judgement,
    )


async def _classify_one(candidate_id: str, scenario: Scenario, gateway: Gateway, store: RunStore | None) -> Judged:
    if store is not None:
        row = store.get(STAGE, candidate_id)
        if row and row["status"] == "done":
            return Judged(candidate_id, scenario, "ok", CrudJudgement.model_validate(row["output"]))
        if row and not store.should_run(STAGE, candidate_id, ITEM_ATTEMPTS):
            return Judged(candidate_id, scenario, "failed", error=f"gave up after {row['attempts']} attempts: "
                          f"{row['error']}")
        store.start(STAGE, candidate_id)
    try:
        judgement = await judge(scenario, gateway)
    except BudgetExceeded as exc:  # first: it is a ModelError too
        if store is not None:
            store.fail(STAGE, candidate_id, f"not run: {exc}")
        return Judged(candidate_id, scenario, "budget", error=str(exc))
    except ModelError as exc:
        if store is not None:
            store.fail(STAGE, candidate_id, str(exc))
        return Judged(candidate_id, scenario, "failed", error=str(exc))
    if store is not None:
        store.finish(STAGE, candidate_id, judgement.model_dump())
    return Judged(candidate_id, scenario, "ok", judgement)


async def classify(
    candidates: Sequence[tuple[str, Scenario]], gateway: Gateway, *, store: RunStore | None = None
) -> list[Judged]:
    """Judge every (candidate_id, scenario) concurrently; results come back in input order.

    A failed judgement is returned as status "failed" with its error, and one
    refused by the budget as status "budget"; neither stops the others.
    """
    return list(await asyncio.gather(*(_classify_one(cid, s, gateway, store) for cid, s in candidates)))
