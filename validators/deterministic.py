"""Gate `deterministic`: the same trajectory scores the same twice.

For every task the gold trajectory is replayed on two fresh episodes and
evaluated twice on the first, and the empty trajectory is evaluated twice; all
rewards and check lists must be identical, and both gold replays must end in
the same database (volatile columns aside). A verifier that uses randomness or
the clock, or a tool that writes something undeclared-volatile, fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Reward, Task
from synth.errors import SynthError
from synth.use.replay import answer_text, canonical, diff_summary, state_diff

from .common import EnvFolder, Findings, map_tasks, run_with_env

NAME = "deterministic"


def _signature(reward: Reward) -> str:
    return canonical({"reward": reward.reward, "passed": reward.passed, "error": bool(reward.error),
                      "checks": [[c.name, c.passed, c.weight] for c in reward.checks]})


def _play(env: Any, task: Task, actions: list, evaluations: int) -> tuple[list[str], bytes | None]:
    answer = answer_text(task.expected_answer) if actions else None
    with env.episode(task.task_id) as episode:
        for call in actions:
            episode.call(call.tool, call.arguments)
        signatures = [_signature(episode.evaluate(answer, state=False)) for _ in range(evaluations)]
        try:
            final = episode.snapshot()
        except SynthError:
            final = None
    return signatures, final


def task_problems(env: Any, task: Task, volatile: list[str]) -> list[str]:
    problems = []
    first, final_a = _play(env, task, task.gold, 2)
    second, final_b = _play(env, task, task.gold, 1)
    if len(set(first + second)) > 1:
        problems.append("the gold trajectory scored differently across evaluations "
                        f"({' vs '.join(sorted(set(first + second)))[:300]})")
    empty, _ = _play(env, task, [], 2)
    if len(set(empty)) > 1:
        problems.append("the empty trajectory scored differently across evaluations")
    if final_a is not None and final_b is not None:
        changed = state_diff(final_a, final_b, volatile)
        if changed:
            problems.append("replaying the gold solution twice gave different databases "
                            f"({canonical(diff_summary(changed))}); make the tools deterministic "
                            "or declare the varying columns volatile")
    return problems


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    results = map_tasks(lambda t: task_problems(env, t, folder.volatile), folder.tasks)
    for task, problems in zip(folder.tasks, results):
        for problem in problems:
            found.task(task.task_id, problem)


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
