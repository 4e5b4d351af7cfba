"""`synth tasks` on the three demo envs, offline (the demo's recorded templates), as a user runs it: each
env gets at least 200 new verified tasks from at least 8 templates, read and write, split into train and
test by template, at most 3k tokens per new task, one broken template repaired on the way, and `synth
check` passes every env with every instance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import demokit
import pytest
from demokit import offline_env


def synth(*args: str, cwd: Path, timeout: int = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], cwd=cwd, env=offline_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def envs(tmp_path_factory) -> list[Path]:
    work = tmp_path_factory.mktemp("demo-tasks")
    dirs = sorted(p for p in demokit.demo_envs(tmp_path_factory, "demo-tasks-envs").iterdir() if p.is_dir())
    added = synth("tasks", *map(str, dirs), "--cache-dir", str(work / ".cache"), cwd=work)
    assert added.returncode == 0, (added.stdout + added.stderr)[-3000:]
    assert "using the offline demo's recorded templates" in added.stderr
    return dirs


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_demo_env_gets_200_verified_tasks_from_8_templates_read_and_write(envs: list[Path]):
    assert len(envs) == 3
    for env in envs:
        tasks = jsonl(env / "tasks.jsonl")
        templates = {t["template_id"]: t for t in jsonl(env / "task_templates.jsonl")}
        step = json.loads((env / "report.json").read_text())["tasks_step"]
        instances = [t for t in tasks if t.get("template_id")]
        assert step["added"] == len(instances) >= 200, env.name
        assert len(templates) >= 8 and {t["kind"] for t in templates.values()} == {"read", "write"}, env.name
        assert {t["template_id"] for t in instances} == set(templates)
        assert {t["difficulty"] for t in templates.values()} >= {"easy", "medium", "hard"}
        for task in instances:  # an instance is an ordinary task with its template and row
            assert task["split"] == templates[task["template_id"]]["split"] and task["bindings"], task["task_id"]
            assert task["gold"] and task["verifier"] == f"verify_{task['task_id']}"
        assert {t["split"] for t in templates.values()} == {"train", "test"}  # split by template, both sides
        assert step["tokens_per_task"] is not None and step["tokens_per_task"] <= 3000, (env.name, step)
        assert len({t["instruction"] for t in tasks}) == len(tasks)  # no two tasks ask in the same words


def test_the_broken_demo_template_was_repaired_and_every_instance_passes_synth_check(envs: list[Path]):
    cowork = next(e for e in envs if e.name == "foundry_coworking")
    outcome = json.loads((cowork / "report.json").read_text())["templates"]["cancel_desk_booking"]
    assert outcome["status"] == "kept" and [r["stage"] for r in outcome["repairs"]] == ["checks"]
    assert "probe 'collateral'" in outcome["repairs"][0]["problems"][0]
    checked = synth("check", *map(str, envs), "--quiet", cwd=envs[0].parent)
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "3/3 env(s) verified" in checked.stdout
