"""SFT rows from gold solutions, with no model: every task's gold actions replayed in a
fresh episode (in the sandbox, so the tool results are real), one assistant tool call per
action followed by its observation, and the task's expected answer as the final
assistant turn. Only tasks whose replay passes the verifier with that answer are kept;
a task with no expected answer has no final turn to train on and is left out too.

Rows have the shape of `export sft` rows from trajectories (TRL's conversational
tool-calling format): {"messages", "tools", "env_id", "task_id", "reward", "tokens"}.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth.artifacts import Trajectory
from synth.atomic import write_atomic
from synth.errors import InputError, SynthError
from synth.use.agent import AgentContext, agent_messages, observation_text
from synth.use.export.sft import ArgumentsStyle, describe, sft_messages
from synth.use.export.source import load_envs, skipped_note
from synth.use.export.tokens import load_counter, sft_lengths
from synth.use.replay import answer_text


def gold_trajectory(env: Any, task: Any, context: AgentContext,
                    reward_kind: str = "rubric") -> tuple[Trajectory | None, str | None]:
    """The gold replay of one task as a trajectory, or None and why it does not qualify."""
    answer = answer_text(task.expected_answer)
    if not answer or not answer.strip():
        return None, "no expected answer"
    messages = agent_messages(context, task.instruction)
    with env.episode(task.task_id) as episode:
        for n, call in enumerate(task.gold, 1):
            call_id = f"call_{n}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": call_id, "type": "function",
                "function": {"name": call.tool, "arguments": json.dumps(call.arguments, ensure_ascii=False)}}]})
            observation = episode.call(call.tool, dict(call.arguments))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": observation_text(observation)})
        reward = episode.evaluate(answer, reward_kind)
    if reward.error or not reward.passed:
        return None, "gold failed"
    messages.append({"role": "assistant", "content": answer})
    return Trajectory(env_id=env.id, task_id=task.task_id, instruction=task.instruction, model="gold",
                      messages=messages, tools=env.openai_tools, final_answer=answer, reward=reward.reward,
                      passed=True, checks=list(reward.checks), turns=len(task.gold) + 1), None


def export_sft_gold(root: Path | str, out: Path | str, *, arguments: ArgumentsStyle = "dict",
                    include_rejected: bool = False, trusted: bool = False, reward: str = "rubric",
                    tokenizer: str | None = None, pass_rate: tuple[float, float] | None = None) -> str:
    from synth.runtime import Env

    if arguments not in ("dict", "json"):
        raise InputError("--arguments must be 'dict' or 'json'")
    exportable, skipped_envs = load_envs(root, include_rejected=include_rejected, pass_rate=pass_rate)
    rows, skipped = [], {"no expected answer": 0, "gold failed": 0}
    for source in exportable:
        try:
            env = Env.load(source.path, trusted=trusted)
        except SynthError as exc:
            skipped_envs.append(f"{source.path}: {exc}")
            continue
        with env:
            context = source.context
            wanted = {t.task_id for t in source.tasks}  # those in the --pass-rate band, when given
            for task in sorted((t for t in env.tasks.values() if t.task_id in wanted), key=lambda t: t.task_id):
                traj, why = gold_trajectory(env, task, context, reward)
                if traj is None:
                    skipped[why or "gold failed"] += 1
                    continue
                rows.append({"messages": sft_messages(traj, arguments), "tools": traj.tools, "env_id": traj.env_id,
                             "task_id": traj.task_id, "reward": traj.reward,
                             "calibration": source.calibrated(traj.task_id)})
    if not rows:
        raise InputError(f"no task under {root} has a gold solution that passes with its expected answer "
                         f"({describe(skipped)})" + "".join(f"; skipped {why}" for why in skipped_envs[:3]))
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lengths = sft_lengths(rows, load_counter(tokenizer), out)
    write_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return (f"sft: {len(rows)} rows from gold solutions to {out} (skipped tasks: {describe(skipped)}); {lengths}"
            + skipped_note(skipped_envs))
