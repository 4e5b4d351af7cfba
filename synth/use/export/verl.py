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
its tools, so the export measures every prompt as the agent loop renders it (system
and task messages plus the tool schemas, through the model's chat template when
--tokenizer names it, else a conservative estimate) and writes lengths that fit into
the README's command; it warns when a prompt exceeds a length given on the command line.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from synth import __version__
from synth.atomic import write_atomic
from synth.errors import InputError
from synth.pipeline.prompts import render_template
from synth.use.agent import agent_messages
from synth.use.export.source import load_envs, skipped_note

AGENT_NAME = "synth_agent"
DATA_SOURCE_PREFIX = "synth/"
LENGTH_STEP = 256  # written lengths are rounded up to a multiple of this
DEFAULT_RESPONSE_LENGTH = 8192  # model turns plus the tool results between them
MAX_TOOL_RESPONSE_CHARS = 8192  # multi_turn.max_tool_response_length (verl's default 256 cuts JSON results)
MAX_PARALLEL_CALLS = 8
# Without a tokenizer: BPE tokenizers of current chat models spend about one token per
# 3.5-4 bytes of English and JSON; one per 3 bytes, plus chat-template framing, is the
# conservative side.
_BYTES_PER_TOKEN = 3.0
_FRAMING_TOKENS = 64 + 16  # template preamble + per-message headers (two messages)


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


def load_tokenizer(name: str) -> Any:
    """A Hugging Face tokenizer with a chat template (local folder, or hub id when online)."""
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot load"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"--tokenizer {name}: cannot load it ({first}); pass a local folder holding "
                         "tokenizer.json and tokenizer_config.json, or a model id the hub can serve") from None
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(f"--tokenizer {name} has no chat template; pass the tokenizer of the chat model you train")
    return tokenizer


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
    text = "".join(str(m.get("content") or "") for m in messages) + json.dumps(tools, ensure_ascii=False)
    return math.ceil(len(text.encode("utf-8")) / _BYTES_PER_TOKEN) + _FRAMING_TOKENS


def prompt_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]], tokenizer: Any = None) -> int:
    """Tokens of the prompt as the agent loop renders it (with the episode's tools)."""
    if tokenizer is None:
        return estimate_tokens(messages, tools)
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    return len(tokenizer.encode(text, add_special_tokens=False))


def round_up(n: int, step: int = LENGTH_STEP) -> int:
    return max(step, math.ceil(n / step) * step)


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
    loaded = load_tokenizer(tokenizer) if tokenizer else None
    rows = verl_rows(envs)
    tools = {env.id: env.openai_tools() for env in envs}
    lengths = [(prompt_tokens(r["prompt"], tools[r["extra_info"]["env_id"]], loaded), r)
               for split_rows in rows.values() for r in split_rows]
    longest, longest_row = max(lengths, key=lambda x: x[0])
    prompt_length = max_prompt_length if max_prompt_length is not None else round_up(longest)
    over = [r for n, r in lengths if n > prompt_length]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for split, split_rows in rows.items():
        _write_parquet(out / f"{split}.parquet", split_rows)
    measured = f"counted with {tokenizer}'s chat template" if loaded is not None else \
        "estimated; --tokenizer MODEL counts them exactly"
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
