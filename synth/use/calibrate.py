"""`synth calibrate`: how often a model solves each task, from k rollouts per task.

GRPO-style training learns from the tasks a policy solves sometimes: one every rollout solves, or
none does, gives no signal. Each task is played k times by the rollout agent (synth/use/agent.py,
stage "calibrate", subject "<env_id>/<task_id>#<i>", uncached: every rollout samples the policy),
and the env folder gets calibration.json:

    {"model": "...", "k": 8, "reward": "rubric", "max_turns": 10, "updated": "<ISO time>",
     "tasks": {"<task_id>": {"k": 8, "scored": 8, "passes": 3, "pass_rate": 0.375, "mean_reward": 0.61,
                             "mean_rubric": 0.61, "mean_state": 0.375, "errors": 0, "template_id": "..." | null}}}

`passes` counts rollouts whose reward (of the kind `reward` names) passed; `pass_rate` is passes / scored
(rollouts that ended with a reward; an errored one is retried by the next run). The file is
rewritten as each task finishes, so a rerun of the same command (same model, k and reward) skips
the tasks it already holds; another model, k or reward starts the file afresh. Exports filter on
it (`--pass-rate LO:HI`) and write it into their rows; `synth view` shows its distribution.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from synth.atomic import write_json_atomic
from synth.errors import InputError
from synth.folder.dirs import find_env_dirs
from synth.folder.files import read_optional_json
from synth.folder.review import rejection
from synth.llm.errors import BudgetExceeded
from synth.use.rollout import play_task

STAGE = "calibrate"
CALIBRATION_FILE = "calibration.json"


def read_calibration(env_dir: Path | str) -> dict[str, Any] | None:
    """An env folder's calibration.json, or None when it has none (or it does not parse)."""
    try:
        data = read_optional_json(env_dir, CALIBRATION_FILE)
    except InputError:  # a link, a FIFO, too big or not JSON: as if there were none
        return None
    return data if isinstance(data, dict) and isinstance(data.get("tasks"), dict) else None


def task_record(rollouts: list[Any], k: int, template_id: str | None) -> dict[str, Any]:
    """One task's figures from its trajectories (errored ones count only as errors)."""
    scored = [t for t in rollouts if t.error is None and t.reward is not None]

    def mean(values: list[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return round(sum(known) / len(known), 4) if known else None

    passes = sum(t.passed for t in scored)
    return {"k": k, "scored": len(scored), "passes": passes,
            "pass_rate": round(passes / len(scored), 4) if scored else None,
            "mean_reward": mean([t.reward for t in scored]), "mean_rubric": mean([t.rubric for t in scored]),
            "mean_state": mean([t.state for t in scored]), "errors": len(rollouts) - len(scored),
            "template_id": template_id}


@dataclass
class CalibrationSummary:
    env_id: str
    path: Path
    tasks: int = 0  # calibrated now
    skipped: int = 0  # already in calibration.json
    rollouts: int = 0
    errors: int = 0
    stopped: str | None = None
    rates: list[float] = field(default_factory=list)


class _Book:
    """calibration.json of one env, rewritten as tasks finish."""

    def __init__(self, path: Path, header: dict[str, Any]):
        self.path, self._lock = path / CALIBRATION_FILE, threading.Lock()
        old = read_calibration(path)
        same = old is not None and all(old.get(k) == v for k, v in header.items())
        self.data = {**header, "tasks": dict(old["tasks"]) if same and old else {}}

    def done(self, task_id: str) -> bool:
        record = self.data["tasks"].get(task_id)
        return bool(record) and record.get("errors", 0) == 0

    def put(self, task_id: str, record: dict[str, Any]) -> None:
        with self._lock:
            self.data["tasks"][task_id] = record
            self.data["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            write_json_atomic(self.path, self.data)


async def calibrate_async(roots: list[Path | str], gateway: Any, *, k: int = 8, concurrency: int = 4,
                          max_turns: int = 10, reward: str = "rubric", split: str | None = None,
                          pool: Any = None, trusted: bool = False,
                          include_rejected: bool = False) -> list[CalibrationSummary]:
    from synth.runtime import Env

    if k < 1 or concurrency < 1 or max_turns < 1:
        raise InputError("-k, --concurrency and --max-turns must be at least 1")
    dirs = [d for root in roots for d in find_env_dirs(root)]
    if not dirs:
        raise InputError(f"no env folder under {', '.join(map(str, roots))}")
    gate = asyncio.Semaphore(concurrency)
    stop = asyncio.Event()
    summaries = []
    header = {"model": gateway.model, "k": k, "reward": reward, "max_turns": max_turns}
    for path in dirs:
        if not include_rejected and rejection(path):
            continue
        env = await anyio.to_thread.run_sync(lambda p=path: Env.load(p, trusted=trusted, pool=pool))
        summary = CalibrationSummary(env_id=env.id, path=path)
        summaries.append(summary)
        book = _Book(path, header)
        try:
            tasks = [t for t in sorted(env.tasks.values(), key=lambda t: t.task_id)
                     if split is None or t.split == split]

            async def one(task: Any, i: int) -> list[Any]:
                async with gate:
                    if stop.is_set():
                        return []
                    try:
                        return [await play_task(gateway, env, task, max_turns, reward, stage=STAGE,
                                                subject=f"{env.id}/{task.task_id}#{i}")]
                    except BudgetExceeded as exc:
                        stop.set()
                        summary.stopped = str(exc)
                        return []

            async def calibrate_task(task: Any) -> None:
                runs = [r for part in await asyncio.gather(*(one(task, i) for i in range(k))) for r in part]
                if stop.is_set() and len(runs) < k:
                    return  # incomplete: the next run does it again
                record = task_record(runs, k, task.template_id)
                book.put(task.task_id, record)
                summary.tasks += 1
                summary.rollouts += len(runs)
                summary.errors += record["errors"]
                if record["pass_rate"] is not None:
                    summary.rates.append(record["pass_rate"])

            todo = [t for t in tasks if not book.done(t.task_id)]
            summary.skipped = len(tasks) - len(todo)
            await asyncio.gather(*(calibrate_task(t) for t in todo))
        finally:
            await anyio.to_thread.run_sync(env.close)
        if stop.is_set():
            break
    return summaries


def calibrate(roots: list[Path | str], settings: Any, **options: Any) -> list[CalibrationSummary]:
    """Synchronous entry point for the CLI: builds the gateway from `settings`."""
    from synth.llm import Gateway

    if settings.model is None:
        raise InputError("no model: pass --model provider/model, the policy to calibrate against")
    return asyncio.run(calibrate_async(roots, Gateway(settings), **options))
