"""The reward agents on a sample of each template's instances.

The check loop's agents (stages/check/rewards.py: paraphrases of read answers, an independent
solver, a red team, and the checking agent on what needs judgement) play the sampled instances on
the env loaded with them. The red team sees the template's verifier with the instance's bindings as
`params`, the code that grades the instance. What they find about an instance is evidence against
its template's verifier; every case they record stays in verifier_tests.jsonl for the instance it
was found on, replayed by the reward_cases gate like any task's.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from synth.artifacts import Task, TaskTemplate
from synth.config import Settings
from synth.folder.format import EnvDraft
from synth.llm import Gateway
from synth.pipeline.stages.check.rewards import AgentFindings, RewardAgents
from synth.pipeline.tasks.instances import standalone_body


def sample(instances: list[Task], size: int) -> list[Task]:
    """The first `size` instances by task id: the same ones whatever else the run decides, so a
    recording (the offline demo) and a rerun ask the agents about the same tasks."""
    return sorted(instances, key=lambda t: t.task_id)[:size]


async def check_samples(draft: EnvDraft, env_dir: Path, templates: dict[str, TaskTemplate], tasks: list[Task],
                        gateway: Gateway, settings: Settings, pool: Any,
                        probes: dict[str, list[dict[str, Any]]]) -> AgentFindings:
    """The agents' findings on `tasks` (instances present in the folder at env_dir)."""
    from synth.runtime import Env

    bodies = {t.task_id: standalone_body(templates[t.template_id], t.bindings or {}) for t in tasks}
    view = draft.model_copy(update={"tasks": tasks, "verifier_bodies": bodies, "verifier_tests": []})
    env = await asyncio.to_thread(Env.load, env_dir, pool=pool)
    try:
        agents = RewardAgents(view, env, gateway, settings, probes=probes, case_numbers={})
        reads = [t for t in tasks if t.kind == "read" and t.expected_answer]
        return await agents.run(reads, tasks, tasks)
    finally:
        await asyncio.to_thread(env.close)
