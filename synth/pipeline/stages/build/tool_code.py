"""Stage `tool_code`: the body of every tool function, validated by execution.

Model calls: stage "tool_code", subject = the env_id when one request holds
every tool, else "<env_id>/<tool>+<tool>+...", for the first bodies (in
batches of tools sized to the stage's output budget; a batch whose answer is
cut off anyway is asked again in two halves, never parsed; a reply may carry
bodies for more tools than asked, and those are kept) and for every repair
round (only the failing functions are asked for again, subject
"<env_id>/<tool>+...").

The model writes bodies only; tools.py is rendered around them from the
template. Each round checks every body statically (syntax, sandbox rules),
loads the module in a sandbox worker and calls each tool once with plausible
arguments (see tool_probe); up to settings.build_repair_rounds repair calls
show the model the failing call, the message and the traceback.
"""

from __future__ import annotations

import asyncio
from typing import Any

from synth.artifacts import Scenario, Task, ToolCodeAnswer, ToolSpec
from synth.folder.format import TOOL_IMPORTS, EnvDraft, normalize_body
from synth.folder.toolschema import PY_TYPES, schema_to_params
from synth.llm import Gateway
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.envcontext import EnvContext, sample_rows
from synth.pipeline.stages.repair import StageFailed, StageReport, clip, in_parallel
from synth.pipeline.stages.build.tool_probe import probe_tools

STAGE = "tool_code"
SAMPLE_ROWS = 3  # rows per table shown to the model, so it sees real value formats


def body_tokens(tool: ToolSpec) -> int:
    """Output tokens one body is expected to take: writes validate and update more than reads."""
    return 180 + 25 * len(schema_to_params(tool.parameters)) + (0 if tool.read_only else 200)


def signature(tool: ToolSpec) -> str:
    """The def line tools.py will have, as the model should picture it."""
    params = schema_to_params(tool.parameters)
    parts = [f"{p.name}: {PY_TYPES[p.type]}" for p in params if p.required]
    parts += [f"{p.name}: {PY_TYPES[p.type]} | None = None" for p in params if not p.required]
    return f"def {tool.name}(db: sqlite3.Connection" + (", *, " + ", ".join(parts) if parts else "") + ") -> Any:"


def describe(tool: ToolSpec, body: str | None = None, problem: str | None = None) -> dict[str, Any]:
    params = [{"name": p.name, "type": p.type, "required": p.required, "enum": p.enum, "description": p.description}
              for p in schema_to_params(tool.parameters)]
    return {"name": tool.name, "signature": signature(tool), "description": tool.description,
            "read_only": tool.read_only, "params": params, "body": body, "problem": problem}


def answer_problems(answer: ToolCodeAnswer, asked: list[str], known: set[str]) -> list[str]:
    """Shape problems of a ToolCodeAnswer, fed back by the gateway's repair turns."""
    given = {f.name for f in answer.functions}
    problems = [f"no body for {n!r}; write a body for every requested function" for n in asked if n not in given]
    problems += [f"{f.name!r} is not one of the tools; use the exact tool names" for f in answer.functions
                 if f.name not in known]
    problems += [f"the body of {f.name!r} is empty" for f in answer.functions
                 if f.name in asked and not normalize_body(f.body)]
    return problems


class ToolCodeStage:
    """The bodies of one env's tools: generate, probe in the sandbox, repair the failing ones."""

    def __init__(self, draft: EnvDraft, db_bytes: bytes, gateway: Gateway, *, pool: Any, rounds: int,
                 report: StageReport, sample: int = 0, bodies: dict[str, str] | None = None):
        self.draft, self.db_bytes, self.gateway, self.pool = draft, db_bytes, gateway, pool
        self.rounds, self.report, self.sample = rounds, report, sample
        self.tools = {t.name: t for t in draft.tools}
        self.bodies = bodies if bodies is not None else {}  # filled in place: a failed build keeps them
        self.context = EnvContext.of(draft)
        self.samples = sample_rows(db_bytes, SAMPLE_ROWS)

    def _subject(self, names: list[str]) -> str:
        return self.draft.env_id if len(names) == len(self.tools) else f"{self.draft.env_id}/{'+'.join(names)}"

    async def _ask(self, prompt: str, asked: list[str], **extra: Any) -> None:
        answer = await self.gateway.structured(
            ToolCodeAnswer, self.context.messages(prompt, samples=self.samples, imports=TOOL_IMPORTS, **extra),
            stage=STAGE, subject=self._subject(asked), check=lambda a: answer_problems(a, asked, set(self.tools)),
            sample=self.sample, grow=len(asked) == 1,
        )
        for function in answer.functions:
            if function.name in asked or (function.name in self.tools and function.name not in self.bodies):
                self.bodies[function.name] = normalize_body(function.body)

    def _batches(self, names: list[str]) -> list[list[str]]:
        limit = planned_tokens(STAGE, self.gateway.settings.max_tokens)
        return pack(names, {n: body_tokens(self.tools[n]) for n in names}, limit)

    async def _new_batch(self, batch: list[str], whole: bool = False) -> None:
        batch = [n for n in batch if n not in self.bodies]  # an earlier reply may have brought them
        if batch:
            await self._ask("tool_code", batch, tools=[describe(self.tools[n]) for n in batch])

    _failures: dict[str, str] = {}

    async def _repair_batch(self, batch: list[str], whole: bool = False) -> None:
        failing = [describe(self.tools[n], self.bodies.get(n, ""), clip(self._failures[n], 2500)) for n in batch]
        await self._ask("tool_code_repair", batch, failing=failing)

    async def run(self) -> dict[str, str]:
        missing = [n for n in self.tools if n not in self.bodies]
        await in_parallel(self._batches(missing), self._new_batch, stage=STAGE, report=self.report, what="tool bodies")
        while True:
            self.report.rounds += 1
            draft = self.draft.model_copy(update={"tool_bodies": dict(self.bodies)})
            failures, probes = await asyncio.to_thread(probe_tools, draft, self.db_bytes, self.pool)
            self.report.details["probes"] = probes
            if not failures:
                self.report.passed = True
                return dict(self.bodies)
            problems = [f"{name}: {problem}" for name, problem in failures.items()]
            self.report.add_problems(problems)
            if self.report.repairs >= self.rounds:
                raise StageFailed(STAGE, problems, self.report)
            self.report.repairs += 1
            self._failures = failures
            await in_parallel(self._batches(list(failures)), self._repair_batch, stage=STAGE, report=self.report,
                            what="tool bodies")


async def generate_tool_code(
    draft: EnvDraft, db_bytes: bytes, gateway: Gateway, *, pool: Any, rounds: int, report: StageReport,
    sample: int = 0, bodies: dict[str, str] | None = None,
) -> dict[str, str]:
    """Bodies for every tool of `draft` that pass the sandbox probe; raises StageFailed when repairs run out.

    `bodies`, when given, is filled in place, so a caller still has the last bodies after a failure.
    """
    return await ToolCodeStage(draft, db_bytes, gateway, pool=pool, rounds=rounds, report=report,
                               sample=sample, bodies=bodies).run()


def tool_draft(scenario: Scenario, tasks: list[Task], schema_sql: str, data_sql: str,
               tools: list[ToolSpec], **env: Any) -> EnvDraft:
    """The EnvDraft the tool_code stage fills in (`env`: today, acting_user, rules)."""
    return EnvDraft(env_id=scenario.env_id, title=scenario.name, scenario=scenario, schema_sql=schema_sql,
                    data_sql=data_sql, tools=tools, tasks=tasks, **env)
