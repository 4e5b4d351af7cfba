"""`synth export sft --from gold`: SFT rows with no model and no key, from the tasks'
gold solutions replayed in sandboxed episodes; checked on the offline demo and on the
library env with a task whose gold no longer passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envkit import library_draft
from exportkit import add_agent_context
from synth.cli import app
from synth.errors import InputError
from synth.folder.format import write_env
from synth.runtime import Env
from synth.use.agent import AgentContext, agent_messages, observation_text
from synth.use.export import export


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def demo_envs(tmp_path_factory) -> Path:
    """The offline demo's three verified envs (`synth run -n 3` with no key)."""
    work = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "-n", "3", "--templates", "0"], cwd=work, env=offline_env(),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return work / "generated" / "envs"


def test_gold_sft_on_the_demo(demo_envs: Path, tmp_path: Path):
    out = tmp_path / "gold.jsonl"
    done = subprocess.run([sys.executable, "-m", "synth", "export", "sft", str(demo_envs), "--from", "gold",
                           "--out", str(out)], env=offline_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = read_jsonl(out)
    expected = []  # every task whose gold passes with its expected answer, replayed here independently
    for env_dir in sorted(demo_envs.iterdir()):
        with Env.load(env_dir) as env:
            for task in sorted(env.tasks.values(), key=lambda t: t.task_id):
                if not task.expected_answer:
                    continue
                with env.episode(task.task_id) as episode:
                    observations = [episode.call(c.tool, dict(c.arguments)) for c in task.gold]
                    reward = episode.evaluate(str(task.expected_answer))
                if reward.passed:
                    expected.append((env.id, task, observations, AgentContext.of_env(env_dir)))
    assert len(expected) >= 30
    assert [(r["env_id"], r["task_id"]) for r in rows] == [(e, t.task_id) for e, t, _, _ in expected]
    assert f"sft: {len(rows)} rows from gold solutions" in done.stdout
    for row, (env_id, task, observations, context) in zip(rows, expected):
        messages = row["messages"]
        assert messages[:2] == agent_messages(context, task.instruction)
        calls = [m for m in messages if m.get("tool_calls")]
        results = [m for m in messages if m["role"] == "tool"]
        assert [(c["tool_calls"][0]["function"]["name"], c["tool_calls"][0]["function"]["arguments"])
                for c in calls] == [(g.tool, dict(g.arguments)) for g in task.gold]
        assert [m["content"] for m in results] == [observation_text(o) for o in observations]  # real results
        assert [m["tool_call_id"] for m in results] == [c["tool_calls"][0]["id"] for c in calls]
        assert messages[-1] == {"role": "assistant", "content": str(task.expected_answer)}
        assert row["reward"] == 1.0 and [t["function"]["name"] for t in row["tools"]]


def test_gold_sft_keeps_only_tasks_whose_gold_passes(tmp_path: Path):
    draft = library_draft()
    tasks = [t.model_copy(update={"expected_answer": None}) if t.task_id == "task_04" else t for t in draft.tasks]
    # task_03's gold now returns only one of Tom's two books: its verifier fails
    tasks = [t.model_copy(update={"gold": t.gold[:-1], "expected_answer": "Both books are back."})
             if t.task_id == "task_03" else t for t in tasks]
    env_dir = write_env(draft.model_copy(update={"tasks": tasks}), tmp_path / "envs" / "city_library")
    add_agent_context(env_dir)
    out = tmp_path / "gold.jsonl"
    result = CliRunner().invoke(app, ["export", "sft", str(tmp_path / "envs"), "--from", "gold", "--out", str(out),
                                      "--arguments", "json"])
    assert result.exit_code == 0, result.output
    assert "skipped tasks: 1 no expected answer, 1 gold failed" in result.output, result.output
    rows = read_jsonl(out)
    assert [r["task_id"] for r in rows] == ["task_01", "task_02"]
    assert rows[0]["messages"][-1] == {"role": "assistant", "content": "2"}
    assert "acting for Maya Patel" in rows[0]["messages"][0]["content"]
    arguments = [c["function"]["arguments"] for m in rows[1]["messages"] for c in m.get("tool_calls", [])]
    assert arguments and all(isinstance(json.loads(a), dict) for a in arguments)


def test_gold_sft_with_nothing_to_export_is_a_clear_error(tmp_path: Path):
    draft = library_draft()
    tasks = [t.model_copy(update={"expected_answer": None}) for t in draft.tasks]
    write_env(draft.model_copy(update={"tasks": tasks}), tmp_path / "envs" / "city_library")
    with pytest.raises(InputError, match="no task .* has a gold solution that passes"):
        export("sft", tmp_path / "envs", tmp_path / "o.jsonl", source="gold")


def test_rejected_envs_are_skipped_unless_asked(tmp_path: Path):
    env_dir = write_env(library_draft(), tmp_path / "envs" / "city_library")
    (env_dir / "review.json").write_text(json.dumps({"decision": "rejected", "note": "bad data", "reviewer": "ana",
                                                     "at": "2025-06-02T10:00:00Z"}))
    with pytest.raises(InputError, match="rejected in review.json"):
        export("sft", tmp_path / "envs", tmp_path / "o.jsonl", source="gold")
    result = CliRunner().invoke(app, ["export", "sft", str(tmp_path / "envs"), "--from", "gold", "--out",
                                      str(tmp_path / "o.jsonl"), "--include-rejected"])
    assert result.exit_code == 0 and "4 rows" in result.output, result.output
    (env_dir / "review.json").write_text("{oops")
    with pytest.raises(InputError, match="review.json is unreadable"):
        export("awm", tmp_path / "envs", tmp_path / "awm")
