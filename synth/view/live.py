"""Running an env for the viewer: replaying a task's gold trace and "Try it" episodes.

Env code runs only in synth's sandbox workers (synth.runtime.Env with a
SandboxPool), never in the viewer's process. Each tool call records the
database diff it made; a Try-it episode lives until it is closed, is idle for
IDLE_SECONDS, or is the oldest when MAX_SESSIONS are open.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.errors import InputError, SynthError
from synth.use.replay import state_diff
from synth.view.index import files_signature

MAX_SESSIONS = 16
IDLE_SECONDS = 1800.0
_CODE_FILES = ("env.json", "tools.json", "tools.py", "tasks.jsonl", "verifiers.py", "db/initial.sqlite")


def run_step(episode: Any, tool: str, arguments: Any) -> dict[str, Any]:
    """One tool call on `episode`, with the database diff it made (None when the state was lost)."""
    step: dict[str, Any] = {"tool": tool, "arguments": arguments}
    try:
        before = episode.snapshot()
    except SynthError as exc:
        return {**step, "observation": {"ok": False, "error": str(exc)}, "diff": None}
    step["observation"] = episode.call(tool, arguments)
    try:
        step["diff"] = state_diff(before, episode.snapshot())
    except SynthError:
        step["diff"] = None
    return step


@dataclass
class TrySession:
    id: str
    env_key: str
    path: Path
    task_id: str | None
    episode: Any
    steps: list[dict[str, Any]] = field(default_factory=list)
    rewards: list[dict[str, Any]] = field(default_factory=list)
    used: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Live:
    def __init__(self, workers: int = 2):
        self.workers = workers
        self._pool: Any = None
        self._envs: dict[Path, tuple[tuple, Any]] = {}
        self._sessions: dict[str, TrySession] = {}
        self._lock = threading.Lock()

    def _pool_(self) -> Any:
        if self._pool is None:
            from synth.runtime import SandboxPool

            self._pool = SandboxPool(workers=self.workers)
        return self._pool

    def env(self, path: Path) -> Any:
        """The loaded env of `path` (sandboxed), reloaded when its files change."""
        from synth.runtime import Env

        sig = files_signature(path, _CODE_FILES)
        with self._lock:
            cached = self._envs.get(path)
            if cached and cached[0] == sig:
                return cached[1]
            if cached:
                cached[1].close()
            env = Env.load(path, pool=self._pool_())
            self._envs[path] = (sig, env)
            return env

    def replay(self, path: Path, task_id: str) -> dict[str, Any]:
        """Play the task's gold actions on a fresh episode, then evaluate its expected answer."""
        env = self.env(path)
        task = env.tasks.get(task_id)
        if task is None:
            raise InputError(f"env {env.id} has no task {task_id!r}")
        with env.episode(task_id) as episode:
            steps = [run_step(episode, call.tool, dict(call.arguments)) for call in task.gold]
            reward = episode.evaluate(task.expected_answer)
            empty = episode.evaluate(None)
            try:
                total = state_diff(env.initial_db, episode.snapshot())
            except SynthError:
                total = None
        with env.episode(task_id) as idle:
            nothing = idle.evaluate(None)
        # Two model-free probes computed on the spot: a sound verifier never pays for doing nothing,
        # nor for a read task's calls without the answer (a write task may or may not want one).
        probes = [{"probe": "do nothing (no calls, no answer)", "should_pass": False, **nothing.model_dump()},
                  {"probe": "gold calls, empty answer", "should_pass": False if task.kind == "read" else None,
                   **empty.model_dump()}]
        return {"steps": steps, "answer": task.expected_answer, "reward": reward.model_dump(), "diff": total,
                "probes": probes}

    # ------------------------------------------------------------------ Try it

    def open(self, env_key: str, path: Path, task_id: str | None) -> TrySession:
        env = self.env(path)
        self._expire()
        session = TrySession(id=uuid.uuid4().hex[:12], env_key=env_key, path=path, task_id=task_id,
                             episode=env.episode(task_id))
        with self._lock:
            self._sessions[session.id] = session
            if len(self._sessions) > MAX_SESSIONS:
                oldest = min(self._sessions.values(), key=lambda s: s.used)
                self._drop(oldest.id)
        return session

    def session(self, sid: str) -> TrySession:
        with self._lock:
            session = self._sessions.get(sid)
        if session is None:
            raise KeyError(sid)
        session.used = time.monotonic()
        return session

    def call(self, sid: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        session = self.session(sid)
        with session.lock:
            step = run_step(session.episode, tool, arguments)
            session.steps.append(step)
        return step

    def evaluate(self, sid: str, answer: str | None) -> dict[str, Any]:
        session = self.session(sid)
        with session.lock:
            reward = {"answer": answer, **session.episode.evaluate(answer or None).model_dump()}
            session.rewards.append(reward)
        return reward

    def end(self, sid: str) -> None:
        with self._lock:
            self._drop(sid)

    def _drop(self, sid: str) -> None:  # caller holds self._lock
        session = self._sessions.pop(sid, None)
        if session is not None:
            session.episode.close()

    def _expire(self) -> None:
        now = time.monotonic()
        with self._lock:
            for sid in [s.id for s in self._sessions.values() if now - s.used > IDLE_SECONDS]:
                self._drop(sid)

    def close(self) -> None:
        with self._lock:
            for sid in list(self._sessions):
                self._drop(sid)
            for _, env in self._envs.values():
                env.close()
            self._envs.clear()
            if self._pool is not None:
                self._pool.close()
                self._pool = None
