"""The worker side of `--executor ray`: one env's build and verify inside a Ray task.

The task gets everything as values (the scenario, the settings, the env's
folders and run-store rows from the driver, the input files the settings name)
and works in a temporary folder of its own: a private output folder and run
store seeded with what the driver sent. Its model calls go through a gateway
whose cache, budget and call records are the driver's (synth.pipeline.executor_hub).
Generated code runs in sandbox worker processes on this node, as it does
locally. It returns the outcome, the env's folders as a tar and the rows.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from synth.config import Settings
from synth.folder.pack import pack_env, unpack_env, unpack_files
from synth.llm import Gateway
from synth.llm.usage import UsageMeter
from synth.pipeline.executor_hub import HubCache, HubLedger, HubRecorder
from synth.pipeline.progress import Progress
from synth.pipeline.store import RunStore

SHIPPED = ("prices_file", "replay_file")  # settings naming input files the driver sends along
ITEM_STAGES = ("build", "verify")  # run-store stages whose rows of the env travel with it
TMP_PREFIX = "synth-task-"  # + the worker's pid: a folder whose process is gone is an orphan

_pool: tuple[tuple, Any] | None = None  # (its settings, pool): kept by the worker process across tasks
_pool_lock = threading.Lock()


def sandbox_pool(tool_timeout: float, allow_weak: bool = False) -> Any:
    """This worker process's sandbox pool for generated code (started once, like the local run's)."""
    global _pool
    from synth.runtime.sandbox import SandboxPool

    with _pool_lock:
        if _pool is None or _pool[0] != (tool_timeout, allow_weak):
            if _pool is not None:
                _pool[1].close()
            # an env's tests or solver episodes, and the trial envs of gold answers, at once (runner.pipeline_pool)
            _pool = ((tool_timeout, allow_weak), SandboxPool(workers=3, call_timeout=tool_timeout,
                                                             allow_weak=allow_weak, wait_timeout=600.0))
        return _pool[1]


def remove_orphans() -> None:
    """Remove the folders of tasks whose worker process is gone (killed mid-env: no cleanup ran)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{TMP_PREFIX}*-*"):
        pid = folder.name[len(TMP_PREFIX):].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def local_settings(settings: Settings, tmp: Path, shipped: bytes) -> Settings:
    """The settings with this worker's own paths: its output and cache folders, its copies of input files."""
    files = unpack_files(shipped, tmp / "inputs", list(SHIPPED))
    update: dict[str, Any] = {"out": tmp / "out", "cache_dir": tmp / "cache"}
    update.update({name: files.get(name) for name in SHIPPED if getattr(settings, name) is not None})
    return settings.model_copy(update=update)


def warm_up(tool_timeout: float, allow_weak: bool = False) -> None:
    """A task sent ahead of the first envs: this process imports what an env's work needs and starts its
    sandbox pool while the driver is still making scenarios."""
    import importlib

    import synth.pipeline.runner  # noqa: F401 - every stage

    for sdk in ("openai", "anthropic"):  # imported by the providers at their first call otherwise
        importlib.import_module(sdk)
    sandbox_pool(tool_timeout, allow_weak)


def run_env_task(payload: dict[str, Any], hub: Any, shipped: bytes) -> dict[str, Any]:
    """The Ray task: build and verify `payload["scenario"]`'s env (a blocking call)."""
    from synth.pipeline.runner import with_sandbox_threads

    return asyncio.run(with_sandbox_threads(_run(payload, hub, shipped)))


async def _run(payload: dict[str, Any], hub: Any, shipped: bytes) -> dict[str, Any]:
    from synth.pipeline.runner import build_then_verify

    scenario = payload["scenario"]
    env_id = scenario.env_id
    remove_orphans()
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
    store: RunStore | None = None
    try:
        settings = local_settings(payload["settings"], tmp, shipped)
        out = Path(settings.out)
        unpack_env(payload["env"], out, env_id)
        store = RunStore(tmp / "run")
        store.import_items(payload["rows"])
        gateway = Gateway(settings, recorder=HubRecorder(hub), cache=None if settings.no_cache else HubCache(hub),
                          usage=UsageMeter(settings.max_cost, ledger=HubLedger(hub)))
        outcome = await build_then_verify(scenario, gateway, settings, out, store,
                                          sandbox_pool(settings.tool_timeout, settings.allow_weak_sandbox), Progress())
        path = str(Path(outcome.path).relative_to(out)) if outcome.path else None
        return {"outcome": {**asdict(outcome), "path": path}, "env": pack_env(out, env_id),
                "rows": store.export_items(env_id, ITEM_STAGES), "out": str(out), "node": socket.gethostname()}
    finally:
        if store is not None:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)
