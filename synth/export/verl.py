"""verl export: RL prompts as parquet plus an agent loop that plays them on synth episodes.

Rows follow verl's RLHFDataset contract (see verl's data preparation docs):
  data_source   "synth/<env_id>"
  prompt        chat messages [system, user] (data.prompt_key=prompt, data.return_raw_chat=True)
  ability       "tool_use"
  agent_name    "synth_agent" (selects the agent loop below)
  reward_model  {"style": "rule", "ground_truth": JSON of env_id, task_id and the expected answer}
  extra_info    {"split", "index", "env_id", "task_id"}
The agent loop (synth_agent_loop.py, registered through agent_loop.yaml) opens
one episode per trajectory on `synth serve`, runs the tool calls there and sets
reward_score from the env's verifier, so no reward function is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth import __version__
from synth.errors import InputError
from synth.export.source import load_envs
from synth.prompts import render_template
from synth.rollout import agent_messages
from synth.store import write_atomic

AGENT_NAME = "synth_agent"
DATA_SOURCE_PREFIX = "synth/"


def verl_rows(envs: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """Rows by split, indexed within their split."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for env in envs:
        for task in sorted(env.tasks, key=lambda t: t.task_id):
            split_rows = rows.setdefault(task.split, [])
            truth = {"env_id": env.id, "task_id": task.task_id, "expected_answer": task.expected_answer}
            split_rows.append({
                "data_source": DATA_SOURCE_PREFIX + env.id,
                "prompt": agent_messages(env.manifest.title, env.manifest.scenario, task.instruction,
                                         today=env.manifest.today, acting_user=env.manifest.acting_user),
                "ability": "tool_use",
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "rule", "ground_truth": json.dumps(truth, ensure_ascii=False, default=str)},
                "extra_info": {"split": task.split, "index": len(split_rows), "env_id": env.id,
                               "task_id": task.task_id},
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
                max_turns: int = 10) -> str:
    envs, skipped = load_envs(root)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = verl_rows(envs)
    for split, split_rows in rows.items():
        _write_parquet(out / f"{split}.parquet", split_rows)
    context = {"server_url": server_url, "max_turns": max_turns, "synth_version": __version__,
               "splits": sorted(rows), "out": str(out.resolve()), "agent_name": AGENT_NAME}
    write_atomic(out / "synth_agent_loop.py", render_template("export", "verl/synth_agent_loop.py.j2", **context))
    write_atomic(out / "agent_loop.yaml", render_template("export", "verl/agent_loop.yaml.j2", **context))
    write_atomic(out / "README.md", render_template("export", "verl/README.md.j2", **context))
    counts = ", ".join(f"{len(r)} {s}" for s, r in sorted(rows.items()))
    note = f"; skipped {len(skipped)} env(s)" if skipped else ""
    return f"verl: {counts} rows from {len(envs)} env(s), agent loop and config in {out}{note}"
