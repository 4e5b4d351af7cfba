"""The generate -> execute -> feed errors back loop shared by the build stages.

A build stage asks the model for an artifact, validates it by executing it
(DDL on an empty database, INSERTs with foreign keys on, tool bodies in the
sandbox) and, while problems remain and repair rounds are left, continues the
same conversation with a repair prompt that lists the concrete errors. The
StageReport of every stage ends up in the env's report.json.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from synth.errors import SynthError
from synth.llm import Gateway
from synth.llm.budgets import halves
from synth.llm.errors import OutputTruncated
from synth.pipeline.prompts import render_prompt

T = TypeVar("T", bound=BaseModel)

MAX_PROBLEMS_SHOWN = 20  # problems listed in one repair prompt
MAX_PROBLEM_CHARS = 4000  # one problem's text in a prompt (tracebacks are long; results are cut by items first)
MAX_ERRORS_KEPT = 60  # problems kept in a stage report


class StageReport(BaseModel):
    """What one build stage did: rounds run, repairs asked for, problems seen per round."""

    passed: bool = False
    rounds: int = 0
    repairs: int = 0
    errors: list[str] = Field(default_factory=list)  # "round N: problem"
    notes: list[str] = Field(default_factory=list)  # findings that are not failures
    details: dict[str, Any] = Field(default_factory=dict)  # stage-specific evidence (e.g. tool probes)

    def add_problems(self, problems: list[str]) -> None:
        room = MAX_ERRORS_KEPT - len(self.errors)
        if room > 0:
            self.errors += [f"round {self.rounds}: {clip(p)}" for p in problems[:room]]

    def counting(self, problems_of: Callable[[Any], list[str]]) -> Callable[[Any], list[str]]:
        """A gateway `check` that counts each answer as a round and keeps its problems here."""

        def check(answer: Any) -> list[str]:
            self.rounds += 1
            problems = problems_of(answer)
            self.add_problems(problems)
            return problems

        return check


class StageFailed(SynthError):
    """A stage still had problems after its last repair round; the env is failed."""

    def __init__(self, stage: str, problems: list[str], report: StageReport):
        self.stage = stage
        self.problems = problems
        self.report = report
        shown = "; ".join(clip(p, 200) for p in problems[:3])
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        super().__init__(f"{stage}: still failing after {report.repairs} repair round(s): {shown}{more}")


def clip(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """`text` within `limit` characters: cut at a word boundary (never inside a number or a name's
    word), saying how much was left out. Results and rows are cut by whole items before they get here."""
    text = str(text).strip()
    if len(text) <= limit:
        return text
    head = text[: max(limit // 2, limit - 40)]
    cut = max(head.rfind(" "), head.rfind("\n"))
    head = head[:cut] if cut > len(head) // 2 else head
    return head.rstrip(" ,;:") + f" ... ({len(text) - len(head)} more characters not shown)"


def problem_list(problems: list[str]) -> list[str]:
    """The problems a repair prompt shows: at most MAX_PROBLEMS_SHOWN, each clipped."""
    shown = [clip(p) for p in problems[:MAX_PROBLEMS_SHOWN]]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS_SHOWN} more problems of the same kinds")
    return shown


async def generate_until_valid(
    gateway: Gateway,
    answer_type: type[T],
    messages: list[dict[str, Any]],
    *,
    stage: str,
    subject: str,
    validate: Callable[[T], Awaitable[list[str]] | list[str]],
    repair_prompt: str,
    rounds: int,
    report: StageReport,
    sample: int = 0,
    check: Callable[[T], list[str]] | None = None,
    repair_context: dict[str, Any] | None = None,
    grow: bool = True,
) -> T:
    """Ask, validate by execution, and repair up to `rounds` times in one conversation.

    `check` runs inside the gateway (cheap shape checks, fixed by the gateway's
    own repair turns); `validate` is the execution check whose problems are fed
    back here with `repair_prompt`. Raises StageFailed when rounds run out, and the
    gateway's OutputTruncated when an answer is cut off (with `grow` False, at once).
    """
    convo = list(messages)
    while True:
        answer = await gateway.structured(answer_type, convo, stage=stage, subject=subject, check=check,
                                          sample=sample, grow=grow)
        report.rounds += 1
        found = validate(answer)
        problems = list(await found) if isinstance(found, Awaitable) else list(found)
        if not problems:
            report.passed = True
            return answer
        report.add_problems(problems)
        if report.repairs >= rounds:
            raise StageFailed(stage, problems, report)
        report.repairs += 1
        convo += [
            {"role": "assistant", "content": answer.model_dump_json()},
            *render_prompt(repair_prompt, problems=problem_list(problems), **(repair_context or {})),
        ]


async def in_pieces(groups: Sequence[list[Any]], ask: Callable[[list[Any], bool], Awaitable[None]], *, stage: str,
                    report: StageReport, what: str) -> list[list[Any]]:
    """Ask for each group of work in turn, `ask(group, whole)` (`whole`: this request covers all the
    work). A group whose answer is cut off at the output cap is asked again in two halves; a single
    item that still does not fit fails the stage. Returns the groups as they were answered."""
    queue = [list(g) for g in groups]
    done: list[list[Any]] = []
    while queue:
        group = queue.pop(0)
        try:
            await ask(group, not done and not queue)
        except OutputTruncated as exc:
            if len(group) == 1:
                raise StageFailed(stage, [f"the {what} of {group[0]} do not fit one answer: {exc}"], report) from exc
            report.notes.append(clip(f"the answer for {len(group)} {what} groups ({', '.join(map(str, group))}) was "
                                     "cut off at the output cap; asked again in two halves"))
            queue[:0] = halves(group)
            continue
        done.append(group)
    return done


async def in_parallel(groups: Sequence[list[Any]], ask: Callable[[list[Any], bool], Awaitable[None]], *, stage: str,
                      report: StageReport, what: str) -> list[list[Any]]:
    """`in_pieces` for independent groups (each answer stands alone, e.g. tool bodies): every group is
    asked at once (the gateway bounds how many are in flight), a cut-off answer in two halves."""
    async def one(group: list[Any], whole: bool) -> list[list[Any]]:
        try:
            await ask(group, whole)
        except OutputTruncated as exc:
            if len(group) == 1:
                raise StageFailed(stage, [f"the {what} of {group[0]} do not fit one answer: {exc}"], report) from exc
            report.notes.append(clip(f"the answer for {len(group)} {what} groups ({', '.join(map(str, group))}) was "
                                     "cut off at the output cap; asked again in two halves"))
            parts = await asyncio.gather(*(one(half, False) for half in halves(group)))
            return [g for part in parts for g in part]
        return [group]

    done = await asyncio.gather(*(one(list(g), len(groups) == 1) for g in groups))
    return [g for part in done for g in part]
