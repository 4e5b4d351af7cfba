"""Checking template instances with no model, in the sandbox: the task gates' own per-task checks.

One env load (a folder holding the env's tasks and the candidate instances) serves every episode;
the instances are checked several at a time (synth_validators.common.map_tasks), each by the same
functions `synth check` runs per task, so an instance kept here passes there:
- solvable: the gold calls succeed and the verifier gives them 1.0;
- discriminates: the untouched state and gold minus its last write fail;
- probes: every exploit probe fails under the rubric and the state reward;
- deterministic and robust: the same score twice, no verifier error on any reachable state, and
  no rule broken by a call of the gold or of the seeded random walks;
- reward_cases: the cases the reward agents recorded for the instance keep their verdicts.

Problems are sorted by whose fault they are. `gold`: this row is not a valid instance (a call is
refused, the verifier does not pass the gold solution on this row, a tool broke a rule on it):
the instance is dropped and the rest of the template stands. `verifier`: the template's verifier
is weak (it pays a probe, passes undone work, raises, is not deterministic, fails a recorded case):
the template is repaired or dropped whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.artifacts import Task, VerifierCase
from synth.config import Settings
from synth.folder.format import EnvDraft


@dataclass
class InstanceCheck:
    task_id: str
    gold: list[str] = field(default_factory=list)  # the row is not a valid instance
    verifier: list[str] = field(default_factory=list)  # the template's verifier is at fault
    probes: list[dict[str, Any]] = field(default_factory=list)  # the probes' records (report.json `probes`)

    @property
    def passed(self) -> bool:
        return not self.gold and not self.verifier


class InstanceChecker:
    """The per-task checks of instances of one loaded env (`env`, whose folder's draft is `draft`)."""

    def __init__(self, env: Any, draft: EnvDraft, settings: Settings):
        from synth_validators import robust
        from synth_validators.fuzz import ValuePool
        from synth_validators.probe_kinds import new_context

        self.cases: dict[str, list[VerifierCase]] = {}
        for raw in draft.verifier_tests:
            case = VerifierCase.model_validate(raw)
            self.cases.setdefault(case.task_id, []).append(case)
        self.env, self.draft, self.settings = env, draft, settings
        self.ctx = new_context(env, volatile=draft.volatile_columns, tasks=draft.tasks, tests=draft.tool_tests())
        self.initially = robust.RuleWatch.initial(draft.rules, env)
        self.values = ValuePool(env.initial_db)

    def one(self, task: Task) -> InstanceCheck:
        from synth_validators import deterministic, discriminates, robust, solvable
        from synth_validators.probes import probe_task
        from synth_validators.reward_cases import case_problem

        env, settings = self.env, self.settings
        found = InstanceCheck(task.task_id, gold=solvable.task_problems(env, task))
        if found.gold:
            return found
        found.verifier += discriminates.task_problems(env, task)
        found.probes, paid = probe_task(self.ctx, task, settings.probe_threshold, settings.probe_margin)
        found.verifier += paid
        found.verifier += deterministic.task_problems(env, task, self.draft.volatile_columns)
        errors, broken = robust.task_findings(env, self.draft.env_id, task, self.draft.rules, self.initially,
                                              self.values)
        found.verifier += errors
        found.gold += [f"tool {tool}: {problem}" for tool, problem in broken.items()]
        for case in self.cases.get(task.task_id, []):
            problem = case_problem(env, task, case, settings.probe_threshold)
            if problem:
                found.verifier.append(problem)
        return found

    def check(self, tasks: list[Task]) -> dict[str, InstanceCheck]:
        """Several instances at a time (each its own episodes on the one env)."""
        from synth_validators.common import map_tasks

        return {c.task_id: c for c in map_tasks(self.one, tasks)}


def check_instances(env_dir: Path, draft: EnvDraft, tasks: list[Task], settings: Settings,
                    pool: Any = None) -> dict[str, InstanceCheck]:
    """Every check of `tasks` (instances present in the folder at env_dir, whose draft is `draft`)."""
    from synth.runtime import Env

    env = Env.load(env_dir, pool=pool)
    try:
        return InstanceChecker(env, draft, settings).check(tasks)
    finally:
        env.close()
