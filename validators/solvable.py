"""Gate `solvable`: every task's gold solution replays on a fresh episode with no
failed call, and its verifier gives the gold final state (with the expected
answer) a full pass, score 1.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult
from synth.use.replay import reward_problem, run_actions

from .common import EnvFolder, Findings, run_with_env

NAME = "solvable"


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    if not folder.tasks:
        found.env("tasks.jsonl has no tasks")
    for task in folder.tasks:
        if not task.gold:
            found.task(task.task_id, "has no gold solution (no actions in tasks.jsonl)")
            continue
        replay = run_actions(env, task, task.gold, answer=task.expected_answer)
        for error in replay.errors:
            found.task(task.task_id, f"gold solution {error}")
        why = reward_problem(replay.reward)
        if why:
            found.task(task.task_id, f"after the gold solution, {why}")


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
