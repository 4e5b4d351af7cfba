"""Gate `reward_cases`: verifier_tests.jsonl replays with the verdicts it records, under both rewards.

The check loop keeps, per task, the trajectories its agents found about the verifier: correct
answers in other words (paraphrases) and correct solutions by another path (the solver) must
keep earning the full reward; exploits (the red team, wrong solutions the verifier once paid
for) must stay below the probe threshold. Each case is replayed on a fresh episode (a paraphrase
on the task's gold calls) with no model and scored by the verifier's rubric and by the state
reward (synth/use/reward.py): a must-pass case earns 1.0 under both, a must-fail case stays under
the threshold under the rubric.

The state reward is held to what it can see: the task's facts (read) or the gold final state apart
from free columns (write). An exploit it pays while the rubric refuses it states every fact right on
the right state and cheats elsewhere (a real-model red team: "the right balance plus an invented
payment promise", "the right stock plus a wrong retail price nobody asked for"). No repair of the
env can make the state reward see that, so it is no fault of the env: the gate lists such cases in
its details as `state_limits` (what `--reward state` alone pays; `--reward both` refuses them) and
passes. A case the rubric pays as well stays a problem, with the hint for both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Reward, Task, VerifierCase
from synth.use.replay import canonical, run_actions
from synth.use.reward import state_match_reward

from .common import EnvFolder, Findings, map_tasks, run_with_env
from .probe_kinds import clip
from .probes import DEFAULT_THRESHOLD

NAME = "reward_cases"


def describe_calls(case: VerifierCase) -> str:
    if case.use_gold:
        return "the gold calls"
    return "; ".join(f"{c.tool}({clip(canonical(c.arguments), 120)})" for c in case.calls) or "no calls"


def case_rewards(env: Any, task: Task, case: VerifierCase) -> tuple[Any, Reward, list[str]]:
    """The case replayed: the verifier's rubric reward, the state reward and the calls' errors."""
    replay = run_actions(env, task, list(task.gold) if case.use_gold else case.calls, answer=case.answer,
                         snapshot=True)
    state = Reward(reward=0.0, passed=False, error="the episode was lost") if replay.final_db is None else \
        state_match_reward(env, task, replay.final_db, case.answer, detail=True)
    return replay.reward, state, replay.errors


def _state_failed(state: Reward) -> str:
    return state.error or ", ".join(c.name for c in state.checks if not c.passed) or "none"


def case_problem(env: Any, task: Task, case: VerifierCase, threshold: float = DEFAULT_THRESHOLD) -> str | None:
    """Why the rewards no longer give `case` its recorded verdict (None when they do)."""
    return case_verdict(env, task, case, threshold)[0]


def case_verdict(env: Any, task: Task, case: VerifierCase,
                 threshold: float = DEFAULT_THRESHOLD) -> tuple[str | None, bool]:
    """case_problem, and whether the case is a state-reward limit (an exploit only the state reward pays)."""
    reward, state, errors = case_rewards(env, task, case)
    score = 0.0 if reward is None or reward.error else reward.reward
    said = f"case {case.case_id} ({case.source}; {clip(case.note, 200)}): {describe_calls(case)}, answer " \
           f"{clip(case.answer or '', 300)!r}"
    failed = ", ".join(c.name for c in reward.checks if not c.passed) if reward is not None else ""
    if case.expect == "pass":
        if errors and not case.use_gold:
            return f"{said}: its calls no longer succeed ({clip('; '.join(errors), 300)})", False
        if reward is None or reward.error or not reward.passed or score < 1.0:
            why = reward.error if reward is not None and reward.error else f"failed checks: {failed or 'none'}"
            return f"{said} is correct but scored {score:.2f} ({clip(why, 300)}); the verifier must give it 1.0", False
        if not state.passed:
            return (f"{said} is correct but the state reward gave it {state.reward:.0f} ({clip(_state_failed(state), 400)})"
                    "; list as facts only the values the question asks for (not the context the expected answer "
                    "adds), and as free_columns every column whose text the task leaves open. The state reward "
                    "counts another value of a fact's kind as wrong unless the expected answer mentions it too: if "
                    "a correct answer may name it (a record it explains is left out), mention it in "
                    "expected_answer"), False
        return None, False
    if score < threshold:  # refused by the rubric; a state-reward payment alone is a limit of that reward
        return None, state.reward >= threshold
    paid = ", ".join(c.name for c in reward.checks if c.passed) if reward is not None else ""
    problems = [f"scored {score:.2f} (at least {threshold:g}; checks it passed: {clip(paid or 'none', 300)}); "
                "the verifier must fail it"]
    if state.reward >= threshold:
        problems.append("the state reward paid it; list as facts every value the question asks for, and as "
                        "free_columns only columns the task leaves open")
    return f"{said} does not do the task but {' and '.join(problems)}", False


def _check(folder: EnvFolder, env: Any, found: Findings, threshold: float) -> None:
    for problem in folder.problems.get("verifier_tests.jsonl", []):
        found.env(problem)
    tasks = {t.task_id: t for t in folder.tasks}
    cases = [c for c in folder.cases if c.task_id in tasks]  # a task dropped after its case was recorded has none
    counts: dict[str, int] = {}
    for case in cases:
        counts[case.source] = counts.get(case.source, 0) + 1
    limits = []
    for case, (problem, limit) in zip(cases, map_tasks(lambda c: case_verdict(env, tasks[c.task_id], c, threshold),
                                                       cases)):
        if problem:
            found.task(case.task_id, problem)
        elif limit:
            limits.append(case.case_id)
    found.details.update(cases=sum(counts.values()), by_source=counts, state_limits=limits)


def run(env_dir: Path | str, env: Any = None, *, threshold: float = DEFAULT_THRESHOLD) -> GateResult:
    return run_with_env(NAME, env_dir, env, lambda f, e, fd: _check(f, e, fd, threshold))
