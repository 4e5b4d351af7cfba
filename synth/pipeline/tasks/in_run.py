"""The tasks step in `synth run`: after an env is verified, tasks from templates (step.py), recorded in the run
store so a rerun does not repeat it. The step never fails the env: if it fails, the env keeps its tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.config import Settings
from synth.errors import SynthError
from synth.llm import Gateway
from synth.pipeline.tasks.outcome import TasksResult
from synth.pipeline.tasks.step import add_tasks

STORE_STAGE = "templates"  # run-store item per env in `synth run`


async def run_step(env_dir: Path, gateway: Gateway, settings: Settings, *, store: Any = None, pool: Any = None,
                   progress: Any = None) -> TasksResult | None:
    """`synth run`'s tasks step for a verified env: never fails the env (it keeps the tasks it has when the step
    fails), resumed from the run store. None when an earlier attempt of the run did it."""
    env_id = Path(env_dir).name
    if store is not None and store.is_done(STORE_STAGE, env_id):
        if progress is not None:
            progress.finished(STORE_STAGE, True)
        return None
    if progress is not None:
        progress.started(STORE_STAGE)
    if store is not None:
        store.start(STORE_STAGE, env_id)
    try:
        result = await add_tasks(env_dir, gateway, settings, pool=pool)
    except SynthError as exc:
        if store is not None:
            store.fail(STORE_STAGE, env_id, str(exc))
        if progress is not None:
            progress.finished(STORE_STAGE, False)
        return None
    if store is not None:
        store.finish(STORE_STAGE, env_id, {"added": result.added, "tokens_per_task": result.tokens_per_task})
    if progress is not None:
        progress.finished(STORE_STAGE, result.added > 0)
    return result
