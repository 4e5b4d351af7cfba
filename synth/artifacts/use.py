"""Using envs: trajectory steps, env bugs, rollouts and training samples."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from synth.artifacts.env import Check


class TrajectoryStep(BaseModel):
    """One tool call of an episode, as the agent made it and as it was answered."""

    tool: str
    arguments: Any  # what the agent sent: a dict, or the raw string when it was not valid JSON
    observation: dict[str, Any]  # {"ok": true, "result": ...} or {"ok": false, "error": "..."}
    duration: float  # seconds, including validation and the sandbox round trip


class EnvBug(BaseModel):
    """An env failure seen at run time that is not the agent's fault: a tool or verifier
    raising unexpectedly, timing out, returning non-JSON, or crashing its worker."""

    env_id: str
    episode_id: str
    task_id: str | None = None
    tool: str  # tool name, or the verifier's function name
    arguments: dict[str, Any] | None = None
    kind: str  # exception | timeout | killed | crash | bad_return | missing | violation | internal
    message: str
    traceback: str = ""


StopReason = Literal["answered", "max_turns", "error"]


class RolloutCall(BaseModel):
    """One tool call an agent made during a rollout, with the observation it got."""

    turn: int  # 1-based assistant turn that made the call
    id: str
    name: str
    arguments: Any  # a dict, or the raw string when the model sent invalid JSON
    observation: dict[str, Any]


class Trajectory(BaseModel):
    """One line of the trajectories JSONL `synth rollout` writes."""

    env_id: str
    task_id: str
    instruction: str
    model: str
    messages: list[dict[str, Any]]  # OpenAI chat shape, tool-call arguments as JSON strings
    tools: list[dict[str, Any]]  # OpenAI function schemas the agent was given
    tool_calls: list[RolloutCall] = Field(default_factory=list)
    final_answer: str | None = None
    reward: float | None = None  # None when the rollout failed before it could be evaluated
    passed: bool = False
    checks: list[Check] = Field(default_factory=list)
    reward_error: str | None = None
    reward_kind: str = "rubric"  # which reward `reward` is (synth rollout --reward)
    rubric: float | None = None  # the verifier's rubric score
    state: float | None = None  # the state-equivalence reward
    turns: int = 0
    stop_reason: StopReason = "answered"
    usage: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # why the rollout failed (model error, budget, sandbox)


class WindowSample(BaseModel):
    """One per-turn training sample with AWM-style history alignment: the system prompt,
    the task, the first exchange and only the last W turns before the trained turn."""

    env_id: str
    task_id: str
    model: str
    turn: int  # 1-based assistant turn that is the training target (the last message)
    window: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    reward: float | None
    passed: bool
