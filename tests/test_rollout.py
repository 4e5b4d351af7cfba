"""`synth rollout` against the fake model server: a model that plays each task's
gold actions earns reward 1.0, one that does nothing fails the pass mark; both
land in trajectories JSONL, reruns resume, failures are recorded and retried."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envkit import TASKS, make_library_env
from synth.artifacts import Task, Trajectory
from synth.config import Settings
from synth.llm import Gateway
from synth.llm.script import Reply, ToolCall
from synth.use.rollout import read_trajectories, rollout_async, window_samples

GOLD = {t.task_id: t for t in TASKS}


def gold_player_for(env_dir: Path):
    """A model that replays each task's gold calls from the env's tasks.jsonl, one per
    turn, then states the expected answer (read tasks) or confirms (write tasks)."""
    tasks = {t.task_id: t for t in (Task.model_validate_json(line) for line in
                                    (env_dir / "tasks.jsonl").read_text().splitlines() if line.strip())}

    def play(info):
        task = tasks[info.subject.split("/", 1)[1]]
        done = len(info.tool_results)
        if done < len(task.gold):
            call = task.gold[done]
            return Reply(tool_calls=[ToolCall(name=call.tool, arguments=dict(call.arguments))])
        if task.expected_answer is not None:
            return Reply(text=f"The answer is {task.expected_answer}.")
        return Reply(text="Done, all set.")

    return play


@pytest.fixture
def envs(tmp_path: Path) -> Path:
    make_library_env(tmp_path / "gen" / "envs")
    return tmp_path / "gen"


@pytest.fixture
def gold_player(envs: Path):
    return gold_player_for(envs / "envs" / "city_library")


def gateway(fake_model, tmp_path: Path, **extra) -> Gateway:
    return Gateway(Settings(model="openai/test-model", base_url=fake_model.openai_base_url,
                            cache_dir=tmp_path / "cache", retry_base_delay=0.01, **extra))


def run(coro):
    return asyncio.run(coro)


def test_gold_player_earns_full_reward_and_nothing_player_fails(gold_player, fake_model, envs, tmp_path):
    fake_model.script.add("rollout", "*", handler=gold_player)
    out = tmp_path / "gold.jsonl"
    summary = run(rollout_async(envs, gateway(fake_model, tmp_path), out, concurrency=2, max_turns=8))
    assert summary.written == 4 and summary.failed == 0
    trajs = {t.task_id: t for t in read_trajectories(out)}
    assert set(trajs) == set(GOLD)
    for task_id, traj in trajs.items():
        assert traj.reward == 1.0 and traj.passed, (task_id, traj.checks, traj.final_answer)
        assert [c.name for c in traj.tool_calls] == [g.tool for g in GOLD[task_id].gold]
        assert all(c.observation["ok"] for c in traj.tool_calls)
        assert traj.model == "openai/test-model" and traj.usage["prompt_tokens"] > 0
        assert traj.messages[0]["role"] == "system" and traj.messages[1]["content"] == GOLD[task_id].instruction
        assert traj.messages[-1] == {"role": "assistant", "content": traj.final_answer}
        assert {t["function"]["name"] for t in traj.tools} >= {"checkout_book", "search_books"}
    checkout = trajs["task_02"].messages[6]
    assert checkout["role"] == "assistant"
    assert json.loads(checkout["tool_calls"][0]["function"]["arguments"]) == {"member_id": 2, "book_id": 3}
    # every request was a function-calling request on the "rollout" stage with the env/task subject
    rollout_requests = [r for r in fake_model.requests if r.stage == "rollout"]
    assert {r.subject for r in rollout_requests} == {f"city_library/{t}" for t in GOLD}
    assert all(r.body["tools"] for r in rollout_requests)

    fake_model.script.rules.clear()
    fake_model.script.add("rollout", "*", Reply(text="Sorry, I can't help with that."))
    idle_out = tmp_path / "idle.jsonl"
    run(rollout_async(envs, gateway(fake_model, tmp_path), idle_out, tasks=2))
    idle = read_trajectories(idle_out)
    assert sorted(t.task_id for t in idle) == ["task_01", "task_02"]
    for traj in idle:
        assert traj.reward is not None and traj.reward < 1.0 and not traj.passed
        assert traj.tool_calls == [] and traj.turns == 1 and traj.stop_reason == "answered"


def test_rerun_skips_done_tasks_and_retries_failed_ones(gold_player, fake_model, envs, tmp_path):
    fake_model.script.add("rollout", "city_library/task_03", Reply(fault="400"))
    fake_model.script.add("rollout", "*", handler=gold_player)
    out = tmp_path / "t.jsonl"
    first = run(rollout_async(envs, gateway(fake_model, tmp_path), out))
    assert first.written == 4 and first.failed == 1 and first.passed == 3
    failed = [t for t in read_trajectories(out) if t.error]
    assert [t.task_id for t in failed] == ["task_03"] and failed[0].reward is None
    assert "400" in failed[0].error and failed[0].stop_reason == "error"

    fake_model.script.rules.clear()
    fake_model.script.add("rollout", "*", handler=gold_player)
    before = len(fake_model.requests)
    second = run(rollout_async(envs, gateway(fake_model, tmp_path), out))
    assert second.skipped == 3 and second.written == 1 and second.passed == 1
    assert {r.subject for r in fake_model.requests[before:]} == {"city_library/task_03"}
    trajs = read_trajectories(out)
    assert len(trajs) == 4 and all(t.error is None and t.passed for t in trajs)


def test_anthropic_models_roll_out_through_the_same_loop(gold_player, fake_model, envs, tmp_path):
    fake_model.script.add("rollout", "*", handler=gold_player)
    gw = Gateway(Settings(model="anthropic/test-model", base_url=fake_model.anthropic_base_url,
                          cache_dir=tmp_path / "cache", retry_base_delay=0.01))
    out = tmp_path / "claude.jsonl"
    summary = run(rollout_async(envs, gw, out, tasks=2))
    assert summary.passed == 2
    assert {r.api for r in fake_model.requests if r.stage == "rollout"} == {"anthropic"}
    traj = next(t for t in read_trajectories(out) if t.task_id == "task_02")
    assert traj.model == "anthropic/test-model" and traj.reward == 1.0 and len(traj.tool_calls) == 3


def test_max_turns_stops_and_last_text_is_the_answer(fake_model, envs: Path, tmp_path: Path):
    looping = Reply(text="Let me look.", tool_calls=[ToolCall(name="search_books", arguments={"query": "Dune"})])
    fake_model.script.add("rollout", "*", looping)
    out = tmp_path / "loop.jsonl"
    run(rollout_async(envs, gateway(fake_model, tmp_path), out, tasks=1, max_turns=3))
    (traj,) = read_trajectories(out)
    assert traj.turns == 3 and traj.stop_reason == "max_turns" and len(traj.tool_calls) == 3
    assert traj.final_answer == "Let me look." and not traj.passed


def test_bad_tool_calls_become_error_observations(fake_model, envs: Path, tmp_path: Path):
    fake_model.script.add("rollout", "*",
                          Reply(tool_calls=[ToolCall(name="checkout_book", arguments={"member_id": 2})]),
                          Reply(tool_calls=[ToolCall(name="no_such_tool", arguments={})]),
                          Reply(text="I give up."))
    out = tmp_path / "bad.jsonl"
    run(rollout_async(envs, gateway(fake_model, tmp_path), out, tasks=1))
    (traj,) = read_trajectories(out)
    assert [c.observation["ok"] for c in traj.tool_calls] == [False, False]
    assert "book_id" in traj.tool_calls[0].observation["error"]
    tool_messages = [m for m in traj.messages if m["role"] == "tool"]
    assert tool_messages[1]["content"].startswith("error: unknown tool")


def test_window_samples_keep_head_first_exchange_and_last_turns(gold_player, fake_model, envs, tmp_path):
    fake_model.script.add("rollout", "*", handler=gold_player)
    out = tmp_path / "w.jsonl"
    summary = run(rollout_async(envs, gateway(fake_model, tmp_path), out, window=1))
    assert summary.window_out == tmp_path / "w.window.jsonl"
    lines = summary.window_out.read_text().splitlines()
    assert len(lines) == summary.window_samples == sum(len(t.gold) + 1 for t in TASKS)

    traj = next(t for t in read_trajectories(out) if t.task_id == "task_03")  # 4 tool turns + answer
    samples = window_samples(traj, 1)
    assert [s.turn for s in samples] == [1, 2, 3, 4, 5]
    system, user = traj.messages[:2]
    assistants = [m for m in traj.messages if m["role"] == "assistant"]
    for s in samples:
        assert s.messages[:2] == [system, user] and s.messages[-1] == assistants[s.turn - 1]
    assert len(samples[0].messages) == 3  # head + the trained turn
    assert samples[1].messages[2:] == traj.messages[2:4] + [assistants[1]]  # first exchange, no window yet
    # turn 5 keeps the first exchange and only turn 4 (W=1), not turns 2-3
    fifth = samples[4].messages
    kept_calls = [m["tool_calls"][0]["function"]["name"] for m in fifth if m.get("tool_calls")]
    assert kept_calls == ["get_member", "return_book"]
    assert len(fifth) == 2 + 2 + 2 + 1
    assert samples[4].reward == traj.reward and Trajectory.model_validate(traj.model_dump())
    wide = window_samples(traj, 10)
    assert len(wide[4].messages) == 2 + 8 + 1


def test_cli_rollout(gold_player, fake_model, envs, tmp_path, monkeypatch):
    from synth.cli import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))  # rollout checks the model first
    fake_model.script.add("rollout", "*", handler=gold_player)
    out = tmp_path / "cli.jsonl"
    result = CliRunner().invoke(app, ["rollout", str(envs), "--model", "openai/test-model", "--base-url",
                                      fake_model.openai_base_url, "--tasks", "1", "--concurrency", "1",
                                      "--max-turns", "5", "--out", str(out), "--window", "2"])
    assert result.exit_code == 0, result.output
    assert "1 written" in result.output and "mean reward 1.000" in result.output
    assert len(read_trajectories(out)) == 1 and (tmp_path / "cli.window.jsonl").is_file()

    missing = CliRunner().invoke(app, ["rollout", str(tmp_path / "nope"), "--model", "openai/test-model",
                                       "--out", str(out)])
    assert missing.exit_code != 0


def test_budget_stops_new_episodes_cleanly_and_a_rerun_resumes(gold_player, fake_model, envs, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/test-model": {"input": 1_000_000, "output": 1_000_000}}))
    fake_model.script.add("rollout", "*", handler=gold_player)
    out = tmp_path / "budget.jsonl"
    capped = gateway(fake_model, tmp_path, max_cost=0.01, prices_file=prices)
    summary = run(rollout_async(envs, capped, out, concurrency=1))
    assert summary.stopped and "budget" in summary.stopped and summary.written == 0
    assert len([r for r in fake_model.requests if r.stage == "rollout"]) == 1  # nothing started after the cap
    assert not out.read_text().strip()

    resumed = run(rollout_async(envs, gateway(fake_model, tmp_path), out, concurrency=1))
    assert resumed.written == 4 and resumed.passed == 4 and resumed.stopped is None


def test_rejected_envs_are_skipped_unless_included(gold_player, fake_model, envs, tmp_path, monkeypatch):
    from synth.cli import app
    from synth.folder.review import write_review

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))
    fake_model.script.add("rollout", "*", handler=gold_player)
    write_review(envs / "envs" / "city_library", "rejected", note="task_03 is ambiguous")
    out = tmp_path / "rejected.jsonl"
    base = ["rollout", str(envs), "--model", "openai/test-model", "--base-url", fake_model.openai_base_url,
            "--tasks", "1", "--concurrency", "1", "--out", str(out)]
    skipped = CliRunner().invoke(app, base)
    assert "skipped" in skipped.output and "rejected in review.json: task_03 is ambiguous" in skipped.output
    assert "--include-rejected" in skipped.output
    assert not out.exists() or not read_trajectories(out)

    included = CliRunner().invoke(app, [*base, "--include-rejected"])
    assert included.exit_code == 0, included.output
    assert [t.env_id for t in read_trajectories(out)] == ["city_library"]
