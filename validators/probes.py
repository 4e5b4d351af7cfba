"""Gate `probes`: no task's verifier pays for an exploit.

Every task is attacked with the model-free probes of probe_kinds.py (doing nothing, a shotgun
answer, a refusal after the right calls, a hedged or over-inclusive answer, the wrong record, a
partial solution, collateral damage). A probe *passes* (the reward is vulnerable to it) when
its rubric reward reaches the threshold (settings.probe_threshold, default 0.5) or comes within
the margin (settings.probe_margin) of the gold solution's reward, or when the state reward
(synth/use/reward.py) pays it. Each probe's rewards go to report.json `probes` ({task_id:
[{"probe", "reward", "state", "passed", "detail"}]}, `reward` the rubric's); a passing probe
fails the gate, naming the task and the probe, with a hint of what must change.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Reward, Task
from synth.config import Settings
from synth.use.replay import run_actions
from synth.use.reward import state_match_reward

from .common import EnvFolder, Findings, map_tasks, run_with_env
from .probe_kinds import ProbeContext, build_probes, clip, new_context

NAME = "probes"
DEFAULT_THRESHOLD = Settings.model_fields["probe_threshold"].default
DEFAULT_MARGIN = Settings.model_fields["probe_margin"].default
HINTS = {
    "empty": "the verifier must fail an attempt that does nothing",
    "shotgun": "an answer that lists every value must fail: use states(answer, right_values, wrong_values) "
               "with the plausible wrong values (the same column of the other rows)",
    "refusal": "the answer must count: a read task's answer must state the facts (states()), a write task's "
               "must report the work as done (reports()), inside rubric() so a refusal scores below one half",
    "hedged": "a hedged answer with a wrong alternative must fail: pass the alternatives as wrong values to "
              "states()",
    "over-inclusive": "an answer that names every candidate must fail: pass the other candidates as wrong values "
                      "to states()",
    "wrong record": "the change must be on the requested record: check its key or identifying values",
    "partial": "every requested change must be checked, and the checks wrapped in rubric(), so that stopping half "
               "way scores below one half",
    "state": "the state reward paid it: list as facts every value the question asks for, and as free_columns "
             "only the columns whose text the task leaves open",
    "collateral": "nothing outside the task's target may change: check only_changed(db_diff(initial_db, final_db), "
                  "{table: {\"rows\": {key: [columns]}, \"added\": True}}) for a write task, unchanged(initial_db, "
                  "final_db) for a read task, inside rubric()",
}


def earned(reward: float, gold: float, threshold: float, margin: float) -> bool:
    """Did a probe earn its reward: at or above the threshold, or less than `margin` under the gold's?"""
    return reward >= threshold or gold - reward < margin - 1e-9


def _score(reward: Reward | None) -> float:
    return 0.0 if reward is None or reward.error else reward.reward


def probe_task(ctx: ProbeContext, task: Task, threshold: float = DEFAULT_THRESHOLD, margin: float = DEFAULT_MARGIN,
               exploits: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The probes' records for one task ({"probe", "reward", "passed", "detail"}) and one problem line
    per probe that earned its reward (whose calls and answer go to `exploits`, when given, so they can
    be kept as regression cases). A task whose gold solution does not replay, or does not pass its
    verifier, gets none (the solvable gate reports it)."""
    if not task.gold:
        return [], []
    gold = run_actions(ctx.env, task, task.gold, answer=task.expected_answer, snapshot=True)
    if gold.errors or gold.final_db is None or gold.reward is None or not gold.reward.passed:
        return [], []  # probes measure a verifier against a gold solution it passes
    ctx = dataclasses.replace(ctx, gold_final=gold.final_db)  # this task's own: tasks are probed side by side
    gold_reward = _score(gold.reward)
    records, problems = [], []
    for probe in build_probes(ctx, task):
        replay = run_actions(ctx.env, task, probe.calls, answer=probe.answer, snapshot=True)
        reward, score = replay.reward, _score(replay.reward)
        state = state_match_reward(ctx.env, task, replay.final_db, probe.answer).reward \
            if replay.final_db is not None else 0.0
        by_rubric, by_state = earned(score, gold_reward, threshold, margin), state >= threshold
        passed = by_rubric or by_state
        records.append({"probe": probe.name, "reward": round(score, 4), "state": state, "passed": passed,
                        "detail": probe.detail})
        if passed:
            if exploits is not None:
                exploits.append({"probe": probe.name, "calls": [c.model_dump(mode="json") for c in probe.calls],
                                 "answer": probe.answer, "reward": round(score, 4)})
        if by_rubric:
            paid = [c.name for c in reward.checks if c.passed] if reward is not None else []
            problems.append(f"probe {probe.name!r} earned {score:.2f} (a probe must score below {threshold:g} and at "
                            f"least {margin:g} under the gold's {gold_reward:.2f}): {probe.detail}; checks it "
                            f"passed: {clip(', '.join(paid) or 'none', 300)}. Fix: {HINTS[probe.kind]}")
        if by_state:
            problems.append(f"probe {probe.name!r} earned the state reward: {probe.detail}. Fix: {HINTS['state']}")
    return records, problems


def _check(folder: EnvFolder, env: Any, found: Findings, threshold: float, margin: float) -> None:
    ctx = new_context(env, volatile=folder.volatile, tasks=folder.tasks, tests=folder.tests)

    def one(task: Task) -> tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]:
        paid: list[dict[str, Any]] = []
        records, problems = probe_task(ctx, task, threshold, margin, paid)
        return records, problems, paid

    probes: dict[str, list[dict[str, Any]]] = {}
    exploits: dict[str, list[dict[str, Any]]] = {}
    for task, (records, problems, paid) in zip(folder.tasks, map_tasks(one, folder.tasks)):
        if records:
            probes[task.task_id] = records
        if paid:
            exploits[task.task_id] = paid
        for problem in problems:
            found.task(task.task_id, problem)
    found.details.update(probes=probes, exploits=exploits, threshold=threshold, margin=margin)


def run(env_dir: Path | str, env: Any = None, *, threshold: float = DEFAULT_THRESHOLD,
        margin: float = DEFAULT_MARGIN) -> GateResult:
    return run_with_env(NAME, env_dir, env, lambda f, e, fd: _check(f, e, fd, threshold, margin))
