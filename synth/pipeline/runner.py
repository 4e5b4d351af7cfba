"""`synth run`: seeds -> scenarios -> build -> verify until N envs are verified, resumable.

Three parts, kept apart so each can change alone:
- `build_and_verify` does one scenario's work (build, then verify) and returns
  an `EnvOutcome`; it never raises for a model or quality failure, so an
  executor can run it anywhere;
- `synth.pipeline.scheduler.schedule` decides how many scenarios to provision and build
  to end with N verified (or why it stopped short);
- `Pipeline` ties them to one run: its store, gateway, the scenarios already in
  the output folder, and the summary.

Every step is an item in the run store and every model answer is cached, so
rerunning the same command skips finished work and repeats no paid call. An
env's outcome (verified or failed) is final within a run; an env interrupted
by a kill or by the budget is resumed.

Where envs land: verified ones in <out>/envs/<env_id>/, failed ones in
<out>/failed/<env_id>/ with their reasons in env.json and report.json, and
built ones waiting for verification in <out>/built/<env_id>/. The run
folder <out>/runs/<run_id>/ holds config.json, run.sqlite, scenarios.jsonl,
scenarios.rejected.jsonl and summary.json.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Awaitable, TypeVar

from synth.artifacts import Scenario, Seed
from synth.atomic import write_json_atomic
from synth.config import Settings
from synth.errors import SynthError
from synth.folder.files import read_env_json
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.build import build_env
from synth.pipeline.layout import built_path, env_path, place_env
from synth.pipeline.progress import Progress
from synth.pipeline.scenario_files import load_existing, write_jsonl
from synth.pipeline.scenarios import ScenarioResult, generate_scenarios
from synth.pipeline.scheduler import BUDGET, CAP, EXHAUSTED, REACHED, Provisioned, schedule
from synth.pipeline.seeds import name_key
from synth.pipeline.store import RunStore, derive_run_id
from synth.pipeline.verify import verify_env

ENV_STAGE = "env"  # run-store item per env: its final outcome
WORKERS_PER_ENV = 3  # sandbox workers per env in flight (see pipeline_pool)
EXISTING_ITEM = ("scenarios", "existing")  # what the output folder held when the run first started


@dataclass
class EnvOutcome:
    env_id: str
    status: str  # verified | failed | stopped
    stage: str  # where it ended: build | verify
    path: str | None
    reason: str | None = None
    resumed: bool = False  # decided by an earlier attempt of this run
    lost: list[str] = field(default_factory=list)  # earlier attempts whose worker was lost, with the reason


T = TypeVar("T")
SANDBOX_THREADS = 64  # threads for blocking sandbox work (asyncio.to_thread); see CheckLoop and the gold stage


def pipeline_threads() -> ThreadPoolExecutor:
    """The executor behind asyncio.to_thread in a pipeline run. Sandbox work blocks a thread while it
    waits for a worker (a busy pool makes it wait); with the default executor (cpu count + 4 threads)
    every thread could be waiting for a worker whose own episode needs a thread to finish: a deadlock."""
    return ThreadPoolExecutor(max_workers=SANDBOX_THREADS, thread_name_prefix="synth-sandbox")


async def with_sandbox_threads(work: Awaitable[T]) -> T:
    """Await `work` with pipeline_threads() behind asyncio.to_thread."""
    threads = pipeline_threads()
    asyncio.get_running_loop().set_default_executor(threads)
    try:
        return await work
    finally:
        threads.shutdown(wait=False, cancel_futures=True)


def pipeline_pool(settings: Settings) -> Any:
    """The sandbox pool of a pipeline run. One env per worker process, and each env in flight holds
    up to three at once (its tests or the solver's open episodes, and the trial envs of gold answers
    under execution); a busy pool makes a caller wait, for as long as a model turn may take, since
    waiting is right and a refusal would be mistaken for a fault of the answer being checked."""
    from synth.runtime.sandbox import SandboxPool

    return SandboxPool(workers=max(2, WORKERS_PER_ENV * settings.parallel_envs), call_timeout=settings.tool_timeout,
                       allow_weak=settings.allow_weak_sandbox, wait_timeout=max(600.0, settings.timeout), spread=1)


def run_id_for(seeds: list[Seed], n: int, settings: Settings) -> str:
    return settings.run_id or derive_run_id({
        "command": "run", "seeds": [s.model_dump() for s in seeds], "n": n,
        "model": settings.model, "out": str(Path(settings.out).resolve()),
    })


def reason_group(reason: str | None) -> str:
    """A key to group failures by (never shown): the reason with quoted names, paths and bare
    numbers masked, so "HTTP 429 ... 6 attempts" and "HTTP 503 ... 2 attempts" fall together.

    Numbers inside identifiers (gpt-4.1-mini, tools.py, r02) are part of a name and stay."""
    text = (reason or "unknown").strip().split(" in /")[0]
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"(?<![\w./-])\d+(\.\d+)?(?![\w/-]|\.\w)", "N", text)
    return text[:200]


REASON_CHARS = 400  # a failure reason longer than this is cut at a word, with "..."


def shown_reason(reason: str | None) -> str:
    """A failure reason as a person reads it: whole (its numbers and names as they were), on one
    line, cut at a word with "..." only when very long."""
    text = " ".join((reason or "unknown").split())
    if len(text) <= REASON_CHARS:
        return text
    return text[:REASON_CHARS].rsplit(" ", 1)[0] + " ..."


def _status(env_dir: Path) -> str | None:
    try:
        return read_env_json(env_dir, "env.json").get("status")
    except (SynthError, AttributeError):
        return None


# ---------------------------------------------------------------------------- one env


def _in_process(executor: Any) -> bool:
    """Does the env's work run in this process (no executor, or the local one)? A resumed tasks step runs
    here then; with Ray it is the remote worker's part of the env's work."""
    return executor is None or getattr(executor, "name", None) == "local"


async def build_and_verify(scenario: Scenario, gateway: Gateway, settings: Settings, out: Path, *,
                           store: RunStore | None = None, pool: Any = None,
                           progress: Progress | None = None, executor: Any = None) -> EnvOutcome:
    """Build and verify one scenario's env; the outcome says how it ended (never raises for
    a model or quality failure). With a store, an outcome decided earlier is returned as is.

    The work itself is `build_then_verify` in this process, or `executor.build(scenario, progress)`
    (synth.pipeline.executor: e.g. a Ray task on another node); the decisions around it stay here."""
    show = progress or Progress()
    env_id = scenario.env_id
    final = env_path(out, env_id)
    row = store.get(ENV_STAGE, env_id) if store is not None else None
    if row and row["status"] == "done":
        outcome = EnvOutcome(**{**row["output"], "resumed": True})
        if outcome.status != "verified" or _status(final) == "verified":
            show.finished("build", outcome.stage == "verify")
            show.finished("verify", outcome.status == "verified")
            if outcome.status == "verified" and _in_process(executor):  # a kill may have stopped its tasks step
                await _with_templates(final, gateway, settings, store, pool, show)
            return outcome
    started = False
    if _status(final) == "verified":  # verified before a kill could record it
        outcome = EnvOutcome(env_id, "verified", "verify", str(final), resumed=True)
        if _in_process(executor):  # the kill may have come during its tasks step
            await _with_templates(final, gateway, settings, store, pool, show)
    else:
        if gateway.usage.budget_reached:
            return EnvOutcome(env_id, "stopped", "build", None, "budget reached before this env started")
        if store is not None:
            store.start(ENV_STAGE, env_id)  # counts the attempt; an executor counts its retries here too
            started = True
        if executor is None:
            outcome = await build_then_verify(scenario, gateway, settings, out, store, pool, show)
        else:
            outcome = await executor.build(scenario, show)
    if store is not None and outcome.status == "stopped" and started:
        store.fail(ENV_STAGE, env_id, outcome.reason or "stopped")  # resumed by the next run
    elif store is not None and outcome.status != "stopped":
        if not started:
            store.start(ENV_STAGE, env_id)
        store.finish(ENV_STAGE, env_id, {k: v for k, v in asdict(outcome).items() if k != "resumed"})
    return outcome


async def build_then_verify(scenario: Scenario, gateway: Gateway, settings: Settings, out: Path,
                            store: RunStore | None, pool: Any, show: Progress) -> EnvOutcome:
    """The work on one env, wherever it runs: build (unless an earlier attempt built it), then verify."""
    env_id = scenario.env_id
    path = built_path(out, env_id)  # in progress; envs/ gets it once verified (synth/pipeline/layout.py)
    if _status(path) == "verified":  # verified before a kill could move it
        return await _with_templates(place_env(path, "verified"), gateway, settings, store, pool, show)
    if _status(path) != "built":  # a built folder is an earlier attempt that stopped before verify
        show.started("build")
        built = await build_env(scenario, gateway, settings, out, store=store, pool=pool)
        show.finished("build", built.status == "built")
        if built.status != "built":
            return EnvOutcome(env_id, built.status, "build", str(built.path) if built.path else None, built.reason)
        path = built.path
    else:
        show.finished("build", True)
    show.started("verify")
    try:
        verified = await verify_env(path, gateway, settings, store=store, pool=pool)
    except BudgetExceeded as exc:
        show.finished("verify", False)
        return EnvOutcome(env_id, "stopped", "verify", str(path), str(exc))
    except ModelError as exc:  # an item failure: keep the env apart with its reason
        show.finished("verify", False)
        return EnvOutcome(env_id, "failed", "verify", str(place_env(path, "failed")), str(exc))
    show.finished("verify", verified.verified)
    if verified.budget_stopped:
        return EnvOutcome(env_id, "stopped", "verify", str(path), "; ".join(verified.reasons))
    if not verified.verified:
        reason = "; ".join(verified.reasons) or f"verification ended with status {verified.status}"
        return EnvOutcome(env_id, "failed", "verify", str(place_env(path, "failed")), reason)
    return await _with_templates(place_env(path, "verified"), gateway, settings, store, pool, show)


async def _with_templates(path: Path, gateway: Gateway, settings: Settings, store: RunStore | None, pool: Any,
                          show: Progress) -> EnvOutcome:
    """A verified env, after `synth run`'s tasks step (which never fails it and resumes from the run store)."""
    if settings.templates > 0:
        from synth.pipeline.tasks.in_run import run_step

        await run_step(path, gateway, settings, store=store, pool=pool, progress=show)
    return EnvOutcome(path.name, "verified", "verify", str(path))


# ---------------------------------------------------------------------------- the run


class Pipeline:
    """One `synth run`: N verified envs from seeds, in the output folder of `settings.out`.

    `one_scenario_per_seed`: the seeds' answers are recordings holding one scenario each
    (the offline demo), so a seed whose scenario the folder already holds has nothing to give.
    """

    def __init__(self, seeds: list[Seed], n: int, settings: Settings, *, pool: Any = None,
                 one_scenario_per_seed: bool = False, target: int | None = None):
        # n names the run (with the seeds, model and output folder); target is what it builds
        # toward, n unless the seeds are known to hold fewer (the demo).
        self.n, self.settings = n, settings
        self.target = n if target is None else target
        self.out = Path(settings.out)
        self.run_id = run_id_for(seeds, n, settings)
        self.store = RunStore.open(self.out, self.run_id)
        self.gateway = Gateway(settings, recorder=self.store, spent_before=self.store.usage()["total"]["cost"])
        self.pool = pool
        self.existing = self._existing()
        taken = {name_key(s.seed) for s in self.existing}
        self.seeds = [s for s in seeds if name_key(s.name) not in taken] if one_scenario_per_seed else seeds
        self.all_seeds = seeds
        self.scenarios = ScenarioResult(target=0)
        self.embedder: Any = None
        self.executor: Any = None  # synth.pipeline.executor: where each env's work runs (None: here, with `pool`)
        self.started = time.monotonic()

    def _existing(self) -> list[Scenario]:
        """Scenarios the output folder held when this run first started (kept in the store, so that
        envs this run built itself are never mistaken for taken ones on a rerun)."""
        row = self.store.get(*EXISTING_ITEM)
        if row and row["status"] == "done":
            return [Scenario.model_validate(s) for s in row["output"]]
        found = load_existing(self.out)
        self.store.start(*EXISTING_ITEM)
        self.store.finish(*EXISTING_ITEM, [s.model_dump() for s in found])
        return found

    async def provision(self, total: int) -> Provisioned:
        """The first `total` unique scenarios of this run (a rerun replays the same ones first)."""
        from synth.pipeline.embed import Embedder

        if not self.seeds:
            return Provisioned([], exhausted=True)
        if self.embedder is None:
            self.embedder = Embedder(None if self.settings.no_cache else self.settings.cache_dir)
        self.progress.stage("scenarios", total)
        result = await generate_scenarios(self.seeds, total, self.gateway, self.settings, existing=self.existing,
                                          store=self.store, embedder=self.embedder)
        self.scenarios = result
        self.progress.count("scenarios", done=len(result.kept), total=total)
        write_jsonl(self.store.dir / "scenarios.jsonl", (s.model_dump() for s in result.kept))
        write_jsonl(self.store.dir / "scenarios.rejected.jsonl", (r.model_dump() for r in result.rejected))
        exhausted = len(result.kept) < total and not result.budget_stopped
        return Provisioned(result.kept, exhausted=exhausted, budget_stopped=result.budget_stopped)

    async def run(self, progress: Progress) -> dict[str, Any]:
        self.progress = progress
        progress.usage = lambda: asdict(self.gateway.usage.total)  # in memory: safe after the store closes
        self.store.write_config({**self.settings.public_dict(), "command": "run", "seeds": len(self.all_seeds),
                                 "n": self.n})

        def queued(count: int) -> None:
            progress.stage("build", count)
            progress.stage("verify", count)
            if self.settings.templates > 0:
                progress.stage("templates", count)

        async def work(scenario: Scenario) -> EnvOutcome:
            return await build_and_verify(scenario, self.gateway, self.settings, self.out, store=self.store,
                                          pool=self.pool, progress=progress, executor=self.executor)

        try:
            result = await schedule(
                self.target, parallel=self.settings.parallel_envs, provision=self.provision, work=work,
                cap=max(self.target, math.ceil(self.target * self.settings.build_attempts_per_env)),
                budget_reached=lambda: self.gateway.usage.budget_reached, on_queue=queued)
        finally:
            if self.embedder is not None:
                self.embedder.close()
            if self.executor is not None:
                self.executor.drain()  # calls remote workers made, into the store before the summary
        return self.summary(result.outcomes, result.stop_reason, result.started)

    # ------------------------------------------------------------------ summary

    def stop_message(self, reason: str, verified: int, earlier: int, started: int) -> str:
        wanted = f"{verified} of {self.target} wanted verified env(s)"
        if verified > self.target:
            wanted = (f"{verified} verified env(s), {self.target} wanted (the others were already being built "
                      "when the last wanted one verified)")
        if earlier:
            wanted += f" ({earlier} from an earlier attempt of this run, same seeds, counted toward -n)"
        if reason == REACHED:
            return f"{wanted}: done"
        if reason == BUDGET and self.gateway.usage.halted:
            return f"{wanted}: {self.gateway.usage.halted}"
        if reason == BUDGET:
            return (f"{wanted}: the budget of ${self.settings.max_cost or 0:.2f} was reached, so no new work was "
                    "started; rerun the same command with a higher --max-cost to continue")
        if reason == CAP:
            return (f"{wanted}: stopped after building {started} scenario(s), the cap of "
                    f"--build-attempts-per-env {self.settings.build_attempts_per_env:g} x {self.target}; "
                    "the failures by reason say why so many failed")
        failed = len(self.scenarios.failures)
        if failed:
            return (f"{wanted}: no more unique scenarios ({started} built): {failed} scenario model call(s) "
                    "failed for good (the failures by reason say why); fix that, add seeds (--seeds) or lower "
                    "--dedup-threshold")
        return (f"{wanted}: the seeds gave no more unique scenarios ({started} built); add seeds "
                "(--seeds) or lower --dedup-threshold")

    def summary(self, outcomes: list[EnvOutcome], stop_reason: str, started: int) -> dict[str, Any]:
        usage = self.store.usage()
        scen = self.scenarios
        verified = [o for o in outcomes if o.status == "verified"]
        earlier = sum(o.resumed for o in verified)
        built = [o for o in outcomes if o.stage == "verify" or o.status == "verified"]
        groups: dict[str, list[str]] = defaultdict(list)  # masked reason -> items
        shown: dict[str, str] = {}  # masked reason -> the first member's reason, whole

        def add(where: str, reason: str | None, item: str) -> None:
            key = f"{where}: {reason_group(reason)}"
            shown.setdefault(key, f"{where}: {shown_reason(reason)}")
            groups[key].append(item)

        for r in scen.rejected:
            if r.stage != "surplus":
                add(r.stage, r.reason, r.scenario.name)
        for f in scen.failures:
            add(f.stage, f.error, f.item_id)
        for o in outcomes:
            if o.status != "verified":
                add(f"{o.stage} {o.status}", o.reason, o.env_id)
        total = usage["total"]
        n_ver = len(verified)
        stopped = stop_reason == BUDGET and not self.gateway.usage.halted
        summary = {
            "run_id": self.run_id,
            "model": self.settings.model,
            "wanted": self.target,
            "funnel": {
                "seeds": len(self.all_seeds), "candidates": scen.candidates, "crud_able": scen.crud_able,
                "unique": len(scen.kept), "built": len(built), "verified": n_ver,
            },
            "verified_earlier": earlier,
            "stop_reason": stop_reason,
            "stop_message": self.stop_message(stop_reason, n_ver, earlier, started),
            "existing_in_folder": len(self.existing),
            # keyed by the first member's whole reason; "similar" ones differ only in numbers and names
            "failures": {shown[k]: {"count": len(v), "examples": v[:5]} for k, v in
                         sorted(groups.items(), key=lambda kv: -len(kv[1]))},
            "usage": usage,
            "per_verified_env": {
                "tokens": (total["prompt_tokens"] + total["completion_tokens"]) / n_ver if n_ver else None,
                # with the cached answers at what they cost when first asked: the env's cost from scratch
                "tokens_with_reused": (total["prompt_tokens"] + total["completion_tokens"] + total["reused_tokens"])
                / n_ver if n_ver else None,
                "cost": total["cost"] / n_ver if n_ver else None,
            },
            "budget_stopped": stopped,
            "budget_message": (f"the budget of ${self.settings.max_cost:.2f} was reached: no new work was started; "
                               "rerun the same command with a higher --max-cost to continue") if stopped else None,
            "envs": [asdict(o) for o in outcomes],
            "paths": {"envs": str(self.out / "envs"), "failed": str(self.out / "failed"), "run": str(self.store.dir)},
            "elapsed_seconds": round(time.monotonic() - self.started, 1),
        }
        write_json_atomic(self.store.dir / "summary.json", summary, sort_keys=False)
        return summary

    def execute(self, progress: Progress) -> dict[str, Any]:
        """Run to the end on `settings.executor`, locally with a sandbox pool of its own (unless given one);
        closes the pipeline."""
        from synth.pipeline.executor import open_executor

        own_pool = self.pool is None and self.settings.executor == "local"
        if own_pool:
            self.pool = pipeline_pool(self.settings)
        try:
            self.executor = open_executor(self.settings, gateway=self.gateway, out=self.out, store=self.store,
                                          pool=self.pool)
            return asyncio.run(with_sandbox_threads(self.run(progress)))
        finally:
            if self.executor is not None:
                self.executor.close()
            self.close()
            if own_pool:
                self.pool.close()

    def close(self) -> None:
        self.store.close()


def run_pipeline(seeds: list[Seed], n: int, settings: Settings, progress: Progress | None = None, *,
                 one_scenario_per_seed: bool = False) -> dict[str, Any]:
    """Synthesize until `n` envs are verified (or a stop applies); returns the summary."""
    pipeline = Pipeline(seeds, n, settings, one_scenario_per_seed=one_scenario_per_seed)
    return pipeline.execute(progress or Progress())


__all__ = ["BUDGET", "CAP", "EXHAUSTED", "REACHED", "EnvOutcome", "Pipeline", "build_and_verify", "build_then_verify",
           "run_pipeline"]
