"""Gate `solvable`: every task's gold solution replays on a fresh episode with no
failed call, and its verifier gives the gold final state (with the expected
answer) a full pass, score 1.0."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Task
from synth.use.replay import reward_problem, run_actions

from .common import EnvFolder, Findings, map_tasks, run_with_env

NAME = "solvable"


def task_problems(env: Any, task: Task) -> list[str]:
    if not task.gold:
        return ["has no gold solution (no actions in tasks.jsonl)"]
    replay = run_actions(env, task, task.gold, answer=task.expected_answer)
    problems = [f"gold solution {error}" for error in replay.errors]
    why = reward_problem(replay.reward)
    if why:
        problems.append(f"after the gold solution, {why}")
    return problems


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    if not folder.tasks:
        found.env("tasks.jsonl has no tasks")
    for task, problems in zip(folder.tasks, map_tasks(lambda t: task_problems(env, t), folder.tasks)):
        for problem in problems:
            found.task(task.task_id, problem)


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
