"""`synth tasks`: hundreds of verified tasks per env from templates (and `synth run`'s step after verify).

For a verified env:
1. ask: the model writes settings.templates templates, read and write, easy to hard (ask.py); with
   `more`, no model: the env's task_templates.jsonl is instantiated again from the rows after the
   ones already used;
2. instantiate (no model): each template's query rows fill its slots, up to settings.per_template
   instances, duplicates of any task the env has (or another instance) passed over (instances.py);
3. check (no model, the sandbox): every instance gets the task gates' per-task checks (check.py).
   A row where the gold solution does not work is dropped; a verifier at fault on any instance,
   or a template with fewer than MIN_KEPT instances (and less than KEEP_SHARE of its rows) left,
   gets one repair turn with the concrete evidence and is checked again, or is dropped whole;
4. agents: the reward agents check settings.template_sample instances of each template (agents.py);
   a template they find fault with gets its repair turn (if it has not had one), then its instances
   are checked again with the agents' cases, or it is dropped whole;
5. splits by template (about TEST_SHARE of the templates are test, so no test instance shares a
   template with a train instance); the instances join tasks.jsonl, the templates
   task_templates.jsonl, the agents' cases verifier_tests.jsonl; report.json records `templates`,
   `tasks_step` and the instances' probe rewards (`probes`).
The checks of step 3 are the ones `synth check` runs per task, and none of them depends on which
other instances the env holds (the probes take no extra call from instances), so every instance
kept passes `synth check`; its gates run once, by the user, not twice here.
"""

from __future__ import annotations

import asyncio
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.artifacts import Task, TaskTemplate
from synth.config import Settings
from synth.errors import InputError, SynthError
from synth.folder.files import read_env_bytes
from synth.folder.format import EnvDraft, read_env_draft, write_env
from synth.llm import BudgetExceeded, Gateway
from synth.pipeline.stages.repair import clip
from synth.pipeline.tasks.ask import TemplateAsker
from synth.pipeline.tasks.check import InstanceCheck, check_instances
from synth.pipeline.tasks.instances import Made, Seen, call_line, instantiate
from synth.pipeline.tasks.outcome import TasksResult, TemplateOutcome

MIN_KEPT = 3  # a template keeps at least this many instances of a run, or is repaired / dropped
KEEP_SHARE = 0.5  # ... and at least this share of the rows it made instances of
TEST_SHARE = 0.2  # share of templates whose instances are test tasks
EVIDENCE = 8  # problems shown in a repair prompt


@dataclass(eq=False)  # one candidate per template: `in` and `index` mean this very one
class Candidate:
    template: TaskTemplate
    outcome: TemplateOutcome
    made: Made = field(default_factory=Made)
    checks: dict[str, InstanceCheck] = field(default_factory=dict)
    cases: list[dict[str, Any]] = field(default_factory=list)  # the reward agents' cases for its instances
    repaired: bool = False
    new: bool = True  # written this run (a model may repair it), not an existing template (--more)

    @property
    def dropped(self) -> bool:
        """No instance of it joins the env in this run (dropped, or --more found no rows left)."""
        return self.outcome.status != "kept"

    def passing(self) -> list[Task]:
        return [t for t in self.made.tasks if t.task_id in self.checks and self.checks[t.task_id].passed]

    def drop(self, reason: str) -> None:
        self.outcome.status, self.outcome.reason = "dropped", clip(reason, 500)

    def faults(self) -> list[str]:
        """Evidence against the template's verifier, one line per problem, naming the instance and row."""
        return [f"instance {t.task_id} (row {clip(repr(t.bindings), 200)}): {p}" for t in self.made.tasks
                for p in self.checks.get(t.task_id, InstanceCheck(t.task_id)).verifier]

    def short(self) -> list[str]:
        """Evidence that too few rows are valid instances: the rows whose gold solution failed."""
        return [f"instance {t.task_id} (row {clip(repr(t.bindings), 200)}): {p}" for t in self.made.tasks
                for p in self.checks.get(t.task_id, InstanceCheck(t.task_id)).gold]

    def too_few(self) -> bool:
        made = len(self.made.tasks)
        return len(self.passing()) < max(MIN_KEPT, math.ceil(KEEP_SHARE * made)) if self.new else False


class TasksStep:
    def __init__(self, root: Path, draft: EnvDraft, gateway: Gateway | None, settings: Settings, pool: Any):
        self.root, self.draft, self.gateway, self.settings, self.pool = root, draft, gateway, settings, pool
        self.db_bytes = read_env_bytes(root, "db/initial.sqlite")
        self.tools = {t.name: t for t in draft.tools}
        self.asker = TemplateAsker(draft, self.db_bytes, gateway) if gateway is not None else None
        self.result = TasksResult(env_id=draft.env_id, path=str(root), tasks=len(draft.tasks))
        self.cands: list[Candidate] = []
        self.stopped = False  # the budget ran out: no more model calls

    # ------------------------------------------------------------------ the run

    async def run(self, more: bool) -> TasksResult:
        self.result.more = more
        meter = self.gateway.usage if self.gateway is not None else None
        before = meter.env(self.draft.env_id) if meter else None
        with self._timed("ask"):
            if more:
                templates = list(self.draft.templates)
            else:
                templates, errors = await self.asker.ask_all(self.settings.templates, self.draft.templates)
                self.result.errors += errors
                self.stopped = self.gateway.usage.budget_reached
        self.cands = [Candidate(t, TemplateOutcome(template_id=t.template_id, kind=t.kind, difficulty=t.difficulty,
                                                   split=t.split), new=not more) for t in templates]
        with self._timed("instantiate"):
            self._instantiate(self.cands)
        await self._check(self.cands)
        await self._settle(self.cands, "checks")
        if self.gateway is not None and self.settings.template_sample > 0:
            await self._agents()
        if meter and before is not None:  # this env's calls only, though envs in flight share the gateway
            after = meter.env(self.draft.env_id)
            self.result.prompt_tokens = after.prompt_tokens - before.prompt_tokens
            self.result.completion_tokens = after.completion_tokens - before.completion_tokens
            self.result.reused_tokens = after.reused_tokens - before.reused_tokens
            self.result.calls = after.calls - before.calls
        with self._timed("write"):
            await asyncio.to_thread(self._finish)
        return self.result

    def _timed(self, name: str) -> "_Timer":
        return _Timer(self.result.seconds, name)

    def _instantiate(self, cands: list[Candidate]) -> None:
        """Instances of `cands` (fresh from their templates' rows), none repeating a task the env has or
        an instance of the other candidates."""
        seen = Seen.of(self.draft.tasks + [t for c in self.cands if c not in cands for t in c.made.tasks], self.tools)
        for c in cands:
            c.made = instantiate(c.template, self.db_bytes, self.tools, seen, self.settings.per_template)
            c.checks = {}
            c.outcome.candidates, c.outcome.skipped_rows = len(c.made.tasks), len(c.made.skipped)

    async def _check(self, cands: list[Candidate], only: set[str] | None = None) -> None:
        """The per-task checks of the instances of `cands` (of those in `only`, when given)."""
        tasks = [t for c in cands if not c.dropped for t in c.made.tasks if only is None or t.task_id in only]
        if not tasks:
            return
        with self._timed("check"), tempfile.TemporaryDirectory(prefix="synth-tasks-") as tmp:
            trial = self._draft(passing_only=False)
            folder = write_env(trial, Path(tmp) / self.draft.env_id, db_bytes=self.db_bytes)
            checks = await asyncio.to_thread(check_instances, folder, trial, tasks, self.settings, self.pool)
        for c in cands:
            c.checks.update({t.task_id: checks[t.task_id] for t in c.made.tasks if t.task_id in checks})
        self.result.instances_checked += len(tasks)

    def _problems(self, c: Candidate) -> list[str]:
        """Why a template must be repaired (or dropped); it is dropped here when no repair can help."""
        if c.made.error:
            return [f"the query failed: {c.made.error}"]
        if not c.made.tasks:
            why = (f"no new instance: {len(c.made.skipped)} row(s) passed over (NULL slots or duplicates of tasks the "
                   "env has)" if c.made.skipped else "its query has no rows left")
            if c.new:
                c.drop(why)
            else:  # --more: the template stands, it just has nothing more to give
                c.outcome.status, c.outcome.reason = "exhausted", why
            return []
        return c.faults() or (c.short() if c.too_few() else [])

    async def _settle(self, cands: list[Candidate], stage: str, found: dict[str, list[str]] | None = None) -> None:
        """Repair (once) or drop each template at fault (`found`: more evidence by template id)."""
        to_fix: dict[str, list[str]] = {}
        for c in cands:
            if c.dropped:
                continue
            problems = (found or {}).get(c.template.template_id, []) + self._problems(c)
            if not problems or c.dropped:
                continue
            if c.new and not c.repaired and self.asker is not None and not self.stopped:
                to_fix[c.template.template_id] = problems
            else:
                c.drop(f"after its repair, {problems[0]}" if c.repaired else problems[0])
        if to_fix:
            await self._repair(to_fix, stage)

    async def _repair(self, problems: dict[str, list[str]], stage: str) -> None:
        """One repair turn per template, then its instances made and checked again."""
        fixing = [c for c in self.cands if c.template.template_id in problems]
        results = await asyncio.to_thread(self._results, fixing)
        with self._timed("repair"):
            answers = await asyncio.gather(*(self.asker.repair(
                c.template, problems[c.template.template_id][:EVIDENCE], *results[c.template.template_id])
                for c in fixing), return_exceptions=True)
        fixed = []
        for c, answer in zip(fixing, answers):
            c.repaired = True
            shown = problems[c.template.template_id]
            if isinstance(answer, BudgetExceeded):
                self.stopped = True
            if isinstance(answer, SynthError):
                c.drop(f"{shown[0]}; its repair failed: {answer}")
                continue
            if isinstance(answer, BaseException):
                raise answer
            template, diagnosis = answer
            c.outcome.repairs.append({"stage": stage, "problems": [clip(p, 300) for p in shown[:EVIDENCE]],
                                      "diagnosis": clip(diagnosis, 500)})
            c.template = template.model_copy(update={"rows_used": 0})
            fixed.append(c)
        if fixed:
            self._instantiate(fixed)
            self._carry_cases(fixed)
            await self._check(fixed)
            await self._settle(fixed, stage)

    def _results(self, cands: list[Candidate]) -> dict[str, tuple[str, str]]:
        """For each template, what the gold calls of its first instance with a failing gold solution returned."""
        from synth.pipeline.stages.check.gold import call_results
        from synth.runtime import Env

        out = {c.template.template_id: ("", "") for c in cands}
        failing = {c.template.template_id: next((t for t in c.made.tasks if c.checks.get(t.task_id) is not None
                                                 and c.checks[t.task_id].gold), None) for c in cands}
        if not any(failing.values()):
            return out
        with tempfile.TemporaryDirectory(prefix="synth-tasks-") as tmp:
            folder = write_env(self._draft(passing_only=False), Path(tmp) / self.draft.env_id, db_bytes=self.db_bytes)
            env = Env.load(folder, pool=self.pool)
            try:
                for template_id, task in failing.items():
                    if task is not None:
                        try:
                            out[template_id] = (call_results(env, task), f"instance {task.task_id}")
                        except SynthError:
                            continue
            finally:
                env.close()
        return out

    def _carry_cases(self, fixed: list[Candidate]) -> None:
        """The agents' cases stay with an instance only while it is the same task (same row, same calls)."""
        for c in fixed:
            now = {t.task_id: t for t in c.made.tasks}
            c.cases = [case for case in c.cases if case["task_id"] in now and
                       [x.model_dump() for x in now[case["task_id"]].gold] == case.get("_gold")]

    async def _agents(self) -> None:
        """The reward agents on each template's sample; their cases are then replayed like any task's
        (under both rewards), and what they blame goes to the template's repair."""
        from synth.pipeline.tasks.agents import check_samples, sample

        live = [c for c in self.cands if not c.dropped and c.passing()]
        picked = {c.template.template_id: sample(c.passing(), self.settings.template_sample) for c in live}
        by_task = {t.task_id: c for c in live for t in picked[c.template.template_id]}
        tasks = [t for c in live for t in picked[c.template.template_id]]
        if not tasks:
            return
        probes = {t.task_id: by_task[t.task_id].checks[t.task_id].probes for t in tasks}
        with self._timed("agents"), tempfile.TemporaryDirectory(prefix="synth-tasks-") as tmp:
            trial = self._draft(passing_only=True)
            folder = write_env(trial, Path(tmp) / self.draft.env_id, db_bytes=self.db_bytes)
            found = await check_samples(trial, folder, {c.template.template_id: c.template for c in live}, tasks,
                                        self.gateway, self.settings, self.pool, probes)
        self.result.errors += found.errors
        gold_of = {t.task_id: [x.model_dump() for x in t.gold] for t in tasks}
        for case in found.cases:
            by_task[case.task_id].cases.append({**case.model_dump(mode="json"), "_gold": gold_of[case.task_id]})
        for task_id, summary in found.summary.items():
            by_task[task_id].outcome.agents[task_id] = summary
        if found.budget is not None:
            self.stopped = True
            self.result.errors.append(str(found.budget))
            for c in live:
                if not any(t.task_id in found.summary for t in picked[c.template.template_id]):
                    c.drop("the budget ran out before the reward agents checked it")
        blamed: dict[str, list[str]] = {}
        for task_id, problems in found.problems.items():
            blamed.setdefault(by_task[task_id].template.template_id, []).extend(
                f"instance {task_id}: {p}" for p in problems)
        await self._check(live, only={case.task_id for case in found.cases})
        await self._settle(live, "agents", blamed)

    # ------------------------------------------------------------------ the folder

    def _draft(self, *, passing_only: bool) -> EnvDraft:
        """The env with the live templates and their instances (all of them, or the passing ones)."""
        live = [c for c in self.cands if not c.dropped]
        templates = {t.template_id: t for t in self.draft.templates}
        templates.update({c.template.template_id: c.template for c in live})
        tasks = [t for c in live for t in (c.passing() if passing_only else c.made.tasks)]
        bodies = {t.task_id: call_line(templates[t.template_id], t.bindings or {}) for t in tasks}
        cases = [{k: v for k, v in case.items() if k != "_gold"} for c in live for case in c.cases]
        return self.draft.model_copy(update={
            "templates": list(templates.values()), "tasks": self.draft.tasks + tasks,
            "verifier_bodies": {**self.draft.verifier_bodies, **bodies},
            "verifier_tests": self.draft.verifier_tests + cases})

    def _finish(self) -> None:
        """Splits, then the folder: written, checked by every gate, instances failing one dropped."""
        self._assign_splits()
        for c in self.cands:
            keep = c.passing() if not c.dropped else []
            for t in c.made.tasks:
                if t not in keep:
                    check = c.checks.get(t.task_id)
                    c.outcome.note_dropped(t.task_id, (check.gold + check.verifier) if check else ["not checked"])
            if not c.dropped and not keep:
                c.drop("no instance passed its checks")
            c.template = c.template.model_copy(update={"rows_used": c.made.rows_used})
        final = self._draft(passing_only=True)
        for c in self.cands:  # a template --more found nothing to add to still has its rows tried
            if c.dropped and not c.new:
                final.templates = [c.template if t.template_id == c.template.template_id else t
                                   for t in final.templates]
        self._record(final)
        write_env(final, self.root, db_bytes=self.db_bytes)

    def _record(self, final: EnvDraft) -> None:
        """The run's figures and each template's outcome into `final`'s report."""
        kept = {t.task_id for t in final.tasks}
        probes = dict(final.report.get("probes") or {})
        probes.update({t.task_id: c.checks[t.task_id].probes for c in self.cands for t in c.made.tasks
                       if t.task_id in kept and t.task_id in c.checks})
        outcomes = dict(final.report.get("templates") or {})
        for c in self.cands:
            c.outcome.kept = sum(t.task_id in kept for t in c.made.tasks)
            c.outcome.instances = sum(t.template_id == c.template.template_id for t in final.tasks)
            if c.dropped and not c.new and (outcomes.get(c.template.template_id) or {}).get("status") == "kept":
                continue  # --more added nothing to a template the env keeps: its record stands
            outcomes[c.template.template_id] = c.outcome.model_dump(mode="json")
        self.result.templates = [c.outcome for c in self.cands]
        self.result.added = len(final.tasks) - len(self.draft.tasks)
        self.result.tasks = len(final.tasks)
        final.report = {**final.report, "probes": probes, "templates": outcomes, "tasks_step": self.result.summary()}

    def _assign_splits(self) -> None:
        """New templates in (kind, id) order; a template is test while the test templates are under TEST_SHARE."""
        total = len(self.draft.templates)
        tests = sum(t.split == "test" for t in self.draft.templates)
        for c in sorted((c for c in self.cands if c.new and not c.dropped),
                        key=lambda c: (c.template.kind, c.template.template_id)):
            total += 1
            split = "test" if tests < math.floor(total * TEST_SHARE + 0.5) else "train"
            tests += split == "test"
            c.template = c.template.model_copy(update={"split": split})
            c.outcome.split = split
            c.made.tasks = [t.model_copy(update={"split": split}) for t in c.made.tasks]


class _Timer:
    def __init__(self, seconds: dict[str, float], name: str):
        self.seconds, self.name = seconds, name

    def __enter__(self) -> None:
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.seconds[self.name] = round(self.seconds.get(self.name, 0.0) + time.monotonic() - self.start, 3)


async def add_tasks(env_dir: Path | str, gateway: Gateway | None, settings: Settings, *, more: bool = False,
                    pool: Any = None) -> TasksResult:
    """Tasks from templates for one verified env (see the module's docstring); `more` needs no model."""
    root = Path(env_dir)
    draft = read_env_draft(root)
    if draft.status != "verified":
        raise InputError(f"{root}: its status is {draft.status!r}; tasks are added to verified envs only "
                         "(`synth verify` or `synth check` it first)")
    if more and not draft.templates:
        raise InputError(f"{root} has no task_templates.jsonl; run `synth tasks {root} --model M` first")
    if not more and gateway is None:
        raise InputError("writing templates needs a model: pass --model (or --more to instantiate the env's "
                         "templates again with no model)")
    return await TasksStep(root, draft, gateway, settings, pool).run(more)

