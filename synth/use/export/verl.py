"""verl export: RL prompts as parquet plus an agent loop that plays them on synth episodes.

Rows follow verl's RLHFDataset contract (see verl's data preparation docs):
  data_source   "synth/<env_id>"
  prompt        chat messages [system, user] (data.prompt_key=prompt, data.return_raw_chat=True)
  ability       "tool_use"
  agent_name    "synth_agent" (selects the agent loop below)
  reward_model  {"style": "rule", "ground_truth": JSON of env_id, task_id and the expected answer}
  extra_info    {"split", "index", "env_id", "task_id", "probes", "template_id", "calibration"}
                (calibration: the task's record of calibration.json with the model's name, or null)
The agent loop (synth_agent_loop.py, registered through agent_loop.yaml) opens
one episode per trajectory on `synth serve`, runs the tool calls there and sets
reward_score from the env's verifier, so no reward function is needed.

verl's default prompt length (data.max_prompt_length=512) cannot hold a prompt with
its tools, so the export counts every prompt as the agent loop renders it (system
and task messages plus the tool schemas, through the chat template of the model
--tokenizer names, else the bundled Qwen3 one: synth/use/export/tokens.py) and writes
lengths that fit, with a margin, into the README's command; it warns when a prompt
exceeds a length given on the command line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth import __version__
from synth.atomic import write_atomic
from synth.errors import InputError
from synth.pipeline.prompts import render_template
from synth.use.agent import agent_messages
from synth.use.export.source import load_envs, skipped_note
from synth.use.export.tokens import load_counter

AGENT_NAME = "synth_agent"
DATA_SOURCE_PREFIX = "synth/"
DEFAULT_RESPONSE_LENGTH = 8192  # model turns plus the tool results between them
MAX_TOOL_RESPONSE_CHARS = 8192  # multi_turn.max_tool_response_length (verl's default 256 cuts JSON results)
MAX_PARALLEL_CALLS = 8


def verl_rows(envs: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows by split, indexed within their split."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for env in envs:
        context = env.context
        for task in sorted(env.tasks, key=lambda t: t.task_id):
            split_rows = rows.setdefault(task.split, [])
            truth = {"env_id": env.id, "task_id": task.task_id, "expected_answer": task.expected_answer}
            split_rows.append({
                "data_source": DATA_SOURCE_PREFIX + env.id,
                "prompt": agent_messages(context, task.instruction),
                "ability": "tool_use",
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "rule", "ground_truth": json.dumps(truth, ensure_ascii=False, default=str)},
                "extra_info": {"split": task.split, "index": len(split_rows), "env_id": env.id,
                               "task_id": task.task_id, "probes": env.probe_rewards(task.task_id),
                               "template_id": task.template_id, "calibration": env.calibrated(task.task_id)},
            })
    return rows


def _write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError("the verl export writes parquet and needs pyarrow: pip install pyarrow") from exc
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)


def export_verl(root: Path | str, out: Path | str, *, server_url: str = "http://127.0.0.1:8000",
                max_turns: int = 10, tokenizer: str | None = None, max_prompt_length: int | None = None,
                max_response_length: int = DEFAULT_RESPONSE_LENGTH, include_rejected: bool = False,
                reward: str = "rubric", pass_rate: tuple[float, float] | None = None) -> str:
    if max_turns < 1 or (max_prompt_length is not None and max_prompt_length < 1) or max_response_length < 1:
        raise InputError("--max-turns, --max-prompt-length and --max-response-length must be at least 1")
    envs, skipped = load_envs(root, include_rejected=include_rejected, pass_rate=pass_rate)
    counter = load_counter(tokenizer)
    rows = verl_rows(envs)
    tools = {env.id: env.openai_tools() for env in envs}
    lengths = [(counter.prompt(r["prompt"], tools[r["extra_info"]["env_id"]]), r)
               for split_rows in rows.values() for r in split_rows]
    longest, longest_row = max(lengths, key=lambda x: x[0])
    prompt_length = max_prompt_length if max_prompt_length is not None else counter.length_for(longest)
    over = [r for n, r in lengths if n > prompt_length]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for split, split_rows in rows.items():
        _write_parquet(out / f"{split}.parquet", split_rows)
    measured = counter.how
    context = {"server_url": server_url, "max_turns": max_turns, "synth_version": __version__,
               "splits": sorted(rows), "out": str(out.resolve()), "agent_name": AGENT_NAME,
               "max_prompt_length": prompt_length, "max_response_length": max_response_length,
               "longest_prompt": longest, "measured": measured, "max_tool_response_length": MAX_TOOL_RESPONSE_CHARS,
               "max_parallel_calls": MAX_PARALLEL_CALLS, "over": len(over), "reward_kind": reward}
    write_atomic(out / "synth_agent_loop.py", render_template("export", "verl/synth_agent_loop.py.j2", **context))
    write_atomic(out / "agent_loop.yaml", render_template("export", "verl/agent_loop.yaml.j2", **context))
    write_atomic(out / "README.md", render_template("export", "verl/README.md.j2", **context))
    counts = ", ".join(f"{len(r)} {s}" for s, r in sorted(rows.items()))
    note = skipped_note(skipped)
    report = (f"verl: {counts} rows from {len(envs)} env(s), agent loop and config in {out}{note}; longest prompt "
              f"{longest} tokens ({measured}), README sets data.max_prompt_length={prompt_length}")
    if over:
        where = f"{longest_row['extra_info']['env_id']}/{longest_row['extra_info']['task_id']}"
        report += (f"\nwarning: {len(over)} prompt(s) are longer than --max-prompt-length {prompt_length} (longest "
                   f"{longest} tokens, {where}); the agent loop stops with an error on them rather than cut the "
                   f"system prompt and tools: raise it to at least {longest}")
    return report
