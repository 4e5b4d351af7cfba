"""Gate `discriminates`: a verifier must tell a done task from an undone one.

- the untouched initial state with an empty answer fails (AWM's verifiers were
  run only once, on an unchanged database, and some already passed there);
- for a task whose gold solution changes state, gold minus its last
  state-changing call fails too (the verifier checks that change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult
from synth.use.replay import last_write_index, run_actions

from .common import EnvFolder, Findings, run_with_env

NAME = "discriminates"


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    for task in folder.tasks:
        empty = run_actions(env, task, [], answer=None)
        if empty.reward is not None and empty.reward.passed:
            found.task(task.task_id, "the verifier passes on the untouched initial state with an empty answer")
        last = last_write_index(env, task.gold)
        if last is None:
            continue
        partial = run_actions(env, task, task.gold[:last] + task.gold[last + 1:], answer=task.expected_answer)
        if partial.reward is not None and partial.reward.passed:
            found.task(task.task_id, f"the verifier passes when the gold solution's last state-changing call "
                                     f"({task.gold[last].tool}) is left out")


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
