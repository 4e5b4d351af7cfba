"""`--reward rubric|state|both` where rewards are consumed: synth serve (and a request's own
choice), synth rollout, and the exports (verl, verifiers, sft --from gold; awm refuses it),
whose rows also carry each task's probe rewards."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from envkit import GOLD_ANSWERS
from synth.llm.script import Reply
from synth.cli import app
from synth.pipeline.verify import check_env
from synth.use.server import background
from test_rollout import gold_player_for
from verifykit import make_verified_library


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("select")
    env = make_verified_library(out / "envs")
    assert check_env(env).verified  # writes report.json `probes`
    return out


def test_serve_reports_both_rewards_and_scores_the_one_asked_for(root: Path) -> None:
    srv, _ = background(root, reward="state")
    with srv, httpx.Client(base_url=srv.url, timeout=30) as client:
        eid = client.post("/envs/city_library/episodes", json={"task_id": "task_02"}).json()["episode_id"]
        # Maya gets Sapiens instead of Dune: the rubric gives partial credit, the state reward none.
        assert client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2, "book_id": 5}).json()["ok"]
        by_default = client.post(f"/episodes/{eid}/evaluate", json={"answer": "Dune is checked out."}).json()
        assert by_default["kind"] == "state" and by_default["reward"] == 0.0 == by_default["state"]
        assert 0 < by_default["rubric"] < 0.5 and by_default["state_checks"][0]["passed"] is False
        asked = client.post(f"/episodes/{eid}/evaluate", json={"answer": "Dune is checked out.",
                                                               "reward": "rubric"}).json()
        assert asked["kind"] == "rubric" and asked["reward"] == by_default["rubric"]
        bad = client.post(f"/episodes/{eid}/evaluate", json={"answer": "x", "reward": "best"})
        assert bad.status_code == 422


def test_rollout_records_the_chosen_reward_and_both_scores(root: Path, fake_model, tmp_path: Path,
                                                           monkeypatch) -> None:
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))  # rollout checks the model first
    fake_model.script.add("rollout", "*", handler=gold_player_for(root / "envs" / "city_library"))
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "traj.jsonl"
    result = CliRunner().invoke(app, ["rollout", str(root / "envs"), "--model", "openai/test-model", "--base-url",
                                      fake_model.openai_base_url, "--out", str(out), "--reward", "both",
                                      "--tasks", "2"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["task_01", "task_02"]
    for row in rows:
        assert row["reward_kind"] == "both" and row["rubric"] == 1.0 and row["state"] == 1.0 and row["reward"] == 1.0


def test_exports_carry_the_reward_kind_and_the_probe_rewards(root: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    verl = runner.invoke(app, ["export", "verl", str(root / "envs"), "--out", str(tmp_path / "verl"),
                               "--reward", "both"])
    assert verl.exit_code == 0, verl.output
    assert 'os.environ.get("SYNTH_REWARD", "both")' in (tmp_path / "verl" / "synth_agent_loop.py").read_text()
    rows = pq.read_table(tmp_path / "verl" / "train.parquet").to_pylist()
    probes = {r["extra_info"]["task_id"]: {p["probe"]: p["reward"] for p in r["extra_info"]["probes"]} for r in rows}
    report = json.loads((root / "envs" / "city_library" / "report.json").read_text())["probes"]
    assert probes["task_02"] == {p["probe"]: p["reward"] for p in report["task_02"]}
    assert probes["task_02"]["shotgun"] < 0.5 and "refusal" in probes["task_02"]

    pkg = runner.invoke(app, ["export", "verifiers", str(root / "envs"), "--out", str(tmp_path / "pkg"),
                              "--reward", "state"])
    assert pkg.exit_code == 0, pkg.output
    assert '"SYNTH_REWARD", "state"' in (tmp_path / "pkg" / "synth_envs" / "common.py").read_text()
    bundled = [json.loads(line) for line in (tmp_path / "pkg" / "synth_envs" / "tasks.jsonl").read_text().splitlines()]
    assert all({p["probe"] for p in r["probes"]} >= {"empty", "shotgun", "refusal"} for r in bundled)

    gold = runner.invoke(app, ["export", "sft", str(root / "envs"), "--from", "gold", "--out",
                               str(tmp_path / "gold.jsonl"), "--reward", "state"])
    assert gold.exit_code == 0 and "4 rows" in gold.output, gold.output
    gold_rows = [json.loads(line) for line in (tmp_path / "gold.jsonl").read_text().splitlines()]
    assert gold_rows[1]["messages"][-1]["content"] == GOLD_ANSWERS["task_02"]
    awm = runner.invoke(app, ["export", "awm", str(root / "envs"), "--out", str(tmp_path / "awm"), "--reward",
                              "state"])
    assert awm.exit_code != 0 and "--reward state applies to verl, verifiers and sft --from gold" in str(awm.exception)
