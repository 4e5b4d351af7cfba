"""Verification of built env folders.

`verify_env` (needs a model): gold solutions + verifiers for tasks that lack
them, the check loop (tests, judgements, repairs, gates), then the final status:
`verified` only when the loop ends with the test pass rate reached and every
gate passing. Tasks that still fail after the last round are dropped (kept in
report.json with their reasons) when that leaves at least half of them and
every other criterion passes; otherwise the env is `failed` with its reasons.

`check_env` (no model): every gate, including the replay of tests.jsonl; it
updates report.json and env.json's status.

Run-store items: stage "verify", item id = the env id (when a store is given).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from synth.artifacts import EnvStatus, GateResult
from synth.atomic import write_json_atomic
from synth.config import Settings
from synth.errors import InputError
from synth.folder.files import EnvFileMissing, foreign_entries, read_env_bytes, read_env_json
from synth.folder.format import EnvDraft, read_env_draft, write_env
from synth.llm import BudgetExceeded, Gateway
from synth.pipeline.stages.check.loop import TASK_GATES, CheckLoopResult, can_drop, run_check_loop
from synth.pipeline.store import RunStore

STAGE = "verify"


class VerifyResult(BaseModel):
    env_id: str
    path: str
    status: EnvStatus
    pass_rate: float | None = None
    gates: list[GateResult] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    dropped_tasks: dict[str, list[str]] = Field(default_factory=dict)
    budget_stopped: bool = False
    skipped: bool = False

    @property
    def verified(self) -> bool:
        return self.status == "verified"


class CheckResult(BaseModel):
    env_id: str
    path: str
    status: EnvStatus
    gates: list[GateResult]
    reasons: list[str] = Field(default_factory=list)

    @property
    def verified(self) -> bool:
        return self.status == "verified"


def gates_report(gates: list[GateResult]) -> dict[str, Any]:
    results = {g.name: g.model_dump(mode="json", exclude={"name"}) for g in gates}
    for result in results.values():
        result["details"].pop("probes", None)  # kept once, as report.json `probes`
        result["details"].pop("exploits", None)  # kept as verifier_tests.jsonl cases by the check loop
    return {"passed": bool(gates) and all(g.passed for g in gates), "results": results}


def probes_report(gates: list[GateResult]) -> dict[str, Any] | None:
    """report.json `probes`: {task_id: [{"probe", "reward", "passed", "detail"}]} from the probes gate."""
    gate = next((g for g in gates if g.name == "probes"), None)
    return None if gate is None or "probes" not in gate.details else gate.details["probes"]


def gate_reasons(gates: list[GateResult]) -> list[str]:
    return [f"gate {g.name}: " + "; ".join(g.evidence[:5]) for g in gates if not g.passed]


# --------------------------------------------------------------------------- no model


def check_env(env_dir: Path | str, *, pool: Any = None, settings: Settings | None = None) -> CheckResult:
    """Run every gate on an env folder with no model; record the result in report.json and env.json."""
    from synth_validators import run_all

    root = Path(env_dir)
    settings = settings or Settings()
    foreign = foreign_entries(root)
    if foreign:  # refused before any work, and nothing is written into the folder
        raise InputError(f"{'; '.join(foreign[:3])}{' (+more)' if len(foreign) > 3 else ''}; env folders must "
                         "hold regular files only, copy the real files in")
    gates = run_all(root, pool=pool, required_rate=settings.check_pass_rate, settings=settings)
    passed = all(g.passed for g in gates)
    reasons = gate_reasons(gates)
    manifest = read_env_json(root, "env.json")
    # A built env that has not been through `synth verify` yet stays `built`: failing the
    # gates before its check loop ran says nothing new about it.
    status: EnvStatus = "verified" if passed else ("built" if manifest.get("status") == "built" else "failed")
    _record_status(root, status, gates, reasons)
    return CheckResult(env_id=manifest.get("id", root.name), path=str(root), status=status, gates=gates,
                       reasons=reasons)


def _previous_report(root: Path) -> dict:
    """report.json as a regular file of the folder holds it ({} when missing or not a JSON object).
    A symlink, FIFO or device in its place raises: synth check never reads through it, and never
    copies what it points to into the folder."""
    try:
        data = read_env_bytes(root, "report.json")
    except EnvFileMissing:
        return {}
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return {}  # damaged: rewritten from scratch
    return report if isinstance(report, dict) else {}


def _record_status(root: Path, status: EnvStatus, gates: list[GateResult], reasons: list[str]) -> None:
    """Update report.json, then env.json, each atomically (env.json's status is what readers trust).
    Both are written fresh (temp file + rename), replacing whatever was at their path."""
    report = _previous_report(root)
    report["gates"] = gates_report(gates)
    report["probes"] = probes_report(gates)
    report["status"] = status
    report["failure_reasons"] = reasons
    write_json_atomic(root / "report.json", report)
    manifest = read_env_json(root, "env.json")
    manifest["status"] = status
    manifest["failure_reason"] = "; ".join(reasons)[:2000] if reasons else None
    summary = manifest.get("report") if isinstance(manifest.get("report"), dict) else {}
    manifest["report"] = {**summary, "gates": report["gates"]["passed"], "status": status}
    write_json_atomic(root / "env.json", manifest)


# --------------------------------------------------------------------------- with a model


def _drop_failing_tasks(loop: CheckLoopResult, settings: Settings) -> dict[str, list[str]]:
    """Tasks to drop so the rest can ship, or {} when dropping would not be enough or too much."""
    if loop.budget_stopped or loop.pass_rate < settings.check_pass_rate:
        return {}
    blamed: dict[str, list[str]] = {}
    for gate in loop.gates:
        if gate.passed:
            continue
        if gate.name not in TASK_GATES or any(not e.startswith("task ") for e in gate.evidence):
            return {}  # a tool, database or env-wide problem: dropping tasks would not fix it
        for task_id, problems in gate.details.get("tasks", {}).items():
            blamed.setdefault(task_id, []).extend(f"{gate.name}: {p}" for p in problems)
    return blamed if blamed and can_drop(len(loop.draft.tasks), len(blamed)) else {}


def _finish(draft: EnvDraft, env_dir: Path, status: EnvStatus, reasons: list[str]) -> None:
    draft.status = status
    draft.failure_reason = "; ".join(reasons)[:2000] if reasons else None
    draft.report["status"] = status
    draft.report["failure_reasons"] = reasons
    write_env(draft, env_dir)


async def verify_env(env_dir: Path | str, gateway: Gateway, settings: Settings, *, store: RunStore | None = None,
                     pool: Any = None) -> VerifyResult:
    """Gold + verifiers where missing, the check loop, the gates, and the env's final status.

    A BudgetExceeded ends cleanly: the work done so far is written, the env stays
    `built`, and the result says the budget stopped it (rerun to continue)."""
    root = Path(env_dir)
    draft = read_env_draft(root)
    if store is not None and store.is_done(STAGE, draft.env_id):
        return VerifyResult(env_id=draft.env_id, path=str(root), status=draft.status, skipped=True)
    verified_before = "check_loop" in draft.report or "gates" in draft.report
    if draft.status == "failed" and not verified_before:
        raise InputError(f"{root}: the build of this env failed ({draft.failure_reason}); rebuild it first")
    if store is not None:
        store.start(STAGE, draft.env_id)
    try:
        result = await _verify(draft, root, gateway, settings, pool)
    except Exception as exc:
        if store is not None:
            store.fail(STAGE, draft.env_id, str(exc))
        raise
    if store is not None:
        if result.budget_stopped:
            store.fail(STAGE, draft.env_id, "; ".join(result.reasons) or "budget reached")
        else:
            store.finish(STAGE, draft.env_id, {"status": result.status, "pass_rate": result.pass_rate})
    return result


async def _verify(draft: EnvDraft, root: Path, gateway: Gateway, settings: Settings, pool: Any) -> VerifyResult:
    from synth_validators import run_all

    result = VerifyResult(env_id=draft.env_id, path=str(root), status="built")
    before = gateway.usage.env(draft.env_id)
    draft.status, draft.failure_reason = "built", None  # until this run decides
    try:
        # The loop writes the gold solutions beside its first tests (stages/check/loop.py).
        loop = await run_check_loop(draft, root, gateway, settings, pool=pool)
    except BudgetExceeded as exc:
        draft.report["budget_stopped"] = str(exc)
        write_env(draft, root)
        return result.model_copy(update={"budget_stopped": True, "reasons": [str(exc)]})
    draft = loop.draft
    if loop.gold is not None and loop.gold.tasks:
        draft.report["gold"] = loop.gold.model_dump(mode="json")
    draft.report["check_loop"] = {
        "passed": loop.passed, "pass_rate": loop.pass_rate, "rounds": [r.model_dump(mode="json") for r in loop.rounds],
        "reasons": loop.reasons, "judge_model": loop.judge_model, "generator_model": gateway.model,
    }
    after = gateway.usage.env(draft.env_id)
    draft.report["verify_usage"] = {  # this env's calls only, though envs in flight share the gateway
        "cost": round(after.cost - before.cost, 6),
        "prompt_tokens": after.prompt_tokens - before.prompt_tokens,
        "completion_tokens": after.completion_tokens - before.completion_tokens,
        "cached_tokens": after.cached_tokens - before.cached_tokens,
        "reused_tokens": after.reused_tokens - before.reused_tokens,
    }
    if loop.budget_stopped:
        draft.report["budget_stopped"] = loop.reasons[0] if loop.reasons else "budget reached"
        write_env(draft, root)
        return result.model_copy(update={"budget_stopped": True, "reasons": loop.reasons,
                                         "pass_rate": loop.pass_rate, "gates": loop.gates})
    gates, reasons, dropped = loop.gates, loop.reasons, {}
    if not loop.passed and (dropped := _drop_failing_tasks(loop, settings)):
        draft.tasks = [t for t in draft.tasks if t.task_id not in dropped]
        draft.verifier_bodies = {k: v for k, v in draft.verifier_bodies.items() if k not in dropped}
        draft.verifier_tests = [c for c in draft.verifier_tests if c.get("task_id") not in dropped]
        draft.report["dropped_tasks"] = dropped
        write_env(draft, root)
        gates = run_all(root, pool=pool, required_rate=settings.check_pass_rate, settings=settings)
        reasons = gate_reasons(gates)
    passed = bool(gates) and all(g.passed for g in gates) and loop.pass_rate >= settings.check_pass_rate
    status: EnvStatus = "verified" if passed else "failed"
    draft.report["gates"] = gates_report(gates)
    draft.report["probes"] = probes_report(gates)
    _finish(draft, root, status, [] if passed else reasons)
    return result.model_copy(update={"status": status, "pass_rate": loop.pass_rate, "gates": gates,
                                     "reasons": [] if passed else reasons, "dropped_tasks": dropped})
