"""Gate `robust`: verifiers never raise, and tools keep the business rules, whatever
state the agent leaves behind.

Each task's verifier is evaluated (with no answer, an empty one, a junk one and
the expected one) on: the initial state, every prefix of the gold solution, and
the end of WALKS seeded random walks of STEPS valid tool calls (arguments drawn
from the initial data, see fuzz.py). Any verifier error (an exception, a
timeout, a malformed result) fails the gate naming the task and the state.
After every state-changing call of those gold prefixes and walks, the rules of
rules.json are checked: a call that breaks an invariant that held before it,
or makes a status change its column does not allow, fails the gate naming the tool.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, Rules, Task, ToolCall
from synth.errors import SynthError
from synth.folder.rules import check_invariants, rules_after_call
from synth.use.replay import answer_text, canonical

from .common import EnvFolder, Findings, map_tasks, run_with_env
from .fuzz import ValuePool, random_call

NAME = "robust"
WALKS = 2  # random walks per task
STEPS = 6  # tool calls per walk
SEED = 1234
WRITE_BIAS = 0.7  # share of random calls that go to state-changing tools (they make new states)
JUNK_ANSWER = "I could not complete this request."


def _answers(task: Task) -> list[str | None]:
    return [None, "", JUNK_ANSWER, answer_text(task.expected_answer)]


def _evaluate(problems: list[str], episode: Any, state: str, answers: list[str | None]) -> bool:
    for answer in answers:
        reward = episode.evaluate(answer, state=False)
        if reward.error:
            problems.append(f"the verifier failed on {state} with answer {answer!r:.40}: {reward.error}")
            return False
    return True


class RuleWatch:
    """Checks rules.json after each state-changing call of one task's episodes; keeps the first call that
    breaks a rule per tool (`broken`: tool -> problem)."""

    def __init__(self, rules: Rules | None, env: Any, initially: set[str]):
        self.rules, self.env, self.initially = rules, env, initially
        self.writes = {t.name for t in env.tools if not t.read_only}
        self.broken: dict[str, str] = {}

    @classmethod
    def initial(cls, rules: Rules | None, env: Any) -> set[str]:
        """The invariants already broken by the initial data (a call is not blamed for them)."""
        return {v.name for v in check_invariants(env.initial_db, rules.invariants)} if rules else set()

    def start(self) -> None:
        self.state = self.env.initial_db

    def after(self, episode: Any, call: ToolCall, observation: dict, where: str) -> bool:
        """False once the call broke a rule (reported against its tool)."""
        if self.rules is None or call.tool not in self.writes or not observation.get("ok"):
            return True
        try:
            now = episode.snapshot()
        except SynthError:
            return True  # the worker died: solvable/deterministic report the call
        broken = rules_after_call(self.state, now, self.rules, broken_before=self.initially)
        self.state = now
        if broken and call.tool not in self.broken:
            self.broken[call.tool] = f"{where}, {call.tool}({canonical(call.arguments)[:120]}) broke the rules: " \
                + "; ".join(broken)[:600]
        return not broken


def task_findings(env: Any, env_id: str, task: Task, rules: Rules | None, initially: set[str],
                  pool: ValuePool) -> tuple[list[str], dict[str, str]]:
    """One task's verifier problems, and the rules its gold solution's calls or the random walks' calls
    broke, by tool. The walks are seeded per env and task, so a rerun explores exactly the same states."""
    writes = [t for t in env.tools if not t.read_only]
    reads = [t for t in env.tools if t.read_only]
    watch = RuleWatch(rules, env, initially)
    problems: list[str] = []
    answers = _answers(task)
    with env.episode(task.task_id) as episode:
        if not _evaluate(problems, episode, "the initial state", answers):
            return problems, watch.broken
        watch.start()
        for i, call in enumerate(task.gold, 1):
            observation = episode.call(call.tool, call.arguments)
            watch.after(episode, call, observation, f"replaying {task.task_id}'s gold solution")
            if not _evaluate(problems, episode, f"the state after gold call {i} ({call.tool})", [None]):
                break
    rng = random.Random(zlib.crc32(f"{SEED}:{env_id}:{task.task_id}".encode()))
    for walk in range(WALKS):
        calls = []
        with env.episode(task.task_id) as episode:
            watch.start()
            for _ in range(STEPS):
                tools = writes if writes and (not reads or rng.random() < WRITE_BIAS) else reads
                if not tools:
                    break
                call = random_call(rng, tools, pool)
                calls.append(call)
                observation = episode.call(call.tool, call.arguments)
                if not watch.after(episode, call, observation, "in a random walk"):
                    break
            state = "the state after random calls " + "; ".join(
                f"{c.tool}({canonical(c.arguments)[:80]})" for c in calls)
            if not _evaluate(problems, episode, state, answers):
                break
    return problems, watch.broken


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    pool = ValuePool(env.initial_db)
    initially = RuleWatch.initial(folder.rules, env)
    results = map_tasks(lambda t: task_findings(env, folder.env_id, t, folder.rules, initially, pool), folder.tasks)
    blamed: set[str] = set()
    for task, (problems, broken) in zip(folder.tasks, results):
        for problem in problems:
            found.task(task.task_id, problem)
        for tool, problem in broken.items():
            if tool not in blamed:  # a tool's first broken rule, in task order
                blamed.add(tool)
                found.tool(tool, problem)


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check, walks=WALKS, steps=STEPS, seed=SEED)
