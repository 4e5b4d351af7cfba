"""`synth run`: seeds -> scenarios -> build -> verify, resumable, with a funnel summary.

Stage order: the scenario stage (expand + classify + dedup) is a barrier over
all candidates; then each unique scenario is built and verified, several at a
time. Every step is an item in the run store and every model answer is cached,
so rerunning the same command skips finished items and repeats no paid call.

Where envs land: verified ones in <out>/envs/<env_id>/, failed ones (build or
verification) in <out>/failed/<env_id>/ with their reasons in env.json and
report.json. The run folder <out>/runs/<run_id>/ holds config.json,
run.sqlite, scenarios.jsonl, scenarios.rejected.jsonl and summary.json.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synth.artifacts import Scenario, Seed
from synth.build import build_env, env_path, failed_path
from synth.config import Settings
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.progress import Progress
from synth.scenario_files import load_existing, write_jsonl
from synth.scenarios import generate_scenarios
from synth.store import RunStore, derive_run_id, write_json_atomic
from synth.verify import verify_env

SCENARIO_ITEM = ("scenarios", "all")


@dataclass
class EnvOutcome:
    env_id: str
    status: str  # verified | failed | stopped
    stage: str  # where it ended: build | verify
    path: str | None
    reason: str | None = None


def run_id_for(seeds: list[Seed], n: int, settings: Settings) -> str:
    return settings.run_id or derive_run_id({
        "command": "run", "seeds": [s.model_dump() for s in seeds], "n": n,
        "model": settings.model, "out": str(Path(settings.out).resolve()),
    })


def _move_to_failed(out: Path, env_dir: Path, env_id: str) -> Path:
    """Failed envs are kept apart from verified ones so a trainer can take envs/ as it is."""
    dest = failed_path(out, env_id)
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    env_dir.rename(dest)
    return dest


def reason_group(reason: str | None) -> str:
    """A key to group failures by: the reason with names, numbers and paths masked."""
    text = (reason or "unknown").strip().split(" in /")[0]
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return text[:90]


class Pipeline:
    def __init__(self, seeds: list[Seed], n: int, settings: Settings, progress: Progress, *, pool: Any = None):
        self.seeds, self.n, self.settings, self.progress = seeds, n, settings, progress
        self.out = Path(settings.out)
        self.run_id = run_id_for(seeds, n, settings)
        self.store = RunStore.open(self.out, self.run_id)
        self.gateway = Gateway(settings, recorder=self.store, spent_before=self.store.usage()["total"]["cost"])
        self.pool = pool
        self.started = time.monotonic()
        progress.usage = lambda: self.store.usage()["total"]

    # ------------------------------------------------------------------ scenarios

    async def scenarios(self) -> dict[str, Any]:
        done = self.store.get(*SCENARIO_ITEM)
        if done and done["status"] == "done":
            self.progress.stage("scenarios", len(done["output"]["kept"]))
            for _ in done["output"]["kept"]:
                self.progress.finished("scenarios", True)
            return done["output"]
        self.progress.stage("scenarios", self.n)
        self.progress.started("scenarios")
        self.store.start(*SCENARIO_ITEM)
        result = await generate_scenarios(self.seeds, self.n, self.gateway, self.settings,
                                          existing=load_existing(self.out), store=self.store)
        self.progress.finished("scenarios", bool(result.kept))
        write_jsonl(self.store.dir / "scenarios.jsonl", (s.model_dump() for s in result.kept))
        write_jsonl(self.store.dir / "scenarios.rejected.jsonl", (r.model_dump() for r in result.rejected))
        output = {
            "kept": [s.model_dump() for s in result.kept], "candidates": result.candidates,
            "crud_able": result.crud_able,
            "rejected": [{"stage": r.stage, "reason": r.reason, "name": r.scenario.name} for r in result.rejected],
            "failures": [{"stage": f.stage, "item": f.item_id, "reason": f.error} for f in result.failures],
            "budget_stopped": result.budget_stopped,
        }
        if result.budget_stopped:
            self.store.fail(*SCENARIO_ITEM, result.budget_message or "budget reached")
        else:
            self.store.finish(*SCENARIO_ITEM, output)
        return output

    # ------------------------------------------------------------------ build + verify

    async def one_env(self, scenario: Scenario, limit: asyncio.Semaphore) -> EnvOutcome:
        async with limit:
            env_id = scenario.env_id
            final = env_path(self.out, env_id)
            if final.exists() and _status(final) == "verified":
                self.progress.finished("build", True)
                self.progress.finished("verify", True)
                return EnvOutcome(env_id, "verified", "verify", str(final))
            if self.gateway.usage.budget_reached:
                return EnvOutcome(env_id, "stopped", "build", None, "budget reached before this env started")
            self.progress.started("build")
            built = await build_env(scenario, self.gateway, self.settings, self.out, store=self.store, pool=self.pool)
            self.progress.finished("build", built.status == "built")
            if built.status != "built":
                return EnvOutcome(env_id, built.status, "build", str(built.path) if built.path else None, built.reason)
            self.progress.started("verify")
            try:
                verified = await verify_env(built.path, self.gateway, self.settings, store=self.store, pool=self.pool)
            except BudgetExceeded as exc:
                self.progress.finished("verify", False)
                return EnvOutcome(env_id, "stopped", "verify", str(built.path), str(exc))
            except ModelError as exc:  # an item failure: keep the env apart with its reason
                self.progress.finished("verify", False)
                return EnvOutcome(env_id, "failed", "verify", str(_move_to_failed(self.out, built.path, env_id)),
                                  str(exc))
            self.progress.finished("verify", verified.verified)
            if verified.budget_stopped:
                return EnvOutcome(env_id, "stopped", "verify", str(built.path), "; ".join(verified.reasons))
            if not verified.verified:
                moved = _move_to_failed(self.out, built.path, env_id)
                return EnvOutcome(env_id, "failed", "verify", str(moved), "; ".join(verified.reasons))
            return EnvOutcome(env_id, "verified", "verify", str(built.path))

    async def run(self) -> dict[str, Any]:
        self.store.write_config({**self.settings.public_dict(), "seeds": len(self.seeds), "n": self.n})
        scen = await self.scenarios()
        kept = [Scenario(**s) for s in scen["kept"]]
        self.progress.stage("build", len(kept))
        self.progress.stage("verify", len(kept))
        limit = asyncio.Semaphore(self.settings.parallel_envs)
        outcomes = list(await asyncio.gather(*(self.one_env(s, limit) for s in kept)))
        return self.summary(scen, outcomes)

    # ------------------------------------------------------------------ summary

    def summary(self, scen: dict[str, Any], outcomes: list[EnvOutcome]) -> dict[str, Any]:
        usage = self.store.usage()
        verified = [o for o in outcomes if o.status == "verified"]
        built = [o for o in outcomes if o.stage == "verify" or o.status == "verified"]
        groups: dict[str, list[str]] = defaultdict(list)
        for r in scen["rejected"]:
            groups[f"{r['stage']}: {reason_group(r['reason'])}"].append(r["name"])
        for f in scen["failures"]:
            groups[f"{f['stage']}: {reason_group(f['reason'])}"].append(f["item"])
        for o in outcomes:
            if o.status != "verified":
                groups[f"{o.stage} {o.status}: {reason_group(o.reason)}"].append(o.env_id)
        total = usage["total"]
        n_ver = len(verified)
        stopped = bool(scen.get("budget_stopped")) or any(o.status == "stopped" for o in outcomes)
        summary = {
            "run_id": self.run_id,
            "model": self.settings.model,
            "funnel": {
                "seeds": len(self.seeds), "candidates": scen["candidates"], "crud_able": scen["crud_able"],
                "unique": len(scen["kept"]), "built": len(built), "verified": n_ver,
            },
            "failures": {k: {"count": len(v), "examples": v[:5]} for k, v in
                         sorted(groups.items(), key=lambda kv: -len(kv[1]))},
            "usage": usage,
            "per_verified_env": {
                "tokens": (total["prompt_tokens"] + total["completion_tokens"]) / n_ver if n_ver else None,
                "cost": total["cost"] / n_ver if n_ver else None,
            },
            "budget_stopped": stopped,
            "budget_message": (f"the budget of ${self.settings.max_cost:.2f} was reached: no new work was started; "
                               "rerun the same command with a higher --max-cost to continue") if stopped else None,
            "envs": [o.__dict__ for o in outcomes],
            "paths": {"envs": str(self.out / "envs"), "failed": str(self.out / "failed"), "run": str(self.store.dir)},
            "elapsed_seconds": round(time.monotonic() - self.started, 1),
        }
        write_json_atomic(self.store.dir / "summary.json", summary)
        return summary

    def close(self) -> None:
        self.store.close()


def _status(env_dir: Path) -> str | None:
    try:
        return json.loads((env_dir / "env.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def run_pipeline(seeds: list[Seed], n: int, settings: Settings, progress: Progress) -> dict[str, Any]:
    from synth.runtime.sandbox import SandboxPool

    # One env per worker process: as many workers as envs in flight, so they need not wait for each other.
    pool = SandboxPool(workers=max(2, settings.parallel_envs), call_timeout=settings.tool_timeout,
                       allow_weak=settings.allow_weak_sandbox)
    pipeline = Pipeline(seeds, n, settings, progress, pool=pool)
    try:
        return asyncio.run(pipeline.run())
    finally:
        final = pipeline.store.usage()["total"]  # the display refreshes once more after the store closes
        progress.usage = lambda: final
        pipeline.close()
        pool.close()

