"""The offline demo's rewards, as a user gets them from `synth run -n 3` with no key: every exploit
probe of every task stays below the threshold, the gold solutions earn 1.0 on both rewards, the
reward agents ran on every task (paraphrases, solver, red team) and found nothing to repair, and
`synth check` shows the probe rewards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth.runtime import Env
from synth_validators.probes import DEFAULT_THRESHOLD


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "d"
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--out", str(out), "-n", "3", "--plain"],
                          env=offline_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 of 3 wanted verified env(s): done" in done.stderr
    return out / "envs"


def test_every_probe_of_every_task_is_below_the_threshold(demo: Path):
    envs = sorted(p for p in demo.iterdir() if p.is_dir())
    assert len(envs) == 3
    for env in envs:
        report = json.loads((env / "report.json").read_text())
        tasks = [json.loads(line)["task_id"] for line in (env / "tasks.jsonl").read_text().splitlines()]
        assert sorted(report["probes"]) == sorted(tasks), env.name  # every task was probed
        for task_id, records in report["probes"].items():
            kinds = {r["probe"].split(" (")[0] for r in records}
            assert {"empty", "shotgun", "refusal", "collateral"} <= kinds, (env.name, task_id)
            for r in records:
                assert r["reward"] < DEFAULT_THRESHOLD and not r["passed"], (env.name, task_id, r)


def test_gold_earns_full_reward_on_both_rewards(demo: Path):
    for env_dir in sorted(p for p in demo.iterdir() if p.is_dir()):
        with Env.load(env_dir) as env:
            for task in env.tasks.values():
                with env.episode(task.task_id) as episode:
                    for call in task.gold:
                        assert episode.call(call.tool, dict(call.arguments))["ok"]
                    reward = episode.evaluate(task.expected_answer, reward="both")
                assert (reward.rubric, reward.state, reward.reward) == (1.0, 1.0, 1.0), (env_dir.name, task.task_id,
                                                                                        reward)


def test_the_reward_agents_checked_every_task_and_their_cases_replay(demo: Path):
    for env_dir in sorted(p for p in demo.iterdir() if p.is_dir()):
        loop = json.loads((env_dir / "report.json").read_text())["check_loop"]
        agents = {task: found for r in loop["rounds"] for task, found in r["agents"].items()}
        tasks = {json.loads(line)["task_id"]: json.loads(line)["kind"]
                 for line in (env_dir / "tasks.jsonl").read_text().splitlines()}
        assert set(agents) == set(tasks) and not any(r["errors"] for r in loop["rounds"])
        for task_id, found in agents.items():
            assert found["solver"]["state"] == "same as gold" and found["solver"]["reward"] == 1.0, task_id
            assert found["red_team"]["exploits"] == 0 and found["red_team"]["attempts"] >= 1, task_id
            if tasks[task_id] == "read":
                assert found["paraphrase"] == {"tried": 10, "failed": 0}, task_id
        assert not [rep for r in loop["rounds"] for rep in r["repairs"] if rep["kind"] == "verifier"]
        cases = [json.loads(line) for line in (env_dir / "verifier_tests.jsonl").read_text().splitlines()]
        assert {c["source"] for c in cases} == {"paraphrase", "solver"} and {c["expect"] for c in cases} == {"pass"}


def test_synth_check_passes_and_shows_the_probe_rewards(demo: Path):
    done = subprocess.run([sys.executable, "-m", "synth", "check", *map(str, sorted(demo.iterdir()))],
                          env=offline_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3/3 env(s) verified" in done.stdout
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip().startswith("probes task_")]
    assert len(lines) == 34  # 10 + 12 + 12 tasks
    assert all(": max 0." in line and "shotgun 0." in line and "!" not in line for line in lines)
