"""SFT rows from trajectories: {"messages", "tools"} per line, the conversational
tool-calling format of TRL's SFTTrainer (and of most chat-template based SFT
tools), plus env_id/task_id/reward for filtering.

Tool-call arguments are dicts by default, which is what Hugging Face chat
templates render (`tool_call.arguments | tojson`); `arguments="json"` keeps
the OpenAI wire form (JSON strings), for OpenAI-style fine-tuning files.
Only trajectories that passed their verifier are kept unless asked otherwise.
Each row's `tokens` is its length under the chat template (synth/use/export/tokens.py),
and <out>.lengths.json says which `max_length` holds every row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from synth.artifacts import Trajectory
from synth.atomic import write_atomic
from synth.errors import InputError
from synth.use.export.source import read_trajectories
from synth.use.export.tokens import load_counter, sft_lengths

ArgumentsStyle = Literal["dict", "json"]


class _Unusable(ValueError):
    pass


def sft_messages(traj: Trajectory, arguments: ArgumentsStyle = "dict") -> list[dict[str, Any]]:
    names: dict[str, str] = {}
    out = []
    for m in traj.messages:
        msg: dict[str, Any] = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                raw = c["function"]["arguments"]
                try:
                    parsed = json.loads(raw) if isinstance(raw, str) else raw
                except ValueError:
                    raise _Unusable(f"tool call {c['function']['name']} has arguments that are not JSON") from None
                if not isinstance(parsed, dict):
                    raise _Unusable(f"tool call {c['function']['name']} has arguments that are not an object")
                names[c["id"]] = c["function"]["name"]
                value = parsed if arguments == "dict" else json.dumps(parsed, ensure_ascii=False)
                calls.append({"id": c["id"], "type": "function",
                              "function": {"name": c["function"]["name"], "arguments": value}})
            msg["tool_calls"] = calls
        if m["role"] == "tool":
            msg["tool_call_id"] = m.get("tool_call_id", "")
            msg["name"] = names.get(m.get("tool_call_id", ""), "")  # some chat templates print it
        out.append(msg)
    return out


def export_sft(src: Path | str, out: Path | str, *, include_failed: bool = False,
               arguments: ArgumentsStyle = "dict", tokenizer: str | None = None) -> str:
    if arguments not in ("dict", "json"):
        raise InputError("--arguments must be 'dict' or 'json'")
    trajectories = read_trajectories(src)
    rows, skipped = [], {"not passed": 0, "failed rollout": 0, "unusable": 0}
    for traj in trajectories:
        if traj.error is not None or not traj.messages:
            skipped["failed rollout"] += 1
            continue
        if not traj.passed and not include_failed:
            skipped["not passed"] += 1
            continue
        try:
            messages = sft_messages(traj, arguments)
        except _Unusable:
            skipped["unusable"] += 1
            continue
        rows.append({"messages": messages, "tools": traj.tools, "env_id": traj.env_id, "task_id": traj.task_id,
                     "reward": traj.reward})
    if not rows:
        hint = ("" if include_failed or not skipped["not passed"]
                else "; pass --include-failed to keep trajectories that did not pass")
        raise InputError(f"no trajectory in {src} qualifies for SFT ({describe(skipped)}){hint}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lengths = sft_lengths(rows, load_counter(tokenizer), out)
    write_atomic(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return f"sft: {len(rows)} rows to {out} (skipped: {describe(skipped)}); {lengths}"


def describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in counts.items() if n) or "none"
