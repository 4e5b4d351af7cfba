"""Scripted reward agents for the library env (envkit.py): a paraphraser, a solver that plays each
task's gold calls (with answers a test chooses), a red team with attempts a test chooses, and a
checking agent with verdicts a test chooses. Handlers read the request the way a model would
(the task ids it lists), never the exact prompt wording."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from envkit import GOLD_ANSWERS, TASKS

from synth.llm.script import Reply, RequestInfo, Script

GOLD = {t.task_id: t for t in TASKS}
PARAPHRASES = {
    "task_01": ["Two copies.", "2", "You can borrow 2 copies right now.", "There are two copies on the shelf.",
                "2 copies are available to borrow.", "Right now 2 copies can be checked out.",
                "Two of them are in.", "2 copies (the third is out on loan).", "You can take out two copies today.",
                "Available now: 2"],
}


def _ids(info: RequestInfo) -> list[str]:
    return info.subject.split("/", 1)[1].split("+")


def _sections(info: RequestInfo) -> list[str]:
    """The task ids a request lists as `## <id>` headings (the open ones, for the solver)."""
    return re.findall(r"^## (task_\d+)", info.messages[-1]["content"], re.M)


def solver(answers: dict[str, str] | None = None, calls: dict[str, list[dict[str, Any]]] | None = None):
    """Plays each open task's gold calls (or `calls[task_id]`) and answers in the same turn."""
    answers = {**GOLD_ANSWERS, **(answers or {})}

    def handle(info: RequestInfo) -> Reply:
        steps = []
        for task_id in _sections(info):
            played = (calls or {}).get(task_id)
            if played is None:
                played = [{"tool": c.tool, "arguments": dict(c.arguments)} for c in GOLD[task_id].gold]
            steps.append({"task_id": task_id, "calls": played, "answer": answers[task_id]})
        return Reply(json={"tasks": steps})

    return handle


def red_team(attempts: dict[str, list[dict[str, Any]]] | None = None):
    """The given attempts per task; a bare claim of success for the others."""
    def handle(info: RequestInfo) -> Reply:
        return Reply(json={"tasks": [{"task_id": i, "attempts": (attempts or {}).get(i) or [
            {"idea": "claim the work is done without doing it", "calls": [], "answer": "Done, all taken care of."}]}
            for i in _ids(info)]})

    return handle


def paraphraser(info: RequestInfo) -> Reply:
    return Reply(json={"tasks": [{"task_id": i, "paraphrases": PARAPHRASES[i]} for i in _ids(info)]})


def judge(verdict_of: Callable[[str, str], tuple[str, str]]):
    """verdict_of(question, item text) -> (verdict, reason) for each item of a reward_judge request."""
    def handle(info: RequestInfo) -> Reply:
        text = info.messages[-1]["content"]
        verdicts = []
        for block in re.split(r"\n## ", text)[1:]:
            item_id = block.split(":", 1)[0].strip()
            question = re.search(r'question "(\w+)"', block).group(1)
            verdict, reason = verdict_of(question, block)
            verdicts.append({"item_id": item_id, "verdict": verdict, "reason": reason,
                             "clarified_instruction": ""})
        return Reply(json={"verdicts": verdicts})

    return handle


def script_agents(script: Script, *, solve=None, attack=None, verdicts=None, env: str = "city_library") -> Script:
    script.add("paraphrase", f"{env}/*", handler=paraphraser)
    script.add("solve", f"{env}/*", handler=solve or solver())
    script.add("red_team", f"{env}/*", handler=attack or red_team())
    script.add("reward_judge", f"{env}/*", handler=verdicts or judge(lambda q, b: ("correct", "states the facts")))
    return script
