"""Seeds to unique, CRUD-able scenarios: expand -> classify -> dedup, in rounds.

Seeds advance in lockstep rounds. In each round every seed that still has room
proposes a batch (stage `expand`, one model call per seed, concurrently), every
candidate is judged (stage `classify`, concurrently), and the CRUD-able ones are
offered to the incremental Deduper in seed order (stage `dedup`; borderline
pairs go to the model judge). Lockstep order keeps prompts and dedup decisions
the same on a rerun, so the model-call cache and the run store make a rerun
free for work already done.

Targets: n scenarios in total, ceil(n / seeds) per seed (n seeds spread over
the list when n < seeds); if some seeds stall short of their share, seeds with
room are topped up until n or until every seed is exhausted. A seed stalls
after settings.max_stall_rounds rounds in a row with no new accepted scenario
(a failed round counts as one); a round stalled by duplicates relaxes the
dedup threshold one bounded step.

Run-store items (when a store is given): "expand" / "<seed>/rNN" (the round's
proposals) and "expand" / "<seed>" (the seed's outcome), "classify" /
"<seed>/rNN/i" (the judgement), "dedup" / "<seed>/rNN/i" (the decision).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from synth.artifacts import RejectedScenario, Scenario, Seed
from synth.config import Settings
from synth.errors import InputError
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.embed import Embedder
from synth.pipeline.scenario_files import load_existing, read_scenarios, rejected_path, write_jsonl
from synth.pipeline.seeds import load_seeds
from synth.pipeline.stages.scenarios import classify as classify_stage
from synth.pipeline.stages.scenarios import expand as expand_stage
from synth.pipeline.stages.scenarios.dedup import Decision, Deduper, default_quota
from synth.pipeline.stages.scenarios.dedup_judge import ModelDuplicateJudge
from synth.pipeline.stages.scenarios.expand import SeedProgress
from synth.pipeline.store import RunStore, derive_run_id

DEDUP_STAGE = "dedup"
ITEM_ATTEMPTS = 3  # a round that failed this often is not asked again on rerun


@dataclass
class ItemFailure:
    stage: str
    item_id: str
    error: str


@dataclass
class ScenarioResult:
    target: int
    kept: list[Scenario] = field(default_factory=list)
    rejected: list[RejectedScenario] = field(default_factory=list)
    failures: list[ItemFailure] = field(default_factory=list)  # model items that failed for good this run
    stalled: dict[str, str] = field(default_factory=dict)  # seed name -> why it gave no more
    candidates: int = 0
    crud_able: int = 0
    rounds: int = 0  # lockstep rounds run
    threshold: float = 0.0  # dedup threshold in force at the end (after relaxations)
    budget_stopped: bool = False
    budget_message: str | None = None

    def summary(self) -> str:
        line = (f"candidates {self.candidates} / crud-able {self.crud_able} / unique {len(self.kept)} / "
                f"rejected {len(self.rejected)}")
        extra = []
        if len(self.kept) < self.target:
            extra.append(f"{len(self.kept)} of {self.target} wanted")
        if self.stalled:
            extra.append(f"{len(self.stalled)} seed(s) stalled")
        if self.failures:
            extra.append(f"{len(self.failures)} model item(s) failed")
        if self.budget_stopped:
            extra.append("stopped by the budget")
        return line + (f" ({'; '.join(extra)})" if extra else "")


class _Generation:
    """One generate_scenarios call: the shared state of the lockstep rounds."""

    def __init__(self, n: int, gateway: Gateway, settings: Settings, deduper: Deduper,
                 judge: ModelDuplicateJudge, store: RunStore | None, existing: Sequence[Scenario]):
        self.n = n
        self.gateway = gateway
        self.settings = settings
        self.deduper = deduper
        self.judge = judge
        self.store = store
        self.pool: list[Scenario] = list(existing)  # few-shot and avoid-list source: existing, then accepted
        self.result = ScenarioResult(target=n, threshold=deduper.threshold)

    @property
    def room(self) -> int:
        return self.n - len(self.result.kept)

    def stop_for_budget(self, message: str) -> None:
        self.result.budget_stopped = True
        self.result.budget_message = self.result.budget_message or message

    async def expand(self, progresses: list[SeedProgress]) -> None:
        """Run lockstep rounds until every seed reached its target or stalled, n is reached, or the budget."""
        while self.room > 0 and not self.result.budget_stopped:
            active = [p for p in progresses if p.active]
            if not active:
                return
            await self.round(active)

    async def round(self, active: list[SeedProgress]) -> None:
        self.result.rounds += 1
        for p in active:
            p.rounds += 1
        batches = await asyncio.gather(*(self.propose(p, p.rounds) for p in active))
        candidates = [(f"{p.round_id(p.rounds)}/{i}", s) for p, batch in zip(active, batches)
                      for i, s in enumerate(batch or [])]
        self.result.candidates += len(candidates)
        judged = {j.candidate_id: j for j in await classify_stage.classify(candidates, self.gateway, store=self.store)}
        relax = False
        for p, batch in zip(active, batches):
            accepted, why = await self.offer(p, batch or [], judged)
            if accepted:
                p.stall = 0
                continue
            p.stall += 1
            relax = relax or "duplicate" in why  # a looser threshold only helps against duplicates
            last = "the model call failed" if batch is None else (
                ", ".join(f"{kind}: {n}" for kind, n in why.items()) or "no proposals")
            if p.stall >= self.settings.max_stall_rounds and not self.result.budget_stopped:
                p.exhausted = f"stalled: {p.stall} round(s) in a row with no new accepted scenario (last round: {last})"
        if self.judge.budget_hit:
            self.stop_for_budget(self.judge.budget_hit)
        if relax and not self.result.budget_stopped:
            self.deduper.relax()  # bounded by the deduper's max threshold
            self.result.threshold = self.deduper.threshold

    async def propose(self, p: SeedProgress, round_no: int) -> list[Scenario] | None:
        """The round's proposals for one seed (from the store on a rerun); None if the call failed."""
        item = p.round_id(round_no)
        if self.store is not None:
            row = self.store.get(expand_stage.STAGE, item)
            if row and row["status"] == "done":
                return [Scenario.model_validate(s) for s in row["output"]]
            if row and not self.store.should_run(expand_stage.STAGE, item, ITEM_ATTEMPTS):
                self.fail(expand_stage.STAGE, item, f"gave up after {row['attempts']} attempts: {row['error']}")
                return None
            self.store.start(expand_stage.STAGE, item)
        try:
            batch = await expand_stage.propose(p, round_no, self.gateway, pool=self.pool)
        except BudgetExceeded as exc:  # first: it is a ModelError too
            self.stop_for_budget(str(exc))
            if self.store is not None:
                self.store.fail(expand_stage.STAGE, item, f"not run: {exc}")
            return None
        except ModelError as exc:
            self.fail(expand_stage.STAGE, item, str(exc))
            if self.store is not None:
                self.store.fail(expand_stage.STAGE, item, str(exc))
            return None
        if self.store is not None:
            self.store.finish(expand_stage.STAGE, item, [s.model_dump() for s in batch])
        return batch

    async def offer(self, p: SeedProgress, batch: list[Scenario],
                    judged: dict[str, classify_stage.Judged]) -> tuple[int, dict[str, int]]:
        """Offer one seed's judged candidates to the deduper; returns (accepted, {rejection kind: count})."""
        accepted, why = 0, {}
        for i, scenario in enumerate(batch):
            cid = f"{p.round_id(p.rounds)}/{i}"
            j = judged[cid]
            if j.status == "budget":
                self.stop_for_budget(j.error or "budget reached")
                self.reject(cid, scenario, "classify", "not classified: the budget was reached", why, "unjudged")
            elif j.status == "failed":
                self.fail(classify_stage.STAGE, cid, j.error or "")
                self.reject(cid, scenario, "classify", f"classification failed: {j.error}", why, "unjudged")
            elif not j.crud_able:
                self.reject(cid, scenario, "classify", f"not CRUD-able: {j.judgement.reason}", why, "not CRUD-able")
            elif p.room == 0 or self.room == 0:
                self.result.crud_able += 1
                self.reject(cid, scenario, "surplus", "not needed: the seed's share or the total was already reached",
                            why, "surplus")
            else:
                self.result.crud_able += 1
                decision = await self.deduper.offer(scenario)
                self.record_decision(cid, decision)
                if decision.kept:
                    accepted += 1
                    p.accepted.append(scenario)
                    self.pool.append(scenario)
                    self.result.kept.append(scenario)
                else:
                    reason = decision.reason
                    judge_reason = decision.nearest and self.judge.reason_for(scenario, decision.nearest)
                    if decision.rule == "judge_duplicate" and judge_reason:
                        reason += f" ({judge_reason})"
                    self.reject(cid, scenario, "dedup", reason, why, "duplicate", decision)
        return accepted, why

    def reject(self, cid: str, scenario: Scenario, stage: str, reason: str, why: dict[str, int], kind: str,
               decision: Decision | None = None) -> None:
        why[kind] = why.get(kind, 0) + 1
        nearest = decision.nearest.name if decision and decision.nearest else None
        similarity = round(decision.similarity, 4) if decision and decision.similarity is not None else None
        self.result.rejected.append(RejectedScenario(
            candidate_id=cid, stage=stage, reason=reason, scenario=scenario, nearest=nearest, similarity=similarity))

    def record_decision(self, cid: str, decision: Decision) -> None:
        if self.store is not None:
            self.store.start(DEDUP_STAGE, cid)
            self.store.finish(DEDUP_STAGE, cid, decision.to_row())

    def fail(self, stage: str, item_id: str, error: str) -> None:
        self.result.failures.append(ItemFailure(stage, item_id, error))

    def record_seed_outcomes(self, progresses: list[SeedProgress]) -> None:
        for p in progresses:
            if not p.rounds:
                continue  # never needed
            if p.exhausted:
                self.result.stalled[p.seed.name] = p.exhausted
            if self.store is None:
                continue
            self.store.start(expand_stage.STAGE, p.slug)
            if p.exhausted:
                self.store.fail(expand_stage.STAGE, p.slug, p.exhausted)
            else:
                self.store.finish(expand_stage.STAGE, p.slug, {"accepted": [s.name for s in p.accepted],
                                                               "rounds": p.rounds})


def share_out(progresses: list[SeedProgress], room: int) -> bool:
    """Raise the targets of seeds that are not exhausted so they add up to `room` more scenarios.

    Each gets ceil(room / seeds); when fewer scenarios than seeds are wanted,
    `room` seeds spread evenly over the list get one each, so no model call is
    spent on a seed whose proposals could not be kept. False if no seed is left.
    """
    roomy = [p for p in progresses if p.exhausted is None]
    if not roomy:
        return False
    if room < len(roomy):
        chosen = [roomy[i * len(roomy) // room] for i in range(room)]
        extra = 1
    else:
        chosen, extra = roomy, math.ceil(room / len(roomy))
    for p in chosen:
        p.target = len(p.accepted) + extra
    return True


async def generate_scenarios(
    seeds: Sequence[Seed],
    n: int,
    gateway: Gateway,
    settings: Settings,
    *,
    existing: Sequence[Scenario] = (),
    store: RunStore | None = None,
    embedder: Embedder | None = None,
) -> ScenarioResult:
    """Expand, classify and dedup until n unique CRUD-able scenarios (see the module docstring).

    `existing` scenarios (e.g. already in the output folder) are compared
    against and shown to the model as taken, but are not part of the result.
    Failed model items are recorded (result.failures, and the store) and never
    stop the stage; a spent budget ends it cleanly with what was kept so far
    (result.budget_stopped). Pass `embedder` to share one across calls.
    """
    if not seeds:
        raise InputError("no seeds given; pass a seed file with at least one 'name | description | category' line")
    if n < 1:
        raise InputError(f"the number of scenarios must be at least 1, got {n}")
    own_embedder = embedder is None
    embedder = embedder or Embedder(None if settings.no_cache else settings.cache_dir)
    try:
        judge = ModelDuplicateJudge(gateway)
        quota = default_quota([s.category for s in seeds] + [s.category for s in existing], n + len(existing))
        deduper = Deduper(embedder, threshold=settings.dedup_threshold, borderline=settings.dedup_borderline,
                          default_quota=quota, judge=judge)
        deduper.add_existing(existing)
        run = _Generation(n, gateway, settings, deduper, judge, store, existing)
        progresses = [SeedProgress(seed=s, index=i, target=0) for i, s in enumerate(seeds)]
        # First pass: ceil(n / seeds) each. Then top up: seeds with room take over
        # what stalled seeds could not give, until n or every seed is exhausted.
        while run.room > 0 and not run.result.budget_stopped:
            if not share_out(progresses, run.room):
                break
            await run.expand(progresses)
        run.result.failures += [ItemFailure("dedup_judge", subject, error) for subject, error in judge.failures]
        run.record_seed_outcomes(progresses)
        return run.result
    finally:
        if own_embedder:
            embedder.close()


# ---------------------------------------------------------------------- files (the `synth scenarios` command)


def existing_scenarios(out: Path) -> list[Scenario]:
    """Scenarios already in OUT's folder (env folders, scenarios*.jsonl), minus OUT's own rows.

    OUT is this command's product: on a rerun its rows come back from the
    cache and the run store, so they must not count as taken.
    """
    found = load_existing(out.parent)
    if out.is_file():
        own = Counter(read_scenarios(out)[0])
        kept = []
        for s in found:
            if own[s] > 0:
                own[s] -= 1
            else:
                kept.append(s)
        found = kept
    return found


@dataclass
class ScenariosRun:
    result: ScenarioResult
    out: Path
    rejected: Path
    run_id: str
    existing: int  # scenarios the output folder already held


def run_scenarios(seeds_file: Path, n: int, out: Path, settings: Settings) -> ScenariosRun:
    """`synth scenarios`: generate, then write OUT (one Scenario per line) and OUT's .rejected.jsonl.

    The run store lives in <settings.out>/runs/<run id> (the output folder of every
    command, generated/ by default), not next to OUT; the same command (same seeds,
    n, model, output and existing scenarios) resumes the same run.
    """
    out = Path(out)
    seeds = load_seeds(seeds_file)
    existing = existing_scenarios(out)
    taken = hashlib.sha256(json.dumps([s.model_dump() for s in existing]).encode()).hexdigest()
    run_id = settings.run_id or derive_run_id({
        "command": "scenarios", "seeds": [s.model_dump() for s in seeds], "n": n, "model": settings.model,
        "out": str(out), "existing": taken,
    })
    gateway = Gateway(settings)  # no model, no replay file: one error line before any run folder exists
    store = RunStore.open(settings.out, run_id)
    try:
        store.write_config({**settings.public_dict(), "command": "scenarios"})
        gateway.record_into(store, spent_before=store.usage()["total"]["cost"])
        result = asyncio.run(generate_scenarios(seeds, n, gateway, settings, existing=existing, store=store))
    finally:
        store.close()
    rejected = rejected_path(out)
    write_jsonl(out, (s.model_dump() for s in result.kept))
    write_jsonl(rejected, (r.model_dump() for r in result.rejected))
    return ScenariosRun(result, out, rejected, run_id, len(existing))
