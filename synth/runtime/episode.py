"""An episode: one private copy of an env's database, the agent's tool calls on
it, and the reward its task's verifier gives at the end.

Nothing an agent or a broken env does crashes an episode: bad JSON, an unknown
tool, wrong arguments, a ToolError, an exception in tool code, a timeout or a
dead worker all come back as {"ok": false, "error": "..."} observations. The
failures that are the env's fault are also recorded as EnvBugs.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
import weakref
from typing import TYPE_CHECKING, Any

from synth.artifacts import Check, EnvBug, Reward, Task, TrajectoryStep
from synth.errors import SynthError
from synth.folder.database import open_bytes
from synth.runtime.guards import MAX_CHECKS, clean_text
from synth.runtime.sandbox import EpisodeLost
from synth.runtime.schema_check import ArgumentError

if TYPE_CHECKING:
    from synth.runtime.env import Env

MAX_BUGS = 200  # an env keeps its most recent bugs only; `bug_count` counts them all
_BUG_ARGUMENT_CHARS = 2000  # a bug's arguments beyond this are kept as a truncated string

# What an agent is told when the env, not the agent, failed.
_BUG_MESSAGES = {
    "exception": "internal error in the tool: {message}",
    "bad_return": "internal error: {message}",
    "too_large": "{message}",
    "timeout": "{message}",
    "violation": "internal error: {message}",
    "missing": "internal error: {message}",
}


class Episode:
    """Use from one agent at a time; calls on one episode are serialized, episodes
    of the same env run concurrently."""

    def __init__(self, env: "Env", task: Task | None, handle: Any, record: bool = True, episode_id: str | None = None):
        self.env = env
        self.record = record  # False: no trajectory is kept (a server's episodes, which nobody reads back)
        self.task = task
        self.id = episode_id or uuid.uuid4().hex[:16]
        self.tools = env.openai_tools
        self.trajectory: list[TrajectoryStep] = []
        self.bugs: list[EnvBug] = []
        self.closed = False
        self._handle = handle
        self._backend = env.backend
        self._lock = threading.Lock()
        abandon = getattr(env.backend, "abandon", None)
        self._finalizer = weakref.finalize(self, abandon, handle) if abandon else None

    # ----------------------------------------------------------------- tool calls

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
        """Call tool `name`; returns {"ok": True, "result": ...} or {"ok": False, "error": ...}."""
        start = time.perf_counter()
        prepared, early = self._prepare(name, arguments)
        if early is not None:
            return self._observed(name, arguments, early, start)
        with self._lock:
            if self.closed:
                return self._observed(name, arguments, {"ok": False, "error": "the episode is closed"}, start)
            try:
                reply = self._backend.call(self._handle, name, prepared)
            except EpisodeLost as exc:
                reply = exc
        return self._observed(name, arguments, self._finish(name, prepared, reply), start)

    def _prepare(self, name: str, arguments: dict[str, Any] | str | None) -> tuple[dict | None, dict | None]:
        """(the checked arguments to send, None), or (None, the observation that ends the call here)."""
        if self.closed:
            return None, {"ok": False, "error": "the episode is closed"}
        if arguments is None:
            arguments = {}
        if isinstance(arguments, (str, bytes)):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                return None, {"ok": False, "error": f"arguments are not valid JSON: {exc}"}
        validator = self.env.validators.get(name) if isinstance(name, str) else None
        if validator is None:
            return None, {"ok": False,
                          "error": f"unknown tool {name!r}; available tools: {', '.join(self.env.tool_names)}"}
        try:
            return validator(arguments), None
        except ArgumentError as exc:
            return None, {"ok": False, "error": str(exc)}

    def _finish(self, name: str, clean: dict[str, Any], reply: tuple | EpisodeLost) -> dict[str, Any]:
        """The observation for the backend's reply to one call (an EpisodeLost when its worker is gone)."""
        if isinstance(reply, EpisodeLost):
            return {"ok": False, "error": str(reply)}
        status = reply[0]
        if status == "ok":
            try:
                return {"ok": True, "result": json.loads(reply[1])}
            except (TypeError, ValueError):
                reply = ("error", "internal", "the sandbox worker sent a result that is not JSON", "")
        if reply[0] in ("tool_error", "refused"):
            return {"ok": False, "error": reply[1]}
        _, kind, message, tb = reply
        self._bug(name, clean, kind, message, tb)
        template = _BUG_MESSAGES.get(kind, "{message}")
        return {"ok": False, "error": template.format(message=message)}

    def _observed(self, name: str, arguments: Any, observation: dict[str, Any], start: float) -> dict[str, Any]:
        """The observation as the agent sees it, recorded in the trajectory."""
        if not observation["ok"]:
            observation["error"] = clean_text(str(observation["error"]))
        if self.record:
            recorded = dict(arguments) if isinstance(arguments, dict) else arguments  # the caller may reuse its dict
            self.trajectory.append(TrajectoryStep.model_construct(
                tool=name, arguments=recorded, observation=observation, duration=time.perf_counter() - start))
        return observation

    def _bug(self, tool: str, arguments: dict | None, kind: str, message: str, tb: str) -> None:
        bug = EnvBug(env_id=self.env.id, episode_id=self.id, task_id=self.task.task_id if self.task else None,
                     tool=tool, arguments=_bounded(arguments), kind=kind, message=message, traceback=tb)
        for bugs in (self.bugs, self.env.bugs):
            bugs.append(bug)
            if len(bugs) > MAX_BUGS:
                del bugs[: len(bugs) - MAX_BUGS]
        self.env.bug_count += 1

    # ----------------------------------------------------------------- state

    def snapshot(self) -> bytes:
        """The episode database's bytes now (raises EpisodeLost if its worker died)."""
        if self.closed:
            raise EpisodeLost("the episode is closed")
        with self._lock:
            return self._backend.snapshot(self._handle)

    def state(self) -> sqlite3.Connection:
        """A read-only connection on a snapshot of the episode database (row_factory=Row)."""
        return open_bytes(self.snapshot(), readonly=True)

    # ----------------------------------------------------------------- reward

    def evaluate(self, answer: Any = None, reward: str = "rubric", *, state: bool = True) -> Reward:
        """The task's rewards: the verifier's rubric and (unless state=False) the state-equivalence
        reward beside it (synth/use/reward.py), both on one snapshot of the episode's database;
        `reward` picks the one Reward.reward holds: "rubric", "state" or "both"."""
        final: bytes | str | None = None
        if self.task is not None and not self.closed:
            try:
                final = self.snapshot()
            except EpisodeLost as exc:
                final = str(exc)
        rubric = self._rubric(answer, final)
        if not state or self.task is None or self.closed:
            return rubric
        from synth.use.reward import with_state

        return with_state(self, rubric, answer, reward, final=final if isinstance(final, bytes) else None)

    def _rubric(self, answer: Any, final: bytes | str | None) -> Reward:
        """Run the task's verifier (sandboxed, in a worker that never ran the env's tools) on the
        initial database and `final`."""
        if self.task is None:
            return Reward(reward=0.0, passed=False, error="the episode has no task to evaluate")
        if self.closed:
            return Reward(reward=0.0, passed=False, error="the episode is closed")
        if not isinstance(final, bytes):
            return Reward(reward=0.0, passed=False, error=str(final))
        if answer is not None and not isinstance(answer, str):
            answer = json.dumps(answer, ensure_ascii=False, default=str)
        verifier = self.task.verifier or f"verify_{self.task.task_id}"
        try:
            reply = self._backend.verify(self.env._key, verifier, final, answer)
        except SynthError as exc:  # no verifier worker could be had (the env was closed, the pool is busy)
            return Reward(reward=0.0, passed=False, error=str(exc))
        if reply[0] == "refused":
            return Reward(reward=0.0, passed=False, error=reply[1])
        if reply[0] != "ok":
            _, kind, message, tb = reply
            self._bug(verifier, None, kind, message, tb)
            return Reward(reward=0.0, passed=False, error=message)
        if not isinstance(reply[1], list) or len(reply[1]) > MAX_CHECKS:
            return Reward(reward=0.0, passed=False, error="the sandbox worker sent malformed checks")
        try:
            reward = Reward.from_checks([Check(name=n, passed=p, weight=w) for n, p, w in reply[1]])
        except (TypeError, ValueError):
            return Reward(reward=0.0, passed=False, error="the sandbox worker sent malformed checks")
        if not reward.checks:
            reward.error = f"verifier {verifier!r} returned no checks"
        return reward

    # ----------------------------------------------------------------- lifecycle

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._finalizer is not None:
                self._finalizer.detach()
            self._backend.close_episode(self._handle)

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        task = self.task.task_id if self.task else None
        return f"Episode(env={self.env.id!r}, task={task!r}, id={self.id!r}, steps={len(self.trajectory)})"


def _bounded(arguments: dict | None) -> dict | None:
    """A bug's arguments, cut down when large (a bug list must not hold megabytes per entry)."""
    if arguments is None:
        return None
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    if len(text) <= _BUG_ARGUMENT_CHARS:
        return arguments
    return {"truncated": text[:_BUG_ARGUMENT_CHARS] + f"... ({len(text):,} characters in all)"}
