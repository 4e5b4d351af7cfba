"""What an agent sees and does: the one system prompt every consumer of an env
uses (rollout, gold SFT, the MCP server's instructions and every trainer
export), and the agent loop behind `synth rollout`: OpenAI-style function
calling through the model gateway, tool calls answered by an episode, until the
model answers without calling a tool or the turn budget runs out.

The system prompt names the application, its scenario, the env's fixed current
date (env.json `today`) and the person the agent acts for (env.json
`acting_user`); env folders made before those fields existed simply leave the
lines out.

Messages stay in the OpenAI chat shape (the gateway converts them for
Anthropic); tool-call arguments are sent back as JSON strings, as the OpenAI
API expects. Every call is uncached: a rollout samples the policy.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio

from synth.artifacts import RolloutCall, StopReason
from synth.pipeline.prompts import render_prompt


@dataclass(frozen=True)
class AgentContext:
    """What the system prompt is built from: one env's manifest fields."""

    title: str
    scenario: str
    today: str | None = None  # "YYYY-MM-DD"
    acting_user: dict[str, Any] | None = None  # {"table", "id", "name", "role"}

    @classmethod
    def from_manifest(cls, data: dict[str, Any]) -> "AgentContext":
        """From env.json's fields; a malformed `today` or `acting_user` is left out, never guessed."""
        today = data.get("today")
        try:
            today = datetime.date.fromisoformat(today).isoformat() if isinstance(today, str) else None
        except ValueError:
            today = None
        user = data.get("acting_user")
        if not (isinstance(user, dict) and isinstance(user.get("name"), str) and user["name"].strip()):
            user = None
        return cls(title=str(data.get("title") or data.get("id") or ""), scenario=str(data.get("scenario") or ""),
                   today=today, acting_user=user)

    @classmethod
    def of_env(cls, env_dir: Path | str) -> "AgentContext":
        """Read from <env_dir>/env.json (raw, so fields newer than EnvManifest are seen)."""
        from synth.folder.files import read_env_json

        data = read_env_json(env_dir, "env.json")
        return cls.from_manifest(data if isinstance(data, dict) else {})


def context_lines(ctx: AgentContext) -> list[str]:
    """The date and acting-user sentences of the system prompt (none when unknown)."""
    lines = []
    if ctx.today:
        day = datetime.date.fromisoformat(ctx.today)
        lines.append(f"Today is {day.isoformat()} ({day:%A}); read relative dates (\"tomorrow\", \"next Monday\") "
                     "from this date.")
    user = ctx.acting_user
    if user:
        role = f", {user['role']}" if user.get("role") else ""
        record = ""
        if user.get("table") and user.get("id") is not None:
            record = f" (record {user['id']} of the {user['table']} table)"
        lines.append(f"You are acting for {user['name']}{role}{record}: when the user says \"I\", \"me\" or "
                     "\"my\", they mean this person.")
    return lines


def agent_messages(ctx: AgentContext, instruction: str) -> list[dict[str, Any]]:
    """[system, user]: the start of every episode an agent plays, wherever it is played."""
    system, user = render_prompt("rollout_agent", title=ctx.title, scenario=ctx.scenario.strip(),
                                 instruction=instruction)
    extra = context_lines(ctx)
    if extra:
        system = {**system, "content": system["content"] + "\n\n" + "\n".join(extra)}
    return [system, user]


def system_prompt(ctx: AgentContext) -> str:
    """The system message alone (the MCP server's instructions)."""
    return agent_messages(ctx, "")[0]["content"]


class ToolRunner(Protocol):
    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]: ...


@dataclass
class AgentRun:
    messages: list[dict[str, Any]]
    tool_calls: list[RolloutCall] = field(default_factory=list)
    final_answer: str | None = None
    turns: int = 0
    stop_reason: StopReason = "answered"
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _wire_arguments(arguments: dict[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def observation_text(observation: dict[str, Any]) -> str:
    """What the model reads for a tool call: the result as JSON, or the error."""
    if observation.get("ok"):
        return json.dumps(observation.get("result"), ensure_ascii=False, default=str)
    return f"error: {observation.get('error')}"


async def run_agent(gateway: Any, episode: ToolRunner, messages: list[dict[str, Any]], *,
                    tools: list[dict[str, Any]], max_turns: int, stage: str, subject: str) -> AgentRun:
    """Play one episode. Model errors (synth.llm.ModelError, BudgetExceeded) propagate; the
    run so far is on the exception's `run` attribute for the caller to record."""
    run = AgentRun(messages=list(messages))
    try:
        await _loop(gateway, episode, run, tools=tools, max_turns=max_turns, stage=stage, subject=subject)
    except Exception as exc:
        exc.run = run  # type: ignore[attr-defined]
        raise
    return run


async def _loop(gateway: Any, episode: ToolRunner, run: AgentRun, *, tools: list[dict[str, Any]],
                max_turns: int, stage: str, subject: str) -> None:
    last_text = ""
    for turn in range(1, max_turns + 1):
        completion = await gateway.chat(run.messages, stage=stage, subject=subject, tools=tools, use_cache=False)
        run.turns = turn
        run.prompt_tokens += completion.prompt_tokens
        run.completion_tokens += completion.completion_tokens
        text = completion.text or ""
        if text.strip():
            last_text = text
        if not completion.tool_calls:
            run.messages.append({"role": "assistant", "content": text})
            run.final_answer, run.stop_reason = text, "answered"
            return
        run.messages.append({
            "role": "assistant", "content": text or None,
            "tool_calls": [{"id": c.id, "type": "function",
                            "function": {"name": c.name, "arguments": _wire_arguments(c.arguments)}}
                           for c in completion.tool_calls],
        })
        for call in completion.tool_calls:
            observation = await anyio.to_thread.run_sync(episode.call, call.name, call.arguments)
            run.tool_calls.append(RolloutCall(turn=turn, id=call.id, name=call.name, arguments=call.arguments,
                                              observation=observation))
            run.messages.append({"role": "tool", "tool_call_id": call.id, "content": observation_text(observation)})
    # Out of turns: the last thing the assistant said is its answer.
    run.final_answer, run.stop_reason = last_text, "max_turns"
