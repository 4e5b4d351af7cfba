"""The offline demo's rewards, as a user gets them from `synth run -n 3` with no key: every exploit
probe of every task (hedges with alternatives in no table among them) stays below the threshold
under the rubric and the state reward, the gold solutions and every recorded correct case earn 1.0
on both rewards, concise answers and free-text reasons other than the gold's are paid, the reward
agents ran on every task (paraphrases, solver, red team) and found nothing to repair, and `synth
check` shows the probe rewards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth.runtime import Env
from synth_validators.common import read_folder
from synth_validators.probes import DEFAULT_THRESHOLD
from synth_validators.reward_cases import case_rewards


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "d"
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--out", str(out), "-n", "3", "--plain", "--templates", "0"],
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
            for r in records:  # under both rewards
                assert r["reward"] < DEFAULT_THRESHOLD and r["state"] < DEFAULT_THRESHOLD and not r["passed"], \
                    (env.name, task_id, r)
        read = [t for t in tasks if t in report["probes"] and any(r["probe"] == "hedged (possibly)"
                                                                   for r in report["probes"][t])]
        hedges = {r["probe"] for t in read for r in report["probes"][t] if r["probe"].startswith("hedged")}
        assert read and hedges == {"hedged", "hedged (not in the data)", "hedged (possibly)", "hedged (between)"}


def test_every_recorded_correct_case_earns_full_reward_under_both_rewards(demo: Path):
    counted = 0
    for env_dir in sorted(p for p in demo.iterdir() if p.is_dir()):
        folder = read_folder(env_dir)
        tasks = {t.task_id: t for t in folder.tasks}
        with Env.load(env_dir) as env:
            for case in folder.cases:
                rubric, state, errors = case_rewards(env, tasks[case.task_id], case)
                assert case.expect == "pass" and not errors, case
                assert rubric.reward == 1.0 and state.reward == 1.0, (env_dir.name, case.case_id, case.answer, state)
                counted += 1
    assert counted == 137  # paraphrases (10 per read task) and the solver's runs by another path


def _both(env: Env, task_id: str, calls: list[tuple[str, dict]], answer: str):
    with env.episode(task_id) as episode:
        for tool, arguments in calls:
            assert episode.call(tool, arguments)["ok"], (tool, arguments)
        return episode.evaluate(answer, reward="both")


def test_concise_answers_and_another_free_text_reason_are_paid_and_hedges_are_not(demo: Path):
    with Env.load(demo / "maple_street_public_library") as library:
        # The expected answer adds "(the library has 3; the third is on loan)"; the question asks for 2.
        assert [f.value for f in library.tasks["task_01"].facts] == ["2"]
        for concise in ("2", "2 copies of The Night Circus can be borrowed right now."):
            reward = _both(library, "task_01", [("search_books", {"query": "Night Circus"})], concise)
            assert (reward.rubric, reward.state) == (1.0, 1.0), (concise, reward.state_checks)
    with Env.load(demo / "riverside_veterinary_clinic") as clinic:
        task = clinic.tasks["task_07"]
        assert task.free_columns == ["appointments.reason"] and task.gold[-1].arguments["reason"] == "Dental check"
        booking = {**task.gold[-1].arguments, "reason": "Dental checkup and cleaning"}
        reward = _both(clinic, "task_07", [(task.gold[-1].tool, booking)], task.expected_answer)
        assert (reward.rubric, reward.state, reward.reward) == (1.0, 1.0, 1.0), reward.state_checks
        # What the task fixes is still compared exactly: the same booking at another hour is not the gold state.
        later = _both(clinic, "task_07", [(task.gold[-1].tool, {**booking, "start_time": "2025-06-11 15:00"})],
                      task.expected_answer)
        assert later.state == 0.0 and later.reward == 0.0
        # The phone number hedged with an alternative that is in no table, three ways: both rewards fail.
        calls = [(c.tool, dict(c.arguments)) for c in clinic.tasks["task_01"].gold]
        for hedge in ("Daniel Okafor's phone number on file is 555-0104. Or maybe: 666-1215.",
                      "555-0104, possibly 555-0105.", "Somewhere between 555-0104 and 555-0199."):
            reward = _both(clinic, "task_01", calls, hedge)
            assert reward.rubric < DEFAULT_THRESHOLD and reward.state == 0.0, (hedge, reward)


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
