"""`synth calibrate` against a scripted policy on the fake model server whose success rate per task is
known: calibration.json records exactly those pass rates (and the model), a rerun does nothing again,
`synth export --pass-rate LO:HI` keeps exactly the tasks in the band and writes their calibration into
each row, and `synth view` shows the distribution per env and per template."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from envkit import GOLD_ANSWERS, TASKS
from verifykit import make_verified_library

from synth.cli import app
from synth.errors import InputError
from synth.llm.script import Reply, ToolCall
from synth.view.app import create_app
from synth.view.sources import resolve

K = 8
SOLVED = {"task_01": 8, "task_02": 4, "task_03": 2, "task_04": 0}  # rollouts (of K) the policy gets right
GOLD = {t.task_id: t for t in TASKS}


def policy(info) -> Reply:
    """Rollout i of a task succeeds when i < SOLVED[task]: the gold calls one per turn, then the right
    answer; otherwise it gives up at once."""
    task_id, i = info.subject.split("/", 1)[1].split("#")
    if int(i) >= SOLVED[task_id]:
        return Reply(text="Sorry, I can't help with that.")
    task, done = GOLD[task_id], len(info.tool_results)
    if done < len(task.gold):
        return Reply(tool_calls=[ToolCall(name=task.gold[done].tool, arguments=dict(task.gold[done].arguments))])
    return Reply(text=GOLD_ANSWERS.get(task_id) or str(task.expected_answer))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    make_verified_library(tmp_path / "gen" / "envs")
    return tmp_path / "gen"


def calibrate(fake_model, root: Path, tmp_path: Path):
    return CliRunner().invoke(app, ["calibrate", str(root), "--model", "openai/policy", "--base-url",
                                    fake_model.openai_base_url, "--cache-dir", str(tmp_path / "cache"), "-k", str(K),
                                    "--retry-base-delay", "0.01"])


def test_pass_rates_match_the_policy_and_exports_keep_exactly_the_band(fake_model, root: Path, tmp_path: Path):
    fake_model.script.add("calibrate", "*", handler=policy)
    done = calibrate(fake_model, root, tmp_path)
    assert done.exit_code == 0, done.output
    assert "4 task(s) calibrated" in done.output and "2 with a pass rate strictly between 0 and 1" in done.output
    env = root / "envs" / "city_library"
    data = json.loads((env / "calibration.json").read_text())
    assert data["model"] == "openai/policy" and data["k"] == K and data["reward"] == "rubric"
    rates = {t: r["pass_rate"] for t, r in data["tasks"].items()}
    assert rates == {t: n / K for t, n in SOLVED.items()}
    assert data["tasks"]["task_01"]["mean_rubric"] == 1.0 and data["tasks"]["task_04"]["passes"] == 0
    assert data["tasks"]["task_02"]["mean_state"] == 0.5 and data["tasks"]["task_02"]["scored"] == K
    asked = [r.subject for r in fake_model.requests if r.stage == "calibrate"]
    assert {s.split("#")[1] for s in asked} == {str(i) for i in range(K)}  # each rollout its own request

    before = len(fake_model.requests)
    again = calibrate(fake_model, root, tmp_path)  # the same command again: nothing left to do
    assert again.exit_code == 0 and "0 task(s) calibrated (4 already done)" in again.output
    assert len(fake_model.requests) == before

    out = tmp_path / "verl"
    verl = CliRunner().invoke(app, ["export", "verl", str(root), "--out", str(out), "--pass-rate", "0.1:0.9"])
    assert verl.exit_code == 0, verl.output
    import pyarrow.parquet as pq

    rows = pq.read_table(out / "train.parquet").to_pylist()
    assert sorted(r["extra_info"]["task_id"] for r in rows) == ["task_02", "task_03"]  # 0.5 and 0.25
    assert not (out / "test.parquet").exists()  # task_04 (test) never succeeds: out of the band
    by_task = {r["extra_info"]["task_id"]: r["extra_info"]["calibration"] for r in rows}
    assert by_task["task_03"]["pass_rate"] == 0.25 and by_task["task_03"]["model"] == "openai/policy"

    pkg = CliRunner().invoke(app, ["export", "verifiers", str(root), "--out", str(tmp_path / "pkg"),
                                   "--pass-rate", "1:1"])
    assert pkg.exit_code == 0, pkg.output
    tasks = [json.loads(line) for line in (tmp_path / "pkg" / "synth_envs" / "tasks.jsonl").read_text().splitlines()]
    assert [t["task_id"] for t in tasks] == ["task_01"] and tasks[0]["calibration"]["pass_rate"] == 1.0

    for bad in ("0.9:0.1", "half", "0:2"):
        wrong = CliRunner().invoke(app, ["export", "verl", str(root), "--out", str(tmp_path / "x"), "--pass-rate", bad])
        assert isinstance(wrong.exception, InputError) and "--pass-rate" in str(wrong.exception)  # `error:`, exit 2

    with TestClient(create_app(resolve([root])), base_url="http://127.0.0.1") as client:
        page = client.get("/envs/city_library").text
    assert 'id="calibration-table"' in page and "openai/policy" in page and "k=8" in page
    assert "<td>all tasks</td><td class=\"num\">4</td>" in page and "(written one by one)" in page


def test_an_env_without_calibration_is_left_out_of_a_band_export(root: Path, tmp_path: Path):
    result = CliRunner().invoke(app, ["export", "verl", str(root), "--out", str(tmp_path / "verl"),
                                      "--pass-rate", "0:1"])
    assert isinstance(result.exception, InputError) and "no calibration.json" in str(result.exception)
