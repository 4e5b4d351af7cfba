"""Build env folders from scenarios: tasks -> schema -> data -> tool spec -> tool code.

Each stage validates its artifact by executing it and repairs it from concrete
errors (synth/pipeline/stages/build/*). A scenario whose repairs run out is written as a
`failed` env under <out>/failed/<env_id>/ with its reason and every stage's
report, and the next scenario goes on; a built env goes to <out>/built/<env_id>/
with status `built` (verification later adds gold solutions, verifiers and
gates and turns it into `verified`, moved to <out>/envs/, or `failed`; see
synth/pipeline/layout.py).

Resume: an env whose folder is already in <out>/envs/ or <out>/built/ is skipped (and, with a
run store, so is one whose build failed on its last allowed attempt). A retry
after a quality failure asks for fresh answers (the next cache `sample`), since
the cached ones would fail the same way; a retry after a transient model error
or a budget stop reuses the cached answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from synth.artifacts import ActingUser, Rules, Scenario, Task, ToolSpec
from synth.config import Settings
from synth.errors import InputError, SynthError
from synth.folder.files import read_env_json
from synth.folder.format import DEFAULT_TODAY, EnvDraft, EnvFolderError, write_env
from synth.llm import BudgetExceeded, Gateway, StructuredOutputError
from synth.pipeline.layout import built_path, env_path, failed_path
from synth.pipeline.stages.build.data import generate_data, table_order
from synth.pipeline.stages.envcontext import EnvContext
from synth.pipeline.stages.repair import StageFailed, StageReport
from synth.pipeline.stages.build.schema import generate_schema
from synth.pipeline.stages.build.tasks import generate_tasks
from synth.pipeline.stages.build.tool_code import generate_tool_code, tool_draft
from synth.pipeline.stages.build.tool_spec import generate_tool_spec
from synth.pipeline.store import RunStore

STORE_STAGE = "build"  # run-store item per env: stage "build", item id = env_id
BUILD_ATTEMPTS = 2  # a failed build is retried once by rerunning the same command
STAGES = ("tasks", "schema", "data", "tool_spec", "tool_code")

BuildStatus = Literal["built", "verified", "failed", "stopped"]


class BuildResult(BaseModel):
    env_id: str
    status: BuildStatus  # stopped: the budget ran out before or while building it
    path: Path | None = None
    reason: str | None = None
    counts: dict[str, int] = Field(default_factory=dict)
    report: dict[str, Any] = Field(default_factory=dict)
    resumed: bool = False  # taken from an earlier run, not built now


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        return read_env_json(folder, "env.json")
    except SynthError:
        return None


def _next_sample(out_dir: Path, env_id: str) -> int:
    """The cache sample to ask with: one more than the last quality-failed build's, if any."""
    previous = _manifest(failed_path(out_dir, env_id))
    build = ((previous or {}).get("report") or {})
    sample, fresh = build.get("sample"), build.get("retry_fresh")
    if isinstance(sample, int):
        return sample + (1 if fresh else 0)
    return 0


class _Build:
    """The state of one scenario's build, so a failure at any stage can still be written out."""

    def __init__(self, scenario: Scenario, gateway: Gateway, settings: Settings, sample: int):
        self.scenario, self.gateway, self.settings, self.sample = scenario, gateway, settings, sample
        self.reports = {stage: StageReport() for stage in STAGES}
        self.stage = STAGES[0]
        self.tasks: list[Task] = []
        self.schema_sql = self.data_sql = ""
        self.db_bytes: bytes | None = None
        self.tools: list[ToolSpec] = []
        self.bodies: dict[str, str] = {}
        self.today = DEFAULT_TODAY
        self.rules: Rules | None = None
        self.acting_user: ActingUser | None = None

    async def run(self, pool: Any) -> None:
        gw, sc, rounds = self.gateway, self.scenario, self.settings.build_repair_rounds
        self.stage = "tasks"
        self.tasks = await generate_tasks(sc, gw, report=self.reports["tasks"], sample=self.sample)
        self.stage = "schema"
        schema = await generate_schema(sc, self.tasks, gw, rounds=rounds, report=self.reports["schema"],
                                       sample=self.sample, today=self.today)
        self.schema_sql, self.rules = schema.ddl, schema.rules
        self.stage = "data"
        data = await generate_data(sc, self.tasks, self.schema_sql, gw, rounds=rounds, report=self.reports["data"],
                                   sample=self.sample, rules=schema.rules, today=self.today,
                                   acting_table=schema.acting_table, acting_role=schema.acting_role)
        self.data_sql, self.db_bytes, self.rules, self.acting_user = (data.data_sql, data.db_bytes, data.rules,
                                                                      data.acting_user)
        self.stage = "tool_spec"
        context = EnvContext(scenario=sc, today=self.today, schema_sql=self.schema_sql, acting_user=self.acting_user,
                             rules=self.rules)
        self.tools = await generate_tool_spec(context, self.tasks, gw, report=self.reports["tool_spec"],
                                              sample=self.sample, order=table_order(self.schema_sql)[0])
        self.stage = "tool_code"
        draft = tool_draft(sc, self.tasks, self.schema_sql, self.data_sql, self.tools, **self._env())
        await generate_tool_code(draft, self.db_bytes, gw, pool=pool, rounds=rounds, report=self.reports["tool_code"],
                                 sample=self.sample, bodies=self.bodies)

    def _env(self) -> dict[str, Any]:
        return {"today": self.today, "acting_user": self.acting_user, "rules": self.rules}

    def report(self, status: str, seconds: float, *, retry_fresh: bool = False) -> dict[str, Any]:
        return {
            "status": status, "failed_stage": None if status == "built" else self.stage,
            "model": self.gateway.model, "sample": self.sample, "retry_fresh": retry_fresh,
            "build_seconds": round(seconds, 2), **{k: r.model_dump() for k, r in self.reports.items()},
        }

    def draft(self, status: str, report: dict[str, Any], reason: str | None = None) -> EnvDraft:
        return EnvDraft(
            env_id=self.scenario.env_id, title=self.scenario.name, scenario=self.scenario,
            schema_sql=self.schema_sql, data_sql=self.data_sql, tools=self.tools,
            tool_bodies={t.name: self.bodies[t.name] for t in self.tools if t.name in self.bodies},
            tasks=self.tasks, model=self.gateway.model, status=status, report=report, failure_reason=reason,
            **self._env(),
        )


def _write_failed(build: _Build, out_dir: Path, reason: str, report: dict[str, Any]) -> Path:
    dest = failed_path(out_dir, build.scenario.env_id)
    try:
        return write_env(build.draft("failed", report, reason), dest)
    except (EnvFolderError, SynthError, ValueError):
        # What was generated cannot even be rendered: keep the reason and the report.
        bare = build.draft("failed", report, reason).model_copy(update={"tools": [], "tool_bodies": {}})
        return write_env(bare, dest)


def _counts(folder: Path) -> dict[str, int]:
    return dict((_manifest(folder) or {}).get("counts") or {})


async def build_env(
    scenario: Scenario, gateway: Gateway, settings: Settings, out_dir: Path | str, *,
    store: RunStore | None = None, pool: Any = None,
) -> BuildResult:
    """Build one scenario's env folder; never raises for a model or validation failure.

    Returns status "built" (folder in <out>/built/; envs/ holds verified envs only), "failed" (folder in <out>/failed/,
    with the reason) or "stopped" (the budget ran out; nothing written).
    """
    out_dir, env_id = Path(out_dir), scenario.env_id
    own_pool = pool is None
    if own_pool:
        from synth.runtime.sandbox import SandboxPool

        pool = SandboxPool(workers=1, call_timeout=settings.tool_timeout)
    build = _Build(scenario, gateway, settings, _next_sample(out_dir, env_id))
    if store is not None:
        store.start(STORE_STAGE, env_id)
    started = time.monotonic()
    try:
        await build.run(pool)
        build.stage = "write"
        report = build.report("built", time.monotonic() - started)
        folder = write_env(build.draft("built", report), built_path(out_dir, env_id), db_bytes=build.db_bytes)
    except BudgetExceeded as exc:
        reason = f"stopped at {build.stage}: {exc}"
        if store is not None:
            store.fail(STORE_STAGE, env_id, reason)
        return BuildResult(env_id=env_id, status="stopped", reason=reason)
    except Exception as exc:  # noqa: BLE001 - an item's failure is recorded, never stops the stage
        quality = isinstance(exc, (StageFailed, StructuredOutputError))
        if isinstance(exc, StageFailed) or str(exc).startswith(f"{build.stage}:"):
            reason = str(exc)
        elif isinstance(exc, SynthError):
            reason = f"{build.stage}: {exc}"
        else:
            reason = f"{build.stage}: internal error: {type(exc).__name__}: {exc}"
        report = build.report("failed", time.monotonic() - started, retry_fresh=quality)
        folder = _write_failed(build, out_dir, reason, report)
        if store is not None:
            store.fail(STORE_STAGE, env_id, reason)
        return BuildResult(env_id=env_id, status="failed", path=folder, reason=reason, counts=_counts(folder),
                           report=report)
    finally:
        if own_pool:
            pool.close()
    shutil.rmtree(failed_path(out_dir, env_id), ignore_errors=True)  # an earlier failure is superseded
    if store is not None:
        store.finish(STORE_STAGE, env_id, {"status": "built", "path": str(folder)})
    return BuildResult(env_id=env_id, status="built", path=folder, counts=_counts(folder), report=report)


def _previous(scenario: Scenario, out_dir: Path, store: RunStore | None) -> BuildResult | None:
    """The result of an earlier run for this scenario when it should not be built again:
    its env folder exists, or (with a store) its build failed on the last allowed attempt."""
    env_id = scenario.env_id
    done = env_path(out_dir, env_id)
    manifest = _manifest(done)
    if manifest is None:  # built by an earlier run, not verified yet
        done = built_path(out_dir, env_id)
        manifest = _manifest(done)
    if manifest is not None:
        return BuildResult(env_id=env_id, status=manifest.get("status", "built"), path=done,
                           reason=manifest.get("failure_reason"), counts=_counts(done), resumed=True)
    row = store.get(STORE_STAGE, env_id) if store is not None else None
    if row and row["status"] == "failed" and row["attempts"] >= BUILD_ATTEMPTS:
        failed = failed_path(out_dir, env_id)
        return BuildResult(env_id=env_id, status="failed", path=failed if failed.exists() else None,
                           reason=row.get("error"), counts=_counts(failed), resumed=True)
    return None


async def build_all(
    scenarios: Iterable[Scenario], gateway: Gateway, settings: Settings, out_dir: Path | str, *,
    store: RunStore | None = None, pool: Any = None, parallel: int | None = None,
    on_result: Callable[[BuildResult], None] | None = None,
) -> list[BuildResult]:
    """Build every scenario, at most `parallel` (default settings.concurrency) at a time.

    Results come back in input order; `on_result` sees each as it is ready. Once the
    budget is spent no new build starts: the rest are returned as "stopped".
    """
    scenarios = list(scenarios)
    seen: dict[str, str] = {}
    for sc in scenarios:
        if sc.env_id in seen:
            raise InputError(f"scenarios {seen[sc.env_id]!r} and {sc.name!r} both get env id {sc.env_id!r}; "
                             "rename one of them")
        seen[sc.env_id] = sc.name
    out_dir = Path(out_dir)
    own_pool = pool is None
    if own_pool:
        from synth.runtime.sandbox import SandboxPool

        pool = SandboxPool(workers=max(1, min(2, os.cpu_count() or 1)), call_timeout=settings.tool_timeout)
    limit = asyncio.Semaphore(parallel or settings.concurrency)
    stop = asyncio.Event()

    async def one(scenario: Scenario) -> BuildResult:
        async with limit:
            result = _previous(scenario, out_dir, store)
            if result is None and (stop.is_set() or gateway.usage.budget_reached):
                stop.set()
                result = BuildResult(env_id=scenario.env_id, status="stopped", reason="the budget was spent "
                                     "before this env started; raise --max-cost and rerun to continue")
            if result is None:
                result = await build_env(scenario, gateway, settings, out_dir, store=store, pool=pool)
                if result.status == "stopped":
                    stop.set()
        if on_result is not None:
            on_result(result)
        return result

    try:
        return list(await asyncio.gather(*(one(sc) for sc in scenarios)))
    finally:
        if own_pool:
            pool.close()


def load_scenarios(path: Path | str) -> list[Scenario]:
    """Scenarios from a JSONL file (one object per line with name, description, category, seed).

    Other keys on a line (written by earlier stages) are ignored; a malformed line is an
    InputError naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"scenario file not found: {path}; pass a JSONL file of scenarios (e.g. from "
                         "`synth scenarios`)")
    scenarios = []
    fields = set(Scenario.model_fields)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not valid JSON ({exc.msg}); each line must be one scenario "
                             "object") from None
        if not isinstance(data, dict):
            raise InputError(f"{path}:{number}: expected a JSON object with name, description and category")
        try:
            scenarios.append(Scenario.model_validate({k: v for k, v in data.items() if k in fields}))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "line"
            raise InputError(f"{path}:{number}: {where}: {err['msg']}; each scenario needs name, description "
                             "and category") from None
    if not scenarios:
        raise InputError(f"{path} holds no scenarios; add one JSON object per line")
    return scenarios
