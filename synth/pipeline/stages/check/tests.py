"""The check loop's testing agent: test cases for the tools, several tools per call.

Model calls: stage "check_tests", subject "<env_id>/<tool>+<tool>+...", one
per batch of tools sized to the stage's output budget (a batch whose answer is
cut off is asked again in two halves). For each tool the agent writes 1-3
tests (more are kept): optional setup calls (any tools) that reach the state the test needs,
then the call under test, with the expected outcome and database change. The
quotas are conditional: a tool with parameters needs a refusal test unless
the agent says why no schema-valid arguments should be refused (a search that
returns an empty list), and every tool needs a success test unless the agent
says why no call can succeed from this data even after setup calls.

Running a test (run_tests) happens in the sandbox: the setup calls and the
call under test on one fresh episode; the observation records the call's
result, the database change from the state after setup, and the rules of
rules.json the call broke.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from synth.artifacts import (Expectation, ToolCall, ToolSpec, ToolTest, ToolTestBatch, ToolTestSet)
from synth.errors import SynthError
from synth.folder.format import EnvDraft
from synth.folder.toolschema import schema_to_params
from synth.llm import Gateway
from synth.llm.budgets import asked_in_halves, pack, planned_tokens
from synth.pipeline.stages.calls import call_problems
from synth.pipeline.stages.envcontext import EnvContext, data_dump, tables_in_code, tool_source
from synth.runtime.schema_check import ArgumentError, ArgumentValidator
from synth.use.replay import BUG_KINDS, observe_call

STAGE = "check_tests"
MAX_TESTS = 3  # a success, a refusal and the edge that matters most (dated records, limits); more are kept
TOKENS_PER_TEST = 140  # output tokens of one drafted test
TEST_ROWS = 20  # rows per table shown to the testing agent: most tables whole (the data stage writes 8-15)


def tool_cost(tool: ToolSpec) -> int:
    return 60 + MAX_TESTS * TOKENS_PER_TEST


class TestingAgent:
    """Writes tests for tools, in batches that fit the output budget."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, draft: EnvDraft, db_bytes: bytes, gateway: Gateway, tables: list[str]):
        self.draft, self.db_bytes, self.gateway, self.tables = draft, db_bytes, gateway, tables
        self.context = EnvContext.of(draft)

    def batches(self, tools: list[ToolSpec]) -> list[list[ToolSpec]]:
        limit = planned_tokens(STAGE, self.gateway.settings.max_tokens)
        names = [t.name for t in tools]
        by_name = {t.name: t for t in tools}
        return [[by_name[n] for n in group] for group in pack(names, {n: tool_cost(by_name[n]) for n in names},
                                                                 limit)]

    async def propose(self, batch: list[ToolSpec]) -> list[ToolTest]:
        """Tests for every tool of `batch`; a cut-off answer is asked again in halves."""
        return await asked_in_halves(self._ask, batch)

    async def _ask(self, batch: list[ToolSpec]) -> list[ToolTest]:
        touched = sorted({t for tool in batch for t in tables_in_code(self.draft.tool_bodies.get(tool.name, ""),
                                                                       self.tables)})
        shown = [{"name": t.name, "read_only": t.read_only, "source": tool_source(self.draft, t.name),
                  "params": json.dumps(t.parameters), "has_params": bool(schema_to_params(t.parameters))}
                 for t in batch]
        messages = self.context.messages(STAGE, tools=shown, max_tests=MAX_TESTS,
                                         data_dump=data_dump(self.db_bytes, touched or None, rows=TEST_ROWS))
        answer = await self.gateway.structured(
            ToolTestBatch, messages, stage=STAGE, subject=f"{self.draft.env_id}/{'+'.join(t.name for t in batch)}",
            check=lambda a: self.problems(a, batch), grow=len(batch) == 1)
        return to_tests(answer, batch)

    def problems(self, answer: ToolTestBatch, batch: list[ToolSpec]) -> list[str]:
        """What is wrong with a batch answer ([] when usable); the gateway feeds it back."""
        asked = {t.name: t for t in batch}
        given = [s.tool for s in answer.tools]
        problems = [f"no tests for {n!r}; give an entry for every tool asked" for n in asked if n not in given]
        problems += [f"{n!r} was not asked for; use the exact tool names" for n in given if n not in asked]
        problems += [f"{n!r} has more than one entry" for n in sorted({n for n in given if given.count(n) > 1})]
        for tests in answer.tools:
            if tests.tool in asked:
                problems += [f"{tests.tool}: {p}" for p in self._set_problems(tests, asked[tests.tool])]
        return problems

    def _set_problems(self, tests: ToolTestSet, tool: ToolSpec) -> list[str]:
        problems = []
        if not tests.tests:  # more than asked for is fine: an extra test costs little and may find a bug
            problems.append(f"write 1 to {MAX_TESTS} tests for this tool")
        validator = ArgumentValidator(tool.name, tool.parameters)
        tools = {t.name: t for t in self.draft.tools}
        for i, test in enumerate(tests.tests, 1):
            try:
                validator(test.arguments)
            except ArgumentError as exc:
                problems.append(f"test {i}: {exc}")
            problems += [f"test {i}: {p}" for _, p in call_problems(test.setup, tools, "setup call")]
            unknown = sorted(set(test.changed_tables) - set(self.tables))
            if unknown:
                problems.append(f"test {i}: changed_tables names unknown tables {unknown}")
            if tool.read_only and test.changed_tables:
                problems.append(f"test {i}: {tool.name} is read-only, so changed_tables must be []")
        if tests.tests and not any(t.expect == "success" for t in tests.tests) and not tests.no_success_path.strip():
            problems.append("add a success test (with setup calls if the initial data cannot support one), or say "
                            "in no_success_path why no call can succeed from this data")
        if (tests.tests and schema_to_params(tool.parameters) and not any(t.expect == "error" for t in tests.tests)
                and not tests.no_refusal_path.strip()):
            problems.append("add a refusal test (expect 'error') with well-formed but wrong values, or say in "
                            "no_refusal_path why no schema-valid arguments should be refused")
        return problems


def to_tests(answer: ToolTestBatch, batch: list[ToolSpec]) -> list[ToolTest]:
    asked = {t.name for t in batch}
    out = []
    for tests in answer.tools:
        if tests.tool not in asked:
            continue
        for i, t in enumerate(tests.tests, 1):
            out.append(ToolTest(
                test_id=f"{tests.tool}.{i}", tool=tests.tool, arguments=t.arguments, purpose=t.purpose,
                setup=[ToolCall(tool=s.tool, arguments=s.arguments) for s in t.setup],
                expectation=Expectation(outcome=t.expect, error=t.expected_error, change=t.expected_change,
                                        tables=t.changed_tables)))
    return out


def run_tests(env_dir: Path, tests: list[ToolTest], *, pool: Any, volatile: list[str], rules: Any) -> str | None:
    """Observe every test in the sandbox and give the verdicts that need no model; returns why
    the env could not load, if it did not. A crash, or a broken rule (an invariant that stopped
    holding, a status change its rules forbid), is a fail whatever the test expected; a test
    whose setup calls failed says nothing about the tool (test_wrong)."""
    from synth.runtime import Env

    try:
        env = Env.load(env_dir, pool=pool)
    except SynthError as exc:
        return str(exc)
    try:
        for test in tests:
            test.observed = observe_call(env, test.tool, test.arguments, volatile, setup=test.setup, rules=rules)
            test.verdict, test.reason = automatic_verdict(test)
    finally:
        env.close()
    return None


def automatic_verdict(test: ToolTest) -> tuple[str | None, str]:
    """The verdict an observation decides by itself ((None, "") when the checking agent must judge)."""
    o = test.observed
    if o is None:
        return None, ""
    if o.kind in BUG_KINDS:
        return "fail", f"the tool crashed ({o.kind}): {o.error}"
    if o.broken:
        return "fail", "the call broke the application's rules: " + "; ".join(o.broken)
    if o.kind == "setup_failed":
        return "test_wrong", f"the test's setup did not run, so it says nothing about the tool: {o.error}"
    if test.expectation.outcome == "error" and o.kind == "tool_error" and not o.diff:
        return "pass", f"refused as the test expected, changing nothing: {o.error}"
    return None, ""
