"""The check loop's repairs, each recorded with its evidence and the code before and after.

Model calls: stage "check_repair", subject "<env_id>/<tool>": a corrected
body for one tool the tests or the gates blame (a judge's "fail", a crash, a
broken invariant or status rule, a regression). Verifier repairs go through
the gold stage (stages/check/gold.py) and are recorded here too. Each repair becomes
a RepairRecord in report.json (check_loop.rounds[i].repairs): kind, name,
diagnosis, the function before and after, the evidence and the failing tests.
"""

from __future__ import annotations

from synth.artifacts import RepairRecord, ToolRepair, ToolTest
from synth.folder.format import EnvDraft, normalize_body, render_verifiers_py, verifier_name
from synth.llm import Gateway
from synth.pipeline.stages.check.judge import describe_diff, describe_expectation, describe_observation
from synth.pipeline.stages.envcontext import EnvContext, imports_line, tool_source
from synth.pipeline.stages.repair import clip, problem_list
from synth.pipeline.stages.build.tool_probe import body_problems

STAGE = "check_repair"
MAX_TESTS_SHOWN = 6


def failing_test_text(test: ToolTest) -> str:
    """A failing test in full: the result is already cut by items and the change by rows, each
    saying what it left out, so nothing a repair depends on is cut mid-value."""
    setup = "; ".join(f"{c.tool}({c.arguments})" for c in test.setup)
    return (f"test {test.test_id} ({test.purpose}) " + (f"after setup calls {setup}, " if setup else "")
            + f"called {test.tool}({test.arguments}); expected {describe_expectation(test.expectation)}; got "
            f"{describe_observation(test)}; database change: "
            f"{describe_diff(test.observed.diff if test.observed else {})}; verdict: {test.reason}")


async def repair_tool(draft: EnvDraft, gateway: Gateway, name: str, evidence: list[str], failing: list[ToolTest],
                      earlier: list[str]) -> RepairRecord:
    """Ask for a corrected body of tool `name`; set it on `draft` and return the record of the repair.
    `earlier` holds the diagnoses of this tool's earlier repairs (a new sample index per attempt,
    so an identical prompt cannot get the cached, failed fix back)."""
    before = tool_source(draft, name)
    messages = EnvContext.of(draft).messages(
        STAGE, tool=next(t for t in draft.tools if t.name == name), tool_src=before,
        problems=problem_list([failing_test_text(t) for t in failing[:MAX_TESTS_SHOWN]] + evidence),
        earlier=earlier, imports=imports_line())
    answer = await gateway.structured(ToolRepair, messages, stage=STAGE, subject=f"{draft.env_id}/{name}",
                                      check=lambda a: body_problems(name, a.body), sample=len(earlier))
    earlier.append(clip(answer.diagnosis, 300))
    draft.tool_bodies[name] = normalize_body(answer.body)
    return RepairRecord(kind="tool", name=name, diagnosis=answer.diagnosis.strip(), before=before,
                        after=tool_source(draft, name), evidence=list(evidence),
                        tests=[t.model_dump(mode="json") for t in failing])


def verifier_source(draft: EnvDraft, task_id: str) -> str:
    """The rendered verifier function of one task, with its gold actions as a comment ('' if none)."""
    task = next((t for t in draft.tasks if t.task_id == task_id), None)
    body = draft.verifier_bodies.get(task_id)
    if task is None or body is None:
        return ""
    module = render_verifiers_py(draft.env_id, draft.title, [task], {task_id: body})
    function = module[module.index(f"def {verifier_name(task)}("):].rstrip() + "\n"
    gold = "\n".join(f"#   {c.tool}({c.arguments})" for c in task.gold)
    answer = f"# expected answer: {task.expected_answer!r}\n" if task.expected_answer is not None else ""
    return f"# gold actions:\n{gold}\n{answer}{function}"


def verifier_record(before: EnvDraft, after: EnvDraft, task_id: str, evidence: list[str],
                    diagnosis: str) -> RepairRecord:
    return RepairRecord(kind="verifier", name=task_id, diagnosis=diagnosis, before=verifier_source(before, task_id),
                        after=verifier_source(after, task_id), evidence=list(evidence))
