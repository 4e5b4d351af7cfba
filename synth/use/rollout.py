"""`synth rollout`: run a model as an agent on the tasks of every env under a
folder, one fresh episode per task, and write trajectories JSONL.

Each trajectory holds the messages, the tools, every tool call with its
observation, the final answer (the assistant's last text), the verifier's
reward and checks, the model and its token usage. Model calls go through the
gateway with stage "rollout" and subject "<env_id>/<task_id>".

Lines are appended as episodes finish, so a crash loses only the episodes in
flight; rerunning the same command skips (model, env, task) triples already in
the file and retries the ones that failed. With `window`, per-turn training
samples (WindowSample) are derived from the whole file afterwards.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio

from synth.artifacts import Trajectory, WindowSample
from synth.atomic import write_atomic
from synth.errors import InputError, SynthError
from synth.folder.dirs import find_env_dirs
from synth.folder.review import rejection
from synth.llm.errors import BudgetExceeded
from synth.use.agent import AgentContext, AgentRun, agent_messages, run_agent
from synth.use.export.source import read_trajectories  # noqa: F401  (re-exported for callers)

STAGE = "rollout"


@dataclass
class RolloutSummary:
    out: Path
    written: int = 0
    passed: int = 0
    failed: int = 0  # trajectories recorded with an error (retried on the next run)
    skipped: int = 0  # already in the file
    rewards: list[float] = field(default_factory=list)
    skipped_envs: list[str] = field(default_factory=list)
    stopped: str | None = None  # why no new episode was started (the budget)
    window_out: Path | None = None
    window_samples: int = 0
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def mean_reward(self) -> float:
        return sum(self.rewards) / len(self.rewards) if self.rewards else 0.0


def window_samples(traj: Trajectory, window: int) -> list[WindowSample]:
    """Per-turn samples: system prompt + task, the first exchange, the last `window` turns
    before the trained turn, then the trained assistant message."""
    if window < 0:
        raise InputError("--window must be 0 or more")
    head: list[dict[str, Any]] = []
    turns: list[list[dict[str, Any]]] = []  # each: one assistant message and the tool results after it
    for message in traj.messages:
        if message["role"] == "assistant":
            turns.append([message])
        elif turns:
            turns[-1].append(message)
        else:
            head.append(message)
    samples = []
    for k, turn in enumerate(turns):
        context: list[dict[str, Any]] = list(head)
        if k > 0:
            context += turns[0]
            for earlier in turns[1:k][-window:] if window else []:
                context += earlier
        samples.append(WindowSample(env_id=traj.env_id, task_id=traj.task_id, model=traj.model, turn=k + 1,
                                    window=window, messages=context + [turn[0]], tools=traj.tools,
                                    reward=traj.reward, passed=traj.passed))
    return samples


def _read_existing(out: Path) -> tuple[list[str], set[tuple[str, str, str]], bool]:
    """Good lines of an earlier run, their keys, and whether anything was dropped."""
    if not out.exists():
        return [], set(), False
    kept, keys, dropped = [], set(), False
    for line in out.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            traj = Trajectory.model_validate_json(line)
        except ValueError:
            dropped = True
            continue
        if traj.error is not None:
            dropped = True
            continue
        kept.append(line)
        keys.add((traj.model, traj.env_id, traj.task_id))
    return kept, keys, dropped


class _Writer:
    def __init__(self, path: Path):
        self._lock = threading.Lock()
        self._file = path.open("a", encoding="utf-8")

    def write(self, traj: Trajectory) -> None:
        with self._lock:
            self._file.write(traj.model_dump_json() + "\n")
            self._file.flush()

    def close(self) -> None:
        self._file.close()


async def play_task(gateway: Any, env: Any, task: Any, max_turns: int, reward_kind: str = "rubric", *,
               stage: str = STAGE, subject: str | None = None) -> Trajectory:
    subject = subject or f"{env.id}/{task.task_id}"
    messages = agent_messages(AgentContext.of_env(env.path), task.instruction)
    started = time.monotonic()
    episode = await anyio.to_thread.run_sync(env.episode, task.task_id)
    run: AgentRun | None = None
    error: str | None = None
    try:
        try:
            run = await run_agent(gateway, episode, messages, tools=episode.tools, max_turns=max_turns,
                                  stage=stage, subject=subject)
        except BudgetExceeded:
            raise  # not recorded: the episode is retried when the command is rerun with more budget
        except SynthError as exc:  # ModelError: record what was done
            run, error = getattr(exc, "run", None), str(exc)
        reward = None
        if error is None and run is not None:
            reward = await anyio.to_thread.run_sync(episode.evaluate, run.final_answer, reward_kind)
    finally:
        await anyio.to_thread.run_sync(episode.close)
    run = run or AgentRun(messages=messages)
    return Trajectory(
        env_id=env.id, task_id=task.task_id, instruction=task.instruction, model=gateway.model,
        messages=run.messages, tools=episode.tools, tool_calls=run.tool_calls, final_answer=run.final_answer,
        reward=reward.reward if reward else None, passed=bool(reward and reward.passed),
        checks=list(reward.checks) if reward else [],
        reward_error=reward.error if reward else None, turns=run.turns, reward_kind=reward_kind,
        rubric=reward.rubric if reward else None, state=reward.state if reward else None,
        stop_reason="error" if error else run.stop_reason,
        usage={"prompt_tokens": run.prompt_tokens, "completion_tokens": run.completion_tokens},
        seconds=round(time.monotonic() - started, 3), error=error,
    )


def _pick_tasks(env: Any, limit: int | None, split: str | None) -> list[Any]:
    tasks = [t for t in sorted(env.tasks.values(), key=lambda t: t.task_id) if split is None or t.split == split]
    return tasks[:limit] if limit is not None else tasks


async def rollout_async(root: Path | str, gateway: Any, out: Path | str, *, tasks: int | None = None,
                        concurrency: int = 4, max_turns: int = 10, window: int | None = None,
                        split: str | None = None, trusted: bool = False, pool: Any = None,
                        reward: str = "rubric", include_rejected: bool = False) -> RolloutSummary:
    from synth.runtime import Env

    if concurrency < 1 or max_turns < 1 or (tasks is not None and tasks < 1):
        raise InputError("--concurrency, --max-turns and --tasks must be at least 1")
    out = Path(out)
    summary = RolloutSummary(out=out)
    dirs = find_env_dirs(root)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept, done, dropped = _read_existing(out)
    if dropped:  # failed lines are retried now; keep only the good ones
        write_atomic(out, "".join(line + "\n" for line in kept))
    envs = []
    for path in dirs:
        rejected = None if include_rejected else rejection(path)
        if rejected:  # a reviewer said no: its rollouts would train on a bad env
            summary.skipped_envs.append(f"{path}: {rejected}")
            continue
        try:
            env = await anyio.to_thread.run_sync(lambda p=path: Env.load(p, trusted=trusted, pool=pool))
        except SynthError as exc:
            summary.skipped_envs.append(f"{path}: {exc}")
            continue
        if env.manifest.status == "failed":  # not shipped as verified: no rollouts on it
            env.close()
            summary.skipped_envs.append(f"{path}: its status is 'failed'")
            continue
        envs.append(env)
    work = []
    for env in envs:
        for task in _pick_tasks(env, tasks, split):
            if (gateway.model, env.id, task.task_id) in done:
                summary.skipped += 1
            else:
                work.append((env, task))
    writer = _Writer(out)
    gate = asyncio.Semaphore(concurrency)
    stop = asyncio.Event()

    async def worker(env: Any, task: Any) -> None:
        async with gate:
            if stop.is_set():
                return
            try:
                traj = await play_task(gateway, env, task, max_turns, reward)
            except BudgetExceeded as exc:
                stop.set()
                summary.stopped = str(exc)
                return
            except Exception as exc:  # noqa: BLE001 - one failed episode never stops the others
                traj = Trajectory(env_id=env.id, task_id=task.task_id, instruction=task.instruction,
                                  model=gateway.model, messages=[], tools=env.openai_tools, stop_reason="error",
                                  error=str(exc) if isinstance(exc, SynthError) else f"{type(exc).__name__}: {exc}")
            writer.write(traj)
            summary.written += 1
            if traj.error:
                summary.failed += 1
            else:
                summary.rewards.append(traj.reward or 0.0)
                summary.passed += traj.passed

    try:
        await asyncio.gather(*(worker(env, task) for env, task in work))
    finally:
        writer.close()
        for env in envs:
            await anyio.to_thread.run_sync(env.close)
    if window is not None:
        summary.window_out = out.with_name(out.stem + ".window.jsonl")
        samples = []
        for line in _read_existing(out)[0]:
            samples += window_samples(Trajectory.model_validate_json(line), window)
        write_atomic(summary.window_out, "".join(s.model_dump_json() + "\n" for s in samples))
        summary.window_samples = len(samples)
    summary.usage = asdict(gateway.usage.total)
    return summary


def rollout(root: Path | str, settings: Any, out: Path | str, **options: Any) -> RolloutSummary:
    """Synchronous entry point for the CLI: builds the gateway from `settings`."""
    from synth.llm import Gateway

    gateway = Gateway(settings)
    return asyncio.run(rollout_async(root, gateway, out, **options))
