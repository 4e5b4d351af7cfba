"""What the protocol faces of `synth serve` share (OpenEnv in openenv_face.py, the
Open Reward Standard in ors_face.py): picking a task, the agent's system prompt,
the answer tool, and tool calls and answers on the episodes of the one
EpisodeRegistry the REST and MCP routes use (same sandbox pool, limits, cap and
idle expiry; no second copy of the runtime).

A protocol episode ends when the agent submits its answer through the answer tool
(`submit_answer`): that call is evaluated with the server's --reward and carries
the reward; every other tool call carries none.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from synth.runtime.schema_check import ArgumentError
from synth.use.agent import AgentContext, system_prompt
from synth.use.server.episodes import EpisodeRegistry, LiveEpisode, RegistryError

SPLITS = ("train", "test")
REWARD_KINDS = ("rubric", "state", "both")
ANSWER_TOOL = "submit_answer"
_ANSWER_DESCRIPTION = ("Submit your final answer to the user's request and end the episode; the reward is "
                       "computed from the database and this answer. Call it once, when the work is done.")


class BadRequest(RegistryError):
    status = 400


@dataclass
class CallOutcome:
    kind: Literal["ok", "not_found", "invalid_args", "error"]
    result: Any = None  # the tool's JSON result when ok
    message: str = ""  # what went wrong otherwise


def task_card(task: Any) -> dict[str, Any]:
    """A task as the faces list it (no gold, no expected answer)."""
    return {"task_id": task.task_id, "split": task.split, "kind": task.kind, "difficulty": task.difficulty}


def reward_payload(reward: Any) -> dict[str, Any]:
    return reward.model_dump(mode="json")


class Faces:
    """Per-server state of the protocol faces over the shared registry."""

    def __init__(self, registry: EpisodeRegistry, reward: str = "rubric"):
        self.registry = registry
        self.reward = reward
        self._prompts: dict[str, str] = {}
        self._cursors: dict[tuple[str, str | None], int] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- envs and tasks

    def env(self, env_id: str) -> Any:
        return self.registry.env(env_id)  # NotFound names the served envs

    def tasks(self, env_id: str, split: str | None = None) -> list[Any]:
        """The env's tasks in tasks.jsonl order, of one split (None: all)."""
        if split is not None and split not in SPLITS:
            raise BadRequest(f"unknown split {split!r}; splits: {', '.join(SPLITS)}")
        return [t for t in self.env(env_id).tasks.values() if split is None or t.split == split]

    def pick(self, env_id: str, task_id: str | None = None, split: str | None = None,
             seed: int | None = None) -> str:
        """A task by id, else by seed, else the next one of the split (default train) in turn."""
        env = self.env(env_id)
        if task_id is not None:
            if task_id not in env.tasks:
                raise BadRequest(f"env {env_id!r} has no task {task_id!r}; tasks: {', '.join(env.tasks) or 'none'}")
            return task_id
        pool = self.tasks(env_id, split or "train")
        if not pool:
            raise BadRequest(f"env {env_id!r} has no task in split {split or 'train'!r}; pass a task_id or a split "
                             "that has tasks")
        if seed is not None:
            return pool[seed % len(pool)].task_id
        with self._lock:
            turn = self._cursors.get((env_id, split), 0)
            self._cursors[(env_id, split)] = turn + 1
        return pool[turn % len(pool)].task_id

    def system_prompt(self, env_id: str) -> str:
        """The agent's system prompt, the same builder as rollouts, exports and MCP."""
        if env_id not in self._prompts:
            self._prompts[env_id] = system_prompt(AgentContext.of_env(self.env(env_id).path))
        return self._prompts[env_id]

    def answer_tool(self, env_id: str) -> str:
        """`submit_answer`, unless the env has a tool of that name."""
        return ANSWER_TOOL if ANSWER_TOOL not in self.env(env_id).validators else f"synth_{ANSWER_TOOL}"

    def answer_tool_spec(self, env_id: str) -> dict[str, Any]:
        return {"name": self.answer_tool(env_id), "description": _ANSWER_DESCRIPTION,
                "input_schema": {"type": "object", "properties": {"answer": {
                    "type": "string", "description": "Your final answer to the user"}}, "required": ["answer"]}}

    def tool_specs(self, env_id: str) -> list[dict[str, Any]]:
        """The env's tools: name, description and the portable JSON-Schema parameters."""
        return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in self.env(env_id).tools]

    @staticmethod
    def reward_kind(value: Any, default: str) -> str:
        if value is None:
            return default
        if value not in REWARD_KINDS:
            raise BadRequest(f"unknown reward {value!r}; pass one of: {', '.join(REWARD_KINDS)}")
        return value

    # ----------------------------------------------------------------- episodes

    async def open(self, env_id: str, task_id: str) -> LiveEpisode:
        return await anyio.to_thread.run_sync(self.registry.create, env_id, task_id)

    async def close(self, live: LiveEpisode | None) -> None:
        """Close the episode unless it is gone already (closed, expired, shut down)."""
        if live is None or live.episode.closed:
            return
        try:
            await anyio.to_thread.run_sync(self.registry.close, live.id)
        except RegistryError:
            pass

    async def call(self, live: LiveEpisode, name: str, arguments: Any) -> CallOutcome:
        """One tool call; unknown tools and arguments that break the schema are told apart from
        the tool's own errors (both leave the episode as it was). Raises NotFound when the
        episode is gone."""
        env = self.registry.envs[live.env_id]
        validator = env.validators.get(name) if isinstance(name, str) else None
        if validator is None:
            return CallOutcome("not_found", message=f"unknown tool {name!r}; available tools: "
                                                    f"{', '.join(env.tool_names + [self.answer_tool(live.env_id)])}")
        try:
            validator(arguments)
        except ArgumentError as exc:
            return CallOutcome("invalid_args", message=str(exc))
        live = self.registry.begin(live.id)
        try:
            observation = await anyio.to_thread.run_sync(live.episode.call, name, arguments)
            live.calls += 1
        finally:
            self.registry.end(live)
        if observation.get("ok"):
            return CallOutcome("ok", result=observation.get("result"))
        return CallOutcome("error", message=str(observation.get("error")))

    async def submit(self, live: LiveEpisode, answer: Any, kind: str) -> Any:
        """Evaluate the episode with `answer` (a synth.artifacts.Reward); raises NotFound when gone."""
        live = self.registry.begin(live.id)
        try:
            return await anyio.to_thread.run_sync(live.episode.evaluate, answer, kind)
        finally:
            self.registry.end(live)


def mount_protocol_faces(app: Any, registry: EpisodeRegistry, guards: Any, reward: str) -> Faces:
    """Add the OpenEnv routes (/openenv/<env_id>/...) and the ORS routes to the app."""
    from synth.use.server.openenv_face import mount_openenv
    from synth.use.server.ors_face import mount_ors

    faces = Faces(registry, reward)
    mount_openenv(app, faces, guards)
    mount_ors(app, faces)
    app.state.faces = faces
    return faces
