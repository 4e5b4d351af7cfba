"""The check loop's repairs (stages/check/loop.py), each recorded with its evidence and the code before
and after: blamed tools get a new body, blamed tasks new gold actions and verifiers (after a replay on
the repaired tools shows they still need one), a tool right to refuse on a rule its description does
not state gets the rule added to its description, and every probe a verifier paid for stays a case
it must keep failing."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from synth.artifacts import GateResult, RepairRecord, VerifierCase
from synth.errors import SynthError
from synth.llm import BudgetExceeded
from synth.pipeline.stages.check.check_repair import repair_tool, verifier_record
from synth.pipeline.stages.check.gold import generate_gold
from synth.pipeline.stages.repair import clip
from synth.use.replay import canonical, gold_problems

if TYPE_CHECKING:
    from synth.pipeline.stages.check.loop import Findings, RoundReport

MAX_RULES_ADDED = 3  # sentences one round may add to a tool's description


class LoopRepairs:
    """The repair steps of CheckLoop (a mixin: it works on the loop's draft, agents and settings)."""

    draft: Any
    gateway: Any
    settings: Any
    pool: Any
    env_dir: Any
    db_bytes: bytes
    tests: list
    agents: Any
    checker: Any
    budget: BudgetExceeded | None
    repairs: dict[str, list[str]]
    _gather: Any  # CheckLoop's: model-bound calls together, errors recorded, a budget stop remembered

    def apply_description_fixes(self, report: "RoundReport") -> None:
        """A tool that refused on a rule its description does not state gets the rule added to its
        description (the checking agent gave the sentence), so an agent knows it before it calls."""
        fixes, self.checker.description_fixes = self.checker.description_fixes, {}
        by_name = {t.name: t for t in self.draft.tools}
        for name, found in fixes.items():
            tool = by_name.get(name)
            if tool is None:
                continue
            before, added = tool.description, []
            for _, sentence in found:
                sentence = sentence if sentence.endswith((".", "!", "?")) else sentence + "."
                if sentence.lower() not in " ".join([before, *added]).lower() and len(added) < MAX_RULES_ADDED:
                    added.append(sentence)
            if not added:
                continue
            tool.description = " ".join([before.strip(), *added])
            report.repairs.append(RepairRecord(
                kind="description", name=name, diagnosis="the tool enforces a rule its description did not state",
                before=before, after=tool.description, evidence=[f"test {tid}: {text}" for tid, text in found]))

    async def repair(self, report: "RoundReport", found: "Findings") -> None:
        names = found.blamed_tools()
        records = await self._gather(
            [repair_tool(self.draft, self.gateway, n, found.tools.get(n, []), found.failing_tests.get(n, []),
                         self.repairs.setdefault(n, [])) for n in names],
            report.errors, [f"check_repair {n}" for n in names])
        for record in records:
            if record is not None:
                report.repairs.append(record)
                report.repaired_tools.append(record.name)
                for test in self.tests:  # its tests run again on the new body
                    if test.tool == record.name:
                        test.observed, test.verdict, test.reason = None, None, ""
        task_problems = found.tasks
        if not task_problems or self.budget is not None:
            return
        self._save()  # gold repairs see the repaired tools
        if report.repaired_tools:  # a task may have failed only because of a tool that is now fixed
            task_problems = await asyncio.to_thread(self._recheck, task_problems, found.verifier_suspect)
            if not task_problems:
                return
        before = self.draft.model_copy(deep=True)
        self._clarify(task_problems)
        try:
            self.draft, gold = await generate_gold(self.draft, self.gateway, self.settings,
                                                   task_ids=sorted(task_problems), feedback=task_problems,
                                                   pool=self.pool, db_bytes=self.db_bytes, sample=report.round,
                                                   verifier_only=self._replaying(task_problems, found))
        except BudgetExceeded as exc:
            self.budget = exc
            self.draft = getattr(exc, "draft", self.draft)
            return
        report.repaired_tasks = sorted(task_problems)
        for task_id in report.repaired_tasks:
            outcome = gold.tasks.get(task_id)
            if outcome is not None and not outcome.error:
                report.repairs.append(verifier_record(before, self.draft, task_id, task_problems[task_id],
                                                      outcome.diagnosis))
        report.errors += [f"gold {tid}: {clip(o.error, 300)}" for tid, o in gold.tasks.items() if o.error]

    def _replaying(self, task_problems: dict[str, list[str]], found: "Findings") -> set[str]:
        """The blamed tasks whose gold actions replay (only their verifiers are blamed): their repair
        prompts leave the tools' code out."""
        return {t for t in task_problems if t in found.verifier_suspect and t not in found.gold_broken}

    def _keep_probe_cases(self, gates: list[GateResult]) -> None:
        """Every probe a verifier paid for stays in verifier_tests.jsonl as a case it must fail."""
        known = {(c.get("task_id"), canonical([c.get("calls"), c.get("answer")])) for c in self.draft.verifier_tests}
        paid = next((g.details.get("exploits", {}) for g in gates if g.name == "probes"), {})
        for task_id, exploits in paid.items():
            for e in exploits:
                if (task_id, canonical([e["calls"], e["answer"]])) in known:
                    continue
                self.agents.numbers[task_id] = self.agents.numbers.get(task_id, 0) + 1
                case = VerifierCase(case_id=f"{task_id}.probe.{self.agents.numbers[task_id]}", task_id=task_id,
                                    source="probe", calls=e["calls"], answer=e["answer"], expect="fail",
                                    note=f"the {e['probe']} probe", found_reward=e["reward"])
                self.draft.verifier_tests = self.draft.verifier_tests + [case.model_dump(mode="json")]

    def _clarify(self, task_problems: dict[str, list[str]]) -> None:
        """Give the tasks the checking agent found ambiguous their clarified instructions."""
        clarified = {k: v for k, v in self.agents.clarified.items() if k in task_problems and v}
        if clarified:
            self.draft.tasks = [t.model_copy(update={"instruction": clarified[t.task_id]})
                                if t.task_id in clarified else t for t in self.draft.tasks]
            for task_id in clarified:
                self.agents.clarified.pop(task_id, None)

    def _recheck(self, task_problems: dict[str, list[str]], keep: set[str]) -> dict[str, list[str]]:
        """Replay the blamed tasks on the repaired tools; only those still failing need the model."""
        from synth.runtime import Env

        try:
            env = Env.load(self.env_dir, pool=self.pool)
        except SynthError:
            return task_problems  # the model will be shown the gates' findings
        try:
            out = {}
            for task_id, found in task_problems.items():
                task = next((t for t in self.draft.tasks if t.task_id == task_id), None)
                if task is None:
                    continue
                now = gold_problems(env, task) if task_id not in keep else found
                if now:
                    out[task_id] = now
            return out
        finally:
            env.close()
