"""Gate `discriminates`: a verifier must tell a done task from an undone one.

- the untouched initial state with an empty answer fails (AWM's verifiers were
  run only once, on an unchanged database, and some already passed there);
- for a task whose gold solution changes state, gold minus its last
  state-changing call fails too (the verifier checks that change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Task
from synth.use.replay import last_write_index, run_actions

from .common import EnvFolder, Findings, map_tasks, run_with_env

NAME = "discriminates"


def task_problems(env: Any, task: Task) -> list[str]:
    problems = []
    empty = run_actions(env, task, [], answer=None)
    if empty.reward is not None and empty.reward.passed:
        problems.append("the verifier passes on the untouched initial state with an empty answer")
    last = last_write_index(env, task.gold)
    if last is None:
        return problems
    partial = run_actions(env, task, task.gold[:last] + task.gold[last + 1:], answer=task.expected_answer)
    if partial.reward is not None and partial.reward.passed:
        problems.append(f"the verifier passes when the gold solution's last state-changing call "
                        f"({task.gold[last].tool}) is left out")
    return problems


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    for task, problems in zip(folder.tasks, map_tasks(lambda t: task_problems(env, t), folder.tasks)):
        for problem in problems:
            found.task(task.task_id, problem)


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
