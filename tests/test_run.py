"""`synth run` end to end: the offline demo, kill -9 and resume, nonsense answers, the budget.

These start `synth run` as a real subprocess (the demo recordings served by the
fake model server over HTTP, so the official SDK is exercised), which is what
makes a SIGKILL test honest. Each run loads the embedding model, so they are
the slowest tests of the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_server import FakeModelServer

from synth.llm.replay import load_recordings
from synth.llm.script import Reply, RequestInfo, Rule, Script

REPO = Path(__file__).resolve().parents[1]
DEMO_SEEDS = REPO / "seeds" / "demo.txt"
DEMO_RECORDINGS = REPO / "seeds" / "demo"
ENV_IDS = {"riverside_veterinary_clinic", "maple_street_public_library", "foundry_coworking"}


def synth_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra})
    return env


def with_ping(script: Script) -> Script:
    """A script that also answers the model check `synth run` makes before any stage."""
    return Script([Rule(stage="ping", replies=[Reply(json={"ok": True, "word": "pong"})], repeat_last=True),
                   *script.rules])


def run_args(server: FakeModelServer, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "synth", "run", "--seeds", str(DEMO_SEEDS), "-n", "3",
            "--model", "openai/test-model", "--base-url", server.openai_base_url,
            "--out", str(out), "--cache-dir", str(out / "cache"), "--plain", "--templates", "0", *extra]


def verified_envs(out: Path) -> dict[str, str]:
    """env id -> sha256 of its tasks, tools and initial database (what a trainer consumes)."""
    found = {}
    for manifest in sorted((out / "envs").glob("*/env.json")):
        data = json.loads(manifest.read_text())
        if data["status"] == "verified":
            root = manifest.parent
            digest = hashlib.sha256()
            for name in ("tasks.jsonl", "tools.json", "tools.py", "verifiers.py"):
                digest.update((root / name).read_bytes())
            found[data["id"]] = digest.hexdigest() + data["initial_db_sha256"]
    return found


def body_key(request) -> str:
    return hashlib.sha256(json.dumps(request.body, sort_keys=True).encode()).hexdigest()


def test_demo_without_api_key_gives_three_verified_envs(tmp_path):
    out = subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "-n", "3", "--templates", "0"], cwd=tmp_path,
                         env=synth_env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.count("running the offline demo") == 1
    assert set(verified_envs(tmp_path / "generated")) == ENV_IDS
    check = subprocess.run([sys.executable, "-m", "synth", "check", *sorted(str(p) for p in
                            (tmp_path / "generated" / "envs").iterdir())],
                           cwd=tmp_path, env=synth_env(), capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout[-2000:]
    summary = json.loads(next((tmp_path / "generated" / "runs").glob("*/summary.json")).read_text())
    assert summary["funnel"] == {"seeds": 3, "candidates": 3, "crud_able": 3, "unique": 3, "built": 3, "verified": 3}


def slow_classify(script: Script) -> Script:
    """The recorded script, but the first classify answer per subject takes 60 s: a kill lands mid-flight."""
    seen: set[str] = set()

    def handler(info: RequestInfo) -> Reply | None:
        if info.subject in seen:
            return None  # fall through to the recorded rules
        seen.add(info.subject)
        return Reply(fault="timeout", delay=60)

    return Script([Rule(stage="classify", handler=handler), *script.rules])


def test_sigkill_mid_scenarios_then_resume_matches_uninterrupted_run(tmp_path):
    with FakeModelServer(with_ping(load_recordings(DEMO_RECORDINGS))) as server:
        baseline = tmp_path / "baseline"
        done = subprocess.run(run_args(server, baseline), env=synth_env(), capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    expected = verified_envs(baseline)
    assert set(expected) == ENV_IDS

    out = tmp_path / "killed"
    with FakeModelServer(with_ping(slow_classify(load_recordings(DEMO_RECORDINGS)))) as server:
        proc = subprocess.Popen(run_args(server, out), env=synth_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 300
        while not any(r.stage == "classify" for r in server.requests):  # poll: scenarios are in flight
            assert proc.poll() is None and time.monotonic() < deadline, "run ended before classify started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        finished_before = {body_key(r) for r in server.requests if r.status == 200}
        assert any(r.stage == "expand" and r.status == 200 for r in server.requests)
        n_before = len(server.requests)

        rerun = subprocess.run(run_args(server, out), env=synth_env(), capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        after = server.requests[n_before:]
    assert verified_envs(out) == expected
    # The model check before any stage is made on every start; no stage's finished request is repeated.
    repeated = [(r.stage, r.subject) for r in after if body_key(r) in finished_before and r.stage != "ping"]
    assert repeated == [], f"requests finished before the kill were sent again: {repeated}"


def nonsense(info: RequestInfo) -> Reply:
    """Schema-valid answers with no sense in them, for every stage."""
    return Reply(json=fill(info.schema or {}, info.schema or {}, info.subject))


def fill(node: dict, root: dict, salt: str):
    if "$ref" in node:
        return fill(root["$defs"][node["$ref"].split("/")[-1]], root, salt)
    if "enum" in node:
        return node["enum"][0]
    for key in ("anyOf", "oneOf"):
        if key in node:
            return fill(node[key][0], root, salt)
    kind = node.get("type", "string")
    if kind == "object":
        return {name: fill(sub, root, f"{salt}.{name}") for name, sub in node.get("properties", {}).items()}
    if kind == "array":
        return [fill(node.get("items", {}), root, f"{salt}.{i}") for i in range(2)]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return 1
    return " ".join(["zorp", hashlib.sha1(salt.encode()).hexdigest()[:6]] * 90)  # long enough for any length rule


def test_nonsense_model_ends_cleanly_with_every_failure_reasoned(tmp_path):
    with FakeModelServer(Script([Rule(handler=nonsense)])) as server:
        out = subprocess.run(run_args(server, tmp_path / "out", "--build-attempts-per-env", "1"), env=synth_env(),
                             capture_output=True, text=True, timeout=600)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no env was verified" in out.stderr
    # -n 3 with at most 1 build per wanted env: the run says it stopped at that cap, and how far it got.
    assert "0 of 3 wanted verified env(s): stopped after building 3 scenario(s), the cap of" in out.stderr
    summary = json.loads(next((tmp_path / "out" / "runs").glob("*/summary.json")).read_text())
    assert summary["funnel"]["verified"] == 0 and summary["stop_reason"] == "attempt cap"
    assert summary["failures"], "failures must be listed with reasons"
    assert all(reason and info["count"] > 0 for reason, info in summary["failures"].items())
    assert all(e["reason"] for e in summary["envs"] if e["status"] != "verified")


def test_max_cost_stops_new_work_and_says_so(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/test-model": {"input": 1000.0, "output": 1000.0}}))
    with FakeModelServer(with_ping(load_recordings(DEMO_RECORDINGS))) as server:
        out = subprocess.run(run_args(server, tmp_path / "out", "--max-cost", "5", "--prices-file", str(prices)),
                             env=synth_env(), capture_output=True, text=True, timeout=600)
        sent = len(server.requests)
    assert "Traceback" not in out.stderr
    assert "the budget of $5.00 was reached" in out.stderr
    summary = json.loads(next((tmp_path / "out" / "runs").glob("*/summary.json")).read_text())
    assert summary["budget_stopped"] is True
    assert summary["funnel"]["verified"] < 3
    assert sent < 60  # the full demo needs about 156 calls: new work stopped early


def test_a_failed_env_is_made_up_for_with_another_scenario_until_n_are_verified(tmp_path):
    # The vet clinic's tasks stage is refused: its build fails, and -n 2 still ends with 2 verified
    # because the run provisions one more scenario (the coworking space) from the observed yield.
    refuse = Rule(stage="tasks", subject="riverside*", replies=[Reply(fault="400")], repeat_last=True)
    with FakeModelServer(with_ping(Script([refuse, *load_recordings(DEMO_RECORDINGS).rules]))) as server:
        args = [a if a != "3" else "2" for a in run_args(server, tmp_path / "out")]
        out = subprocess.run(args, env=synth_env(), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert set(verified_envs(tmp_path / "out")) == {"maple_street_public_library", "foundry_coworking"}
    assert (tmp_path / "out" / "failed" / "riverside_veterinary_clinic" / "env.json").exists()
    summary = json.loads(next((tmp_path / "out" / "runs").glob("*/summary.json")).read_text())
    assert summary["stop_reason"] == "reached" and summary["funnel"]["verified"] == 2
    assert [e["status"] for e in summary["envs"]] == ["failed", "verified", "verified"]
    assert "2 of 2 wanted verified env(s): done" in out.stderr
