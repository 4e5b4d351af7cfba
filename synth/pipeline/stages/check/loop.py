"""Stage `check`: EnvScaler's testing agent / checking agent pair, made to repair.

Each round runs these steps, independent ones side by side (bounded by --concurrency):
1. write_tests: the testing agent (stages/check/tests.py) writes tests for every
   tool that has none yet, several tools per call; beside it, in the first
   round, the gold stage writes gold solutions and verifiers (stages/check/gold.py);
2. run_tests + judge: synth runs every test not yet run on a fresh episode in the
   sandbox (setup calls, then the call under test, recording the result, the
   database change and any rule of rules.json the call broke; a crash or a
   broken rule is a fail with no model needed), and the checking agent
   (stages/check/judge.py, `--judge-model`) judges the rest: pass, test_wrong
   (the tool is right, the test is not) or fail; a tool right to refuse on a
   rule its description does not state gets the rule added to its description;
   beside them, the reward agents (stages/check/rewards.py) check the verifiers
   of the tasks whose gold works: paraphrases of read tasks' answers, an
   independent solver and a red team, with the checking agent on what they find;
3. gates: the env folder is written and every quality gate runs (synth_validators);
4. findings: what the tests, the gates and the reward agents blame, per tool and
   per task (Findings); every agent case stays in verifier_tests.jsonl;
5. done when the pass rate reaches settings.check_pass_rate, every gate passes
   and nothing is blamed; a tool still blamed after the last round blocks
   verification (never shipped as a warning). Otherwise repair: blamed tools
   get a new body (stages/check/check_repair.py) and their tests rerun next round;
   tasks blamed get new gold actions/verifiers (stages/check/gold.py).
Every repair is recorded with its evidence and code before and after. A task gets at most
settings.task_repairs verifier repairs; blamed again after them, it is set aside (no more repairs or
reward agents), and once only such tasks are left the loop ends and verify drops them.
settings.check_rounds bounds the rounds; a verifier blamed in the last of them
still gets its repair and recheck, up to settings.verifier_rounds more rounds.
The reasons of a loop that ends unfinished are kept. Every test ends up in
tests.jsonl, replayable with no model.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from synth.artifacts import PASSING_VERDICTS, GateResult, RepairRecord, ToolTest
from synth.config import Settings
from synth.errors import SynthError
from synth.folder.database import build_database, open_bytes, user_tables
from synth.folder.format import EnvDraft, write_env
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.stages.check.judge import CheckingAgent
from synth.pipeline.stages.check.rewards import AgentBook, run_reward_agents
from synth.pipeline.stages.check.tests import TestingAgent, automatic_verdict, run_tests
from synth.pipeline.stages.check.loop_repairs import LoopRepairs
from synth.pipeline.stages.check.gold import GoldBudgetStop, GoldReport, generate_gold
from synth.pipeline.stages.repair import clip
from synth.pipeline.stages.build.tool_probe import body_problems

TASK_GATES = ("solvable", "discriminates", "probes", "reward_cases", "deterministic", "robust")  # they blame tasks
REPLAY_GATES = ("solvable", "discriminates")  # findings that replaying the gold solution can re-check
TOOL_GATES = ("regression", "rules", "robust")  # their findings blame tool bodies


class RoundReport(BaseModel):
    round: int
    tests: int = 0
    new_tests: int = 0
    ran: int = 0
    pass_rate: float = 0.0
    failing_tools: list[str] = Field(default_factory=list)
    test_wrong: int = 0  # tests whose expectation the judge found wrong (the tool is right)
    gates: dict[str, bool] = Field(default_factory=dict)
    repaired_tools: list[str] = Field(default_factory=list)
    repaired_tasks: list[str] = Field(default_factory=list)
    repairs: list[RepairRecord] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    agents: dict[str, Any] = Field(default_factory=dict)  # task -> reward agent -> what it found
    new_cases: int = 0  # verifier regression cases added this round
    set_aside: list[str] = Field(default_factory=list)  # tasks still blamed after settings.task_repairs repairs


class CheckLoopResult(BaseModel):
    draft: EnvDraft
    gold: GoldReport | None = None  # the gold solutions the loop wrote
    passed: bool
    pass_rate: float
    rounds: list[RoundReport]
    gates: list[GateResult]
    reasons: list[str] = Field(default_factory=list)
    budget_stopped: bool = False
    judge_model: str = ""


@dataclass
class Findings:
    """What a round blames: tools (with their failing tests and other evidence) and tasks."""

    failing_tests: dict[str, list[ToolTest]] = field(default_factory=dict)
    tools: dict[str, list[str]] = field(default_factory=dict)  # evidence besides failing tests
    tasks: dict[str, list[str]] = field(default_factory=dict)
    verifier_suspect: set[str] = field(default_factory=set)  # the verifier itself, not the tools, is at fault
    gold_broken: set[str] = field(default_factory=set)  # tasks whose gold solution fails to replay (REPLAY_GATES)

    def blamed_tools(self) -> list[str]:
        return sorted(set(self.failing_tests) | set(self.tools))

    def tool(self, name: str, problem: str) -> None:
        self.tools.setdefault(name, []).append(problem)

    def task(self, task_id: str, problem: str, *, verifier: bool = False) -> None:
        self.tasks.setdefault(task_id, []).append(problem)
        if verifier:
            self.verifier_suspect.add(task_id)


def can_drop(tasks: int, dropped: int) -> bool:
    """Whether an env of `tasks` tasks may ship without `dropped` of them: at least half must remain."""
    return tasks - dropped >= max(1, math.ceil(tasks / 2))


def pass_rate(tests: list[ToolTest]) -> float:
    return sum(t.verdict in PASSING_VERDICTS for t in tests) / len(tests) if tests else 0.0


class CheckLoop(LoopRepairs):
    def __init__(self, draft: EnvDraft, env_dir: Path, gateway: Gateway, settings: Settings, pool: Any):
        self.draft, self.env_dir, self.gateway, self.settings, self.pool = draft, Path(env_dir), gateway, settings, pool
        self.db_bytes = build_database(draft.schema_sql, draft.data_sql)
        conn = open_bytes(self.db_bytes, readonly=True)
        try:
            self.tables = user_tables(conn)
        finally:
            conn.close()
        self.tests: list[ToolTest] = []
        for raw in draft.tests:
            try:
                self.tests.append(ToolTest.model_validate(raw))
            except ValueError:
                continue  # a malformed line from an older run: its tool simply gets new tests
        self.tester = TestingAgent(draft, self.db_bytes, gateway, self.tables)
        self.checker = CheckingAgent(gateway.judge())
        self.budget: BudgetExceeded | None = None
        self.repairs: dict[str, list[str]] = {}  # tool -> diagnoses of its earlier repairs
        self.agents = AgentBook(draft.verifier_tests)  # what the reward agents already checked
        self.gold_report: GoldReport | None = None  # of the gold written inside the loop, if any
        self.task_repairs: dict[str, int] = {}  # task -> verifier repairs it had in this loop
        self.set_aside: set[str] = set()  # tasks out of repairs: left to verify's drop

    async def _gather(self, calls: list, errors: list[str], labels: list[str]) -> list:
        """Run model-bound calls together; record item errors, remember a budget stop."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        out = []
        for label, result in zip(labels, results):
            if isinstance(result, BudgetExceeded):
                self.budget = self.budget or result
                out.append(None)
            elif isinstance(result, (ModelError, SynthError)):
                errors.append(f"{label}: {clip(str(result), 300)}")
                out.append(None)
            elif isinstance(result, BaseException):
                raise result
            else:
                out.append(result)
        return out

    # ----------------------------------------------------------------- the steps of a round

    async def write_tests(self, report: RoundReport) -> None:
        self.tester.draft = self.draft
        untested = [t for t in self.draft.tools if not any(x.tool == t.name for x in self.tests)]
        batches = self.tester.batches(untested)
        proposed = await self._gather([self.tester.propose(b) for b in batches], report.errors,
                                      [f"check_tests {'+'.join(t.name for t in b)}" for b in batches])
        for tests in proposed:
            self.tests += tests or []
            report.new_tests += len(tests or [])

    async def run_tests(self, report: RoundReport) -> None:
        pending = [t for t in self.tests if t.observed is None]
        if not pending:
            return
        self._save()
        load_error = await asyncio.to_thread(run_tests, self.env_dir, pending, pool=self.pool,
                                             volatile=self.draft.volatile_columns, rules=self.draft.rules)
        if load_error:
            report.errors.append(f"the env could not be loaded to run tests: {clip(load_error, 500)}")
        report.ran = 0 if load_error else len(pending)

    async def judge(self, report: RoundReport) -> None:
        unjudged: dict[str, list[ToolTest]] = {}
        for test in self.tests:
            if test.observed is not None and test.verdict is None:
                unjudged.setdefault(test.tool, []).append(test)
        batches = self.checker.batches(unjudged)
        await self._gather([self.checker.judge(self.draft, b, unjudged) for b in batches], report.errors,
                           [f"check_judge {'+'.join(b)}" for b in batches])

    def gates(self) -> list[GateResult]:
        from synth_validators import run_all

        return run_all(self.env_dir, pool=self.pool, required_rate=self.settings.check_pass_rate,
                       settings=self.settings)

    def findings(self, gates: list[GateResult]) -> Findings:
        found = Findings()
        for test in self.tests:
            if test.verdict == "fail":
                found.failing_tests.setdefault(test.tool, []).append(test)
        names = {t.name for t in self.draft.tools}
        for gate in gates:
            if gate.name in TOOL_GATES:
                for name, problems in gate.details.get("tools", {}).items():
                    if name in names:
                        for p in problems:
                            found.tool(name, f"{gate.name} gate: {p}")
            if gate.name in TASK_GATES:
                for task_id, problems in gate.details.get("tasks", {}).items():
                    for p in problems:
                        found.task(task_id, p, verifier=gate.name not in REPLAY_GATES)
                        if gate.name in REPLAY_GATES:
                            found.gold_broken.add(task_id)
        for tool in self.draft.tools:  # a body that fails the static check breaks the whole module
            for p in body_problems(tool.name, self.draft.tool_bodies.get(tool.name, "")):
                found.tool(tool.name, f"static check: {p}")
        return found

    # ----------------------------------------------------------------- the loop

    def _save(self) -> None:
        self.draft.tests = [t.model_dump(mode="json") for t in self.tests]
        write_env(self.draft, self.env_dir, db_bytes=self.db_bytes)

    def _result(self, rounds: list[RoundReport], gates: list[GateResult], passed: bool) -> CheckLoopResult:
        reasons = [] if passed else self._reasons(gates)
        return CheckLoopResult(draft=self.draft, gold=self.gold_report, passed=passed, pass_rate=round(pass_rate(self.tests), 4),
                               rounds=rounds, gates=gates, reasons=reasons, budget_stopped=self.budget is not None,
                               judge_model=self.checker.model)

    def _reasons(self, gates: list[GateResult]) -> list[str]:
        rate = pass_rate(self.tests)
        reasons = []
        if self.budget is not None:
            reasons.append(str(self.budget))
        if rate < self.settings.check_pass_rate:
            failing = sorted({t.tool for t in self.tests if t.verdict not in PASSING_VERDICTS})
            reasons.append(f"test pass rate {rate:.0%} < {self.settings.check_pass_rate:.0%} "
                           f"(failing tools: {', '.join(failing) or '-'})")
        blamed = sorted({t.tool for t in self.tests if t.verdict == "fail"})
        if blamed:
            reasons.append(f"tools still judged wrong after the last repair: {', '.join(blamed)}")
        for gate in gates:
            if not gate.passed:
                reasons.append(f"gate {gate.name}: " + "; ".join(clip(e, 300) for e in gate.evidence[:5]))
        return reasons

    async def run(self) -> CheckLoopResult:
        """Rounds of: tests (written, run, judged) beside the reward agents, then the gates, then repairs.

        Gold solutions are written beside the first round's tests, and the reward agents start as soon
        as verifiers exist. settings.check_rounds bounds the rounds; a round that ends with verifiers
        blamed gets a repair and a recheck anyway, up to settings.verifier_rounds rounds past that, so
        no finding goes unrepaired because it came late."""
        rounds: list[RoundReport] = []
        gates: list[GateResult] = []
        extra = 0
        number = 0
        while True:
            number += 1
            report = RoundReport(round=number)
            rounds.append(report)
            self._save()
            await asyncio.gather(self.write_tests(report), self.make_gold(report))
            if self.budget is not None:
                break
            self._save()
            by_agents = Findings()
            await asyncio.gather(self.test_and_judge(report), self.reward_agents(
                report, by_agents, self._broken(gates) | self.set_aside))
            if self.budget is not None:
                break
            self.apply_description_fixes(report)
            self._save()
            gates = await asyncio.to_thread(self.gates)
            found = self.findings(gates)
            for task_id, problems in by_agents.tasks.items():  # the agents' own account first
                found.tasks[task_id] = problems + found.tasks.get(task_id, [])
                found.verifier_suspect.add(task_id)
            self._keep_probe_cases(gates)
            self.agents.probes = next((g.details.get("probes", {}) for g in gates if g.name == "probes"), {})
            report.tests, report.pass_rate = len(self.tests), round(pass_rate(self.tests), 4)
            report.test_wrong = sum(t.verdict == "test_wrong" for t in self.tests)
            report.gates = {g.name: g.passed for g in gates}
            report.failing_tools = sorted(found.failing_tests)
            report.set_aside = self._set_aside(found)
            met = report.pass_rate >= self.settings.check_pass_rate and all(g.passed for g in gates)
            if met and not found.blamed_tools() and not found.tasks:
                return self._result(rounds, gates, passed=True)
            tools_clean = report.pass_rate >= self.settings.check_pass_rate and not found.blamed_tools()
            if tools_clean and not found.tasks and self.set_aside:
                break  # what is left is tasks out of repairs: verify drops them, another round changes nothing
            if number >= self.settings.check_rounds:
                # Past the tool rounds, only a verifier finding on clean tools buys another round (its
                # repair and recheck); a tool still failing blocks verification whatever else is fixed.
                if not (tools_clean and found.tasks) or extra >= self.settings.verifier_rounds:
                    break
                extra += 1
            await self.repair(report, found)
            for task_id in report.repaired_tasks:
                self.task_repairs[task_id] = self.task_repairs.get(task_id, 0) + 1
            if self.budget is not None:
                break
        self._save()
        return self._result(rounds, gates, passed=False)

    def _set_aside(self, found: Findings) -> list[str]:
        """Tasks blamed again after settings.task_repairs repairs leave the findings: a trial showed a
        verifier that two repairs did not settle rarely settles later, while each further round
        resends it to the gold stage and the reward agents. When setting them aside would leave fewer
        than half the env's tasks (verify could not drop them, and the env would fail), they get one
        repair more: there it decides the env (a trial's env kept 4 more tasks with its second repairs).
        Returns the tasks set aside this round."""
        limit = self.settings.task_repairs
        spent = [t for t in found.tasks if self.task_repairs.get(t, 0) >= limit]
        if not can_drop(len(self.draft.tasks), len(self.set_aside | set(spent))):
            limit += 1
        out = sorted(t for t in found.tasks if self.task_repairs.get(t, 0) >= limit)
        for task_id in out:
            found.tasks.pop(task_id)
            found.verifier_suspect.discard(task_id)
        self.set_aside.update(out)
        return out

    async def test_and_judge(self, report: RoundReport) -> None:
        await self.run_tests(report)
        await self.judge(report)

    async def make_gold(self, report: RoundReport) -> None:
        """Gold solutions and verifiers for the tasks that have none yet (the first round's, mostly)."""
        missing = [t.task_id for t in self.draft.tasks if not t.gold or t.task_id not in self.draft.verifier_bodies]
        if not missing or self.budget is not None:
            return
        try:
            self.draft, gold = await generate_gold(self.draft, self.gateway, self.settings, task_ids=missing,
                                                   pool=self.pool, db_bytes=self.db_bytes)
        except GoldBudgetStop as stop:
            self.draft, gold = stop.draft, stop.report
            self.budget = stop
        except BudgetExceeded as exc:
            self.budget = exc
            return
        self.gold_report = gold
        report.errors += [f"gold {tid}: {clip(o.error, 300)}" for tid, o in gold.tasks.items() if o.error]

    def _broken(self, gates: list[GateResult]) -> set[str]:
        """Tasks whose gold solution does not work yet: the reward agents leave them alone."""
        if gates:
            return {t for g in gates if g.name == "solvable" for t in g.details.get("tasks", {})}
        if self.gold_report is None:
            return set()
        return {tid for tid, o in self.gold_report.tasks.items() if not o.passed}

    # ----------------------------------------------------------------- the reward agents

    async def reward_agents(self, report: RoundReport, found: Findings, broken: set[str]) -> None:
        """Paraphrases, the solver and the red team on the tasks due; what they blame joins `found`."""
        result = await run_reward_agents(self.agents, self.draft, self.env_dir, self.gateway, self.settings,
                                         self.pool, broken)
        if result is None:
            return
        if result.budget is not None:
            self.budget = self.budget or result.budget
        self.draft.verifier_tests = self.draft.verifier_tests + [c.model_dump(mode="json") for c in result.cases]
        report.new_cases, report.agents = len(result.cases), result.summary
        report.errors += result.errors
        for task_id, problems in result.problems.items():
            for problem in problems:
                found.task(task_id, problem, verifier=True)



async def run_check_loop(draft: EnvDraft, env_dir: Path | str, gateway: Gateway, settings: Settings, *,
                         pool: Any = None) -> CheckLoopResult:
    """Run the check loop on `draft`, writing the env folder at `env_dir` as it goes."""
    return await CheckLoop(draft.model_copy(deep=True), Path(env_dir), gateway, settings, pool).run()


__all__ = ["CheckLoop", "CheckLoopResult", "Findings", "RoundReport", "TASK_GATES", "automatic_verdict",
           "can_drop", "pass_rate", "run_check_loop"]
