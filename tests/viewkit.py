"""Inputs for the `synth view` tests: the offline demo's output (run once per test
session, then copied), report.json data in the shapes later pipeline versions
write (check-loop repairs, probe rewards, rules.json, today / acting user),
and broken env folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

LIBRARY = "maple_street_public_library"
VET = "riverside_veterinary_clinic"
COWORK = "foundry_coworking"


def demo_output(tmp_path_factory: pytest.TempPathFactory, dest: Path) -> Path:
    """A copy of `synth run` (no key: the offline demo) output at `dest`; the demo runs once per session."""
    built = tmp_path_factory.getbasetemp() / "view-demo"
    out = built / "generated"
    if not (out / "runs").is_dir():
        built.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        done = subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "-n", "3", "--templates", "0"], cwd=built, env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    shutil.copytree(out, dest, ignore=shutil.ignore_patterns(".cache"))
    return dest


def run_dir(out: Path) -> Path:
    return next((out / "runs").iterdir())


def tool_source(env_dir: Path, name: str) -> str:
    from synth.view.envdata import function_sources

    return function_sources((env_dir / "tools.py").read_text())[name]


def add_review_history(env_dir: Path) -> dict[str, Any]:
    """Give the library env what newer pipelines record: a check-loop repair of renew_loan (with its
    failing test and judge reasons), probe rewards, rules.json, `today` and `acting_user`."""
    after = tool_source(env_dir, "renew_loan")
    before = after.replace("renewals + 1", "renewals")
    assert before != after
    tests = [json.loads(line) for line in (env_dir / "tests.jsonl").read_text().splitlines() if line.strip()]
    failing = dict(next(t for t in tests if t["tool"] == "renew_loan"), verdict="fail",
                   reason="the renewal count stayed the same after a successful renewal")
    repair = {"kind": "tool", "name": "renew_loan", "diagnosis": "renewals is never incremented",
              "before": before, "after": after,
              "evidence": ["renew_loan.1: loans.renewals unchanged (expected +1)"], "tests": [failing]}
    verifier_repair = {"kind": "verifier", "name": "task_02", "diagnosis": "checked the wrong copy",
                       "before": "def verify_task_02(initial_db, final_db, answer):\n    return []\n",
                       "after": "def verify_task_02(initial_db, final_db, answer):\n    return [('x', True, 1.0)]\n",
                       "evidence": [], "tests": []}
    report = json.loads((env_dir / "report.json").read_text())
    report["check_loop"]["rounds"][0]["repairs"] = [repair, verifier_repair]
    report["probes"] = {"task_01": [
        {"probe": "empty answer", "reward": 0.0, "passed": False, "detail": "no check passed"},
        {"probe": "do nothing", "reward": 0.0, "passed": False, "detail": "state unchanged"},
        {"probe": "stuffed answer", "reward": 1.0, "passed": True, "detail": "every number listed passes"},
    ]}
    (env_dir / "report.json").write_text(json.dumps(report, indent=2))
    rules = {"invariants": [{"name": "available_copies_in_range", "description": "copies on the shelf never "
                             "exceed the copies owned", "sql": "SELECT id FROM copies WHERE 0"}],
             "transitions": [{"table": "loans", "column": "status", "allowed": {"active": ["returned", "lost"]}}]}
    (env_dir / "rules.json").write_text(json.dumps(rules))
    manifest = json.loads((env_dir / "env.json").read_text())
    manifest["today"] = "2025-06-01"
    manifest["acting_user"] = {"table": "staff", "id": 2, "name": "Dana Whitfield", "role": "circulation clerk"}
    (env_dir / "env.json").write_text(json.dumps(manifest, indent=2))
    return {"repair": repair, "before": before, "after": after}


def add_broken_envs(parent: Path) -> dict[str, Path]:
    """Three folders that are not readable envs, each with a different fault."""
    bad_json = parent / "zz_bad_json"
    bad_json.mkdir()
    (bad_json / "env.json").write_text("{ not json")
    no_manifest = parent / "zz_no_manifest"
    no_manifest.mkdir()
    (no_manifest / "tools.json").write_text("[]")
    bad_review = parent / "zz_bad_review"
    shutil.copytree(parent / COWORK, bad_review)
    (bad_review / "review.json").write_text('{"decision": "maybe"}')
    return {"bad_json": bad_json, "no_manifest": no_manifest, "bad_review": bad_review}


def chromium_path() -> str | None:
    for candidate in ("/usr/bin/chromium", "/usr/bin/chromium-browser", shutil.which("chromium") or ""):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run", "--disable-sync"]
