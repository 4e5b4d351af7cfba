"""The check loop's checking agent: verdicts on the tools' tests, several tools per call.

Model calls: stage "check_judge", subject "<env_id>/<tool>+<tool>+...", made
through the judge gateway (`--judge-model`, default the generating model).
The agent sees each tool's code, the test's setup calls, arguments and
expectation, and what happened: the complete result (or a preview cut by
items that says what it left out) and the exact database change. It tells
the tool's fault from the test's: "pass" (right, as expected), "test_wrong"
(the tool is right, the expectation was wrong) and "fail" (the tool is wrong,
minor flaws included). Only "fail" sends the tool to repair, and a tool
still failing at the end blocks verification: nothing ships as a warning.
"""

from __future__ import annotations

from typing import Any

from synth.artifacts import Expectation, ToolJudgement, ToolTest
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.llm.budgets import output_budget, pack
from synth.llm.errors import OutputTruncated
from synth.pipeline.stages.envcontext import EnvContext, tool_source
from synth.use.replay import canonical

STAGE = "check_judge"
TOKENS_PER_VERDICT = 90
MAX_DIFF_ROWS = 6  # rows per table and kind shown in a database change
MAX_TOOLS_PER_CALL = 8  # a judge call stays small enough to read carefully (3 tests a tool, refusals judged by code)


def describe_expectation(e: Expectation) -> str:
    if e.outcome == "error":
        return f"refused with an error ({e.error or 'any message'}); no database change"
    tables = f" (tables: {', '.join(e.tables)})" if e.tables else ""
    return f"success; database change: {e.change or 'none'}{tables}"


def describe_observation(test: ToolTest) -> str:
    o = test.observed
    if o is None:
        return "not run"
    if o.ok:
        return "returned " + canonical(o.result)
    if o.kind == "tool_error":
        return f"refused with ToolError: {o.error}"
    return f"FAILED ({o.kind}): {o.error}"


def describe_diff(diff: dict[str, Any], rows: int = MAX_DIFF_ROWS) -> str:
    """A database change per table, whole rows, at most `rows` per kind with a note of the rest."""
    if not diff:
        return "none"
    lines = []
    for table, change in diff.items():
        for kind in ("added", "removed", "changed"):
            items = change.get(kind) or []
            for item in items[:rows]:
                lines.append(f"{table} {kind}: {canonical(item)}")
            if len(items) > rows:
                lines.append(f"{table}: {len(items) - rows} more {kind} rows not shown (of {len(items)})")
    return "\n".join(lines)


def describe_calls(calls: list[Any]) -> str:
    return "; ".join(f"{c.tool}({canonical(c.arguments)})" for c in calls) or "none"


def shown_test(test: ToolTest) -> dict[str, str]:
    return {"test_id": test.test_id, "purpose": test.purpose, "setup": describe_calls(test.setup),
            "arguments": canonical(test.arguments), "expected": describe_expectation(test.expectation),
            "observed": describe_observation(test),
            "diff": describe_diff(test.observed.diff if test.observed else {})}


class CheckingAgent:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway
        # tool -> [(test_id, sentence)]: rules a tool enforces that its description does not state
        self.description_fixes: dict[str, list[tuple[str, str]]] = {}

    @property
    def model(self) -> str:
        return self.gateway.model

    def batches(self, unjudged: dict[str, list[ToolTest]]) -> list[list[str]]:
        limit = output_budget(STAGE, self.gateway.settings.max_tokens) // 2
        names = list(unjudged)
        groups = pack(names, {n: 40 + TOKENS_PER_VERDICT * len(unjudged[n]) for n in names}, limit)
        return [g[i:i + MAX_TOOLS_PER_CALL] for g in groups for i in range(0, len(g), MAX_TOOLS_PER_CALL)]

    async def judge(self, draft: EnvDraft, names: list[str], unjudged: dict[str, list[ToolTest]]) -> None:
        """Verdicts for the tests of `names`, set on the tests; a cut-off answer is asked in halves."""
        try:
            await self._ask(draft, names, unjudged)
        except OutputTruncated:
            if len(names) == 1:
                raise
            mid = len(names) // 2
            await self.judge(draft, names[:mid], unjudged)
            await self.judge(draft, names[mid:], unjudged)

    async def _ask(self, draft: EnvDraft, names: list[str], unjudged: dict[str, list[ToolTest]]) -> None:
        tests = [t for n in names for t in unjudged[n]]
        ids = [t.test_id for t in tests]

        def check(answer: ToolJudgement) -> list[str]:
            # A verdict on a test not asked about is ignored, not refused: it costs nothing to drop.
            given = [v.test_id for v in answer.verdicts if v.test_id in ids]
            problems = [f"no verdict for test {i}" for i in ids if i not in given]
            problems += [f"test {i} is judged more than once" for i in sorted({i for i in given if given.count(i) > 1})]
            return problems

        tools = [{"tool": next(t for t in draft.tools if t.name == n), "source": tool_source(draft, n),
                  "tests": [shown_test(t) for t in unjudged[n]]} for n in names]
        context = EnvContext.of(draft)
        answer = await self.gateway.structured(ToolJudgement, context.messages(STAGE, tools=tools), stage=STAGE,
                                               subject=f"{draft.env_id}/{'+'.join(names)}", check=check,
                                               grow=len(names) == 1)
        verdicts = {v.test_id: v for v in answer.verdicts}
        for test in tests:
            verdict = verdicts[test.test_id]
            test.verdict, test.reason = verdict.verdict, verdict.reason
            fix = " ".join(verdict.description_fix.split())
            if fix and verdict.verdict != "fail":
                self.description_fixes.setdefault(test.tool, []).append((test.test_id, fix))
