"""The check loop's reward agents: do the verifiers pay for correct work, and only for it?

Run from the check loop's first round, as soon as verifiers exist (beside the tool tests), on the
tasks due (those whose gold solution works):
- paraphrase (stages/check/paraphrase.py): every read task's expected answer in other words must
  earn the full reward; a reply that fails goes to the checking agent, and if it is correct the
  verifier is repaired (a false negative). A reply that asserts another value of a requested fact's
  kind (a second count where a count is asked) is a hedge to every reward and is set aside, noted
  as `beyond_contract`;
- solver (stages/check/solver.py): independent work through the tools. Its final state equals
  the gold solution's but the rubric fails: for a write task whose answer reports the work, a
  false negative; for a read task, the checking agent decides whether the answer is correct. Its
  state differs but the rubric passes: the checking agent says whether the verifier is too loose
  (repair it), the task is ambiguous (its instruction is clarified and the gold redone) or the
  difference does not matter;
- red team (stages/check/redteam.py): every attempt that earns at least the probe threshold
  without doing the task is an exploit and sends the verifier to repair.
Everything found stays in verifier_tests.jsonl as a regression case (the reward_cases gate and
the gold stage replay them): correct work must keep earning 1.0, exploits must stay below the
threshold. Model errors are recorded per agent and task; they never stop the loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.artifacts import Task, VerifierCase
from synth.config import Settings
from synth.errors import SynthError
from synth.folder.format import EnvDraft
from synth.llm import BudgetExceeded, Gateway, ModelError
from synth.pipeline.stages.check.attempts import Attempt, judge_item
from synth.pipeline.stages.check.paraphrase import ParaphraseAgent
from synth.pipeline.stages.check.redteam import RedTeamAgent
from synth.pipeline.stages.check.reward_judge import judge_items
from synth.pipeline.stages.check.solver import SolverAgent
from synth.pipeline.stages.repair import clip


@dataclass
class AgentFindings:
    problems: dict[str, list[str]] = field(default_factory=dict)  # task -> evidence for its verifier's repair
    cases: list[VerifierCase] = field(default_factory=list)
    clarified: dict[str, str] = field(default_factory=dict)  # task -> clarified instruction
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> agent -> what it found
    errors: list[str] = field(default_factory=list)
    budget: BudgetExceeded | None = None

    def problem(self, task_id: str, text: str) -> None:
        self.problems.setdefault(task_id, []).append(text)

    def note(self, task_id: str, agent: str, **values: Any) -> None:
        entry = self.summary.setdefault(task_id, {}).setdefault(agent, {})
        for key, value in values.items():
            entry[key] = entry.get(key, 0) + value if isinstance(value, int) and not isinstance(value, bool) \
                else value


def _failed(attempt: Attempt) -> str:
    if attempt.reward is None:
        return "no reward"
    if attempt.reward.error:
        return f"the verifier failed: {clip(attempt.reward.error, 200)}"
    return ", ".join(c.name for c in attempt.reward.checks if not c.passed) or "none"


def _said(attempt: Attempt) -> str:
    calls = "; ".join(attempt.steps()) or "no calls"  # each result already cut by whole items
    return f"calls {calls}; answer {attempt.answer or ''!r}"


class RewardAgents:
    def __init__(self, draft: EnvDraft, env: Any, gateway: Gateway, settings: Settings, *,
                 probes: dict[str, list[dict[str, Any]]], case_numbers: dict[str, int]):
        self.draft, self.env, self.gateway, self.settings = draft, env, gateway, settings
        self.volatile = draft.volatile_columns
        self.probes = probes
        self.numbers = case_numbers  # next case number per task (case ids stay unique across rounds)
        self.found = AgentFindings()

    def _case(self, attempt: Attempt, expect: str, note: str = "") -> None:
        task_id = attempt.task.task_id
        self.numbers[task_id] = self.numbers.get(task_id, 0) + 1
        self.found.cases.append(attempt.case(f"{task_id}.{attempt.source}.{self.numbers[task_id]}", expect, note))

    async def _run(self, label: str, calls: list[Any], names: list[list[str]]) -> list[Attempt]:
        results = await asyncio.gather(*calls, return_exceptions=True)
        out: list[Attempt] = []
        for ids, result in zip(names, results):
            if isinstance(result, BudgetExceeded):
                self.found.budget = self.found.budget or result
            elif isinstance(result, (ModelError, SynthError)):
                self.found.errors.append(f"{label} {'+'.join(ids)}: {clip(str(result), 300)}")
                for task_id in ids:
                    self.found.note(task_id, label, error=clip(str(result), 200))
            elif isinstance(result, BaseException):
                raise result
            else:
                out += result
        return out

    async def run(self, paraphrase: list[Task], solve: list[Task], attack: list[Task]) -> AgentFindings:
        para = ParaphraseAgent(self.draft, self.env, self.gateway, self.volatile)
        solver = SolverAgent(self.draft, self.env, self.gateway, self.volatile)
        red = RedTeamAgent(self.draft, self.env, self.gateway, self.volatile)
        groups = [(para.batches(paraphrase), para.check, "paraphrase"), (solver.batches(solve), solver.solve, "solver"),
                  (red.batches(attack), red.attack, "red_team")]
        runs = [self._run(label, [fn(b) for b in batches], [[t.task_id for t in b] for b in batches])
                for batches, fn, label in groups]
        paraphrased, solved, attacked = await asyncio.gather(*runs)
        items: list[tuple[Attempt, str]] = []
        items += self._paraphrases(paraphrased)
        items += self._solved(solved)
        items += self._attacked(attacked)
        if items and self.found.budget is None:
            await self._judge(items)
        return self.found

    # ----------------------------------------------------------------- what each agent found

    def _paraphrases(self, attempts: list[Attempt]) -> list[tuple[Attempt, str]]:
        from synth.use.reward import beyond_contract

        out = []
        for a in attempts:
            ok = a.reward is not None and a.reward.passed and a.score >= 1.0
            beyond = "" if ok else beyond_contract(self.env, a.task, a.answer)
            self.found.note(a.task.task_id, "paraphrase", tried=1, failed=0 if ok or beyond else 1)
            if beyond:
                self.found.note(a.task.task_id, "paraphrase", beyond_contract=1, beyond_why=clip(beyond, 200))
            if ok:
                self._case(a, "pass", "a paraphrase of the expected answer")
            elif not beyond:  # one that asserts other values of a fact's kind is a hedge to every reward
                out.append((a, "answer"))
        return out

    def _solved(self, attempts: list[Attempt]) -> list[tuple[Attempt, str]]:
        out = []
        for a in attempts:
            task_id = a.task.task_id
            state = "same as gold" if a.same_state else "different from gold"
            self.found.note(task_id, "solver", state=state, reward=round(a.score, 4), calls=len(a.calls))
            if a.error:
                self.found.note(task_id, "solver", error=clip(a.error, 200))
                continue
            passed = a.reward is not None and a.reward.passed
            if a.same_state and passed:
                if [(c.tool, c.arguments) for c in a.calls] != [(c.tool, c.arguments) for c in a.task.gold]:
                    self._case(a, "pass", "an independent correct solution by another path")
            elif a.same_state and a.task.kind == "write":
                from synth.use.reward import helpers

                if not (a.answer or "").strip() or helpers().refuses(a.answer):
                    self.found.note(task_id, "solver", verdict="the solver's answer does not report the work")
                    continue
                self.found.note(task_id, "solver", verdict="verifier false negative")
                self._case(a, "pass", "an independent solution that reaches the gold final state")
                self.found.problem(task_id, f"an independent solver reached the gold solution's final state ({_said(a)}) "
                                            f"but the verifier scored {a.score:.2f} (failed checks: {_failed(a)}): it "
                                            "rejects a correct solution; accept every correct way of doing the task")
            elif a.same_state:
                out.append((a, "answer"))
            elif passed:
                out.append((a, "state"))
        return out

    def _attacked(self, attempts: list[Attempt]) -> list[tuple[Attempt, str]]:
        out = []
        threshold = self.settings.probe_threshold
        for a in attempts:
            self.found.note(a.task.task_id, "red_team", attempts=1, exploits=0)
            if a.error or a.score < threshold:
                continue
            if a.same_state and a.task.kind == "read":
                out.append((a, "answer"))
            elif not a.same_state:
                self._exploit(a, "its final database is not the gold solution's")
        return out

    def _exploit(self, a: Attempt, why: str) -> None:
        self.found.note(a.task.task_id, "red_team", exploits=1)
        self._case(a, "fail")
        self.found.problem(a.task.task_id, f"the red team's attempt ({clip(a.note, 200)}): {_said(a)} earned "
                                           f"{a.score:.2f} without doing the task ({why}); failed checks: "
                                           f"{_failed(a)}; the verifier must fail it")

    async def _judge(self, items: list[tuple[Attempt, str]]) -> None:
        shown = [judge_item(self.env, a, f"i{n}", question, self.volatile, self.probes.get(a.task.task_id, []))
                 for n, (a, question) in enumerate(items, 1)]
        try:
            verdicts = await judge_items(self.draft, self.gateway, shown)
        except BudgetExceeded as exc:
            self.found.budget = exc
            return
        except (ModelError, SynthError) as exc:
            self.found.errors.append(f"reward_judge: {clip(str(exc), 300)}")
            return
        for n, (a, question) in enumerate(items, 1):
            v = verdicts.get(f"i{n}")
            if v is not None:
                self._apply(a, question, v.verdict, v.reason, v.clarified_instruction)

    def _apply(self, a: Attempt, question: str, verdict: str, reason: str, clarified: str) -> None:
        task_id, threshold = a.task.task_id, self.settings.probe_threshold
        self.found.note(task_id, a.source, verdict=f"{verdict}: {clip(reason, 200)}")
        if a.source == "red_team":
            if verdict == "wrong":
                self._exploit(a, f"the checking agent: the answer is wrong: {clip(reason, 300)}")
            return
        if question == "answer" and verdict == "correct":
            self._case(a, "pass", f"checked correct: {reason}")
            what = "a paraphrase of the expected answer" if a.source == "paraphrase" else \
                "an independent solver's answer on the gold final state"
            self.found.problem(task_id, f"{what}, {clip(a.answer or '', 400)!r}, is correct (checking agent: "
                                        f"{clip(reason, 300)}) but scored {a.score:.2f} (failed checks: {_failed(a)}); "
                                        "the verifier must give every correct wording the full reward")
        elif question == "answer":
            self._case(a, "fail", f"checked wrong: {reason}")
            if a.score >= threshold:
                self.found.problem(task_id, f"a wrong answer {clip(a.answer or '', 300)!r} ({clip(reason, 300)}) "
                                            f"scored {a.score:.2f}; the verifier must fail it")
        elif verdict == "too_loose":
            self._case(a, "fail", f"checked wrong: {reason}")
            self.found.problem(task_id, f"an independent solver ended in another database than the gold solution "
                                        f"({_said(a)}) and the verifier passed it ({a.score:.2f}); the checking "
                                        f"agent: {clip(reason, 300)}; the verifier must fail it")
        elif verdict == "ambiguous":
            self.found.clarified[task_id] = clarified.strip()
            self.found.problem(task_id, f"the task was ambiguous ({clip(reason, 300)}): an independent solver did "
                                        f"it another way ({_said(a)}); its instruction is now "
                                        f"{clarified.strip()!r}: make the gold solution and the verifier follow it")


class AgentBook:
    """What the reward agents already checked, across rounds (and from the cases an earlier run
    recorded): a read task is paraphrased once, a task solved once, a verifier attacked once per
    version of its code; case numbers keep counting; clarified instructions wait for the repair."""

    def __init__(self, cases: list[dict[str, Any]]):
        cases = [c for c in cases if isinstance(c, dict)]
        self.paraphrased = {c.get("task_id") for c in cases if c.get("source") == "paraphrase"}
        self.solved: set[str] = set()
        self.attacked: dict[str, str] = {}  # task -> the verifier body the red team last attacked
        self.numbers: dict[str, int] = {}
        for c in cases:
            tail = str(c.get("case_id", "")).rsplit(".", 1)[-1]
            if tail.isdigit():
                self.numbers[c["task_id"]] = max(self.numbers.get(c["task_id"], 0), int(tail))
        self.clarified: dict[str, str] = {}
        self.probes: dict[str, list[dict[str, Any]]] = {}  # task -> the probes gate's last results (for the judge)

    def due(self, draft: EnvDraft, broken: set[str]) -> tuple[list[Task], list[Task], list[Task]]:
        tasks = [t for t in draft.tasks if t.gold and t.task_id in draft.verifier_bodies and t.task_id not in broken]
        return ([t for t in tasks if t.kind == "read" and t.expected_answer and t.task_id not in self.paraphrased],
                [t for t in tasks if t.task_id not in self.solved],
                [t for t in tasks if self.attacked.get(t.task_id) != draft.verifier_bodies[t.task_id]])

    def mark(self, draft: EnvDraft, result: AgentFindings, paraphrase: list[Task], solve: list[Task],
             attack: list[Task]) -> None:
        failed = {t for t, by_agent in result.summary.items() for v in by_agent.values() if "error" in v}
        self.paraphrased |= {t.task_id for t in paraphrase if t.task_id not in failed}
        self.solved |= {t.task_id for t in solve if t.task_id not in failed}
        self.attacked.update({t.task_id: draft.verifier_bodies[t.task_id] for t in attack if t.task_id not in failed})
        self.clarified.update(result.clarified)


async def run_reward_agents(book: AgentBook, draft: EnvDraft, env_dir: Path, gateway: Gateway, settings: Settings,
                            pool: Any, broken: set[str]) -> AgentFindings | None:
    """The agents on the tasks due (none in `broken`, whose gold fails); None when nothing is due."""
    from synth.runtime import Env

    paraphrase, solve, attack = book.due(draft, broken)
    if not (paraphrase or solve or attack):
        return None
    probes = book.probes
    try:
        env = await asyncio.to_thread(Env.load, env_dir, pool=pool)
    except SynthError as exc:
        return AgentFindings(errors=[f"the reward agents could not load the env: {clip(str(exc), 300)}"])
    if not probes:  # the first round runs before the gates: the judge still sees the probes' rewards
        from synth_validators import probes as probe_gate

        try:
            gate = await asyncio.to_thread(probe_gate.run, env_dir, env, threshold=settings.probe_threshold,
                                           margin=settings.probe_margin)
            probes = gate.details.get("probes", {})
        except SynthError:
            probes = {}
    try:
        result = await RewardAgents(draft, env, gateway, settings, probes=probes,
                                    case_numbers=book.numbers).run(paraphrase, solve, attack)
    finally:
        await asyncio.to_thread(env.close)
    book.mark(draft, result, paraphrase, solve, attack)
    return result
