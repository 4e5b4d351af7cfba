"""Stage `tasks`: the requests real users of the application would make.

Model calls: stage "tasks", subject = the scenario's env_id. The answer is a
TaskBatch; its shape problems (too few tasks, no mix of read and write, a
missing difficulty, account-plumbing tasks (stages/build/plumbing.py), duplicates) are fed back through
the gateway's repair turns. Tasks come first because the schema, the data and
the tools are all generated to make them possible.
"""

from __future__ import annotations

import datetime

from synth.artifacts import Scenario, Task, TaskBatch
from synth.folder.format import DEFAULT_TODAY
from synth.llm import Gateway
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.build.plumbing import task_plumbing
from synth.pipeline.stages.repair import StageReport

STAGE = "tasks"
TASKS_ASKED = 12  # the prompt asks for this many; MIN_TASKS must survive
MIN_TASKS = 10
MIN_PER_KIND = 3  # read-only and state-changing tasks each
TEST_EVERY = 5  # every 5th task goes to the test split
# The application's "today", shared by every prompt so dates in tasks, data and tools agree
# (and tools never read the real clock, which would make rewards vary from run to run).
TODAY = datetime.date.fromisoformat(DEFAULT_TODAY)
REFERENCE_DATE = f"{TODAY.isoformat()} ({TODAY:%A})"


def task_problems(batch: TaskBatch) -> list[str]:
    """Problems of a task batch ([] when usable); the gateway feeds them back."""
    tasks = batch.tasks
    problems = []
    if len(tasks) < MIN_TASKS:
        problems.append(f"there are {len(tasks)} tasks; write at least {MIN_TASKS} (aim for {TASKS_ASKED})")
    for kind, label in (("read", "read-only"), ("write", "state-changing")):
        n = sum(t.kind == kind for t in tasks)
        if n < MIN_PER_KIND:
            problems.append(f"only {n} {label} tasks (kind '{kind}'); include at least {MIN_PER_KIND}")
    for level in ("easy", "medium", "hard"):
        if not any(t.difficulty == level for t in tasks):
            problems.append(f"no '{level}' task; include every difficulty (easy 1-2 tool calls, medium 3-5, hard 6+)")
    seen: set[str] = set()
    for i, t in enumerate(tasks, 1):
        text = " ".join(t.instruction.split())
        if len(text) < 20:
            problems.append(f"task {i} is too short to be a real request: {text!r}")
        why = task_plumbing(text)
        if why:
            problems.append(f"task {i} looks like account plumbing: {why}; the user is already signed in. Replace "
                            "it with a task about the application's own data (if it is one, say which record it "
                            "works on, e.g. 'the wine class session' rather than 'my session')")
        key = text.lower()
        if key in seen:
            problems.append(f"task {i} repeats an earlier task word for word")
        seen.add(key)
    return problems


def to_tasks(batch: TaskBatch) -> list[Task]:
    """Number the drafts task_01, task_02, ... and put every TEST_EVERY-th in the test split."""
    width = max(2, len(str(len(batch.tasks))))
    return [
        Task(task_id=f"task_{i:0{width}d}", instruction=" ".join(d.instruction.split()), kind=d.kind,
             difficulty=d.difficulty, split="test" if i % TEST_EVERY == 0 else "train")
        for i, d in enumerate(batch.tasks, 1)
    ]


async def generate_tasks(
    scenario: Scenario, gateway: Gateway, *, report: StageReport | None = None, sample: int = 0
) -> list[Task]:
    """Ask for the scenario's tasks; raises synth.llm.StructuredOutputError when the answer stays unusable."""
    report = report if report is not None else StageReport()

    messages = render_prompt("tasks", scenario=scenario, n_tasks=TASKS_ASKED, min_per_kind=MIN_PER_KIND,
                             today=REFERENCE_DATE)
    batch = await gateway.structured(TaskBatch, messages, stage=STAGE, subject=scenario.env_id,
                                     check=report.counting(task_problems),
                                     sample=sample)
    report.passed = True
    report.repairs = max(0, report.rounds - 1)
    return to_tasks(batch)
