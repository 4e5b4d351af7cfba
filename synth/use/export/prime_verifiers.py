"""verifiers export: an installable environment package for Prime Intellect's
verifiers library (0.4 API, `verifiers.v1`).

The package exports one Taskset (every task of the exported envs, bundled as
tasks.jsonl), its Task type with a reward that asks `synth serve` for the
verifier's rubric score, a per-rollout Toolset that proxies one synth episode
over REST and advertises its tools over MCP, a tool-calling chat harness, and
`load_environment(...)`. The distribution name is the taskset id verifiers
resolves (`--env.taskset.id synth-envs` imports module `synth_envs`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from synth import __version__
from synth.atomic import write_atomic
from synth.errors import InputError
from synth.pipeline.prompts import render_template
from synth.use.agent import agent_messages
from synth.use.export.source import load_envs, skipped_note

NAME_RE = re.compile(r"^[a-z][a-z0-9]*([-_][a-z0-9]+)*$")
_FILES = {"__init__.py": "__init__.py.j2", "common.py": "common.py.j2", "taskset.py": "taskset.py.j2",
          "toolset.py": "toolset.py.j2"}


def export_verifiers(root: Path | str, out: Path | str, *, name: str = "synth-envs",
                     server_url: str = "http://127.0.0.1:8000", include_rejected: bool = False,
                     reward: str = "rubric", pass_rate: tuple[float, float] | None = None) -> str:
    if not NAME_RE.match(name):
        raise InputError(f"--name {name!r} must be lower-case letters, digits and single - or _ (e.g. synth-envs)")
    module = name.replace("-", "_")
    envs, skipped = load_envs(root, include_rejected=include_rejected, pass_rate=pass_rate)
    rows = []
    for env in envs:
        context = env.context
        for task in sorted(env.tasks, key=lambda t: t.task_id):
            system, user = agent_messages(context, task.instruction)
            rows.append({"env_id": env.id, "task_id": task.task_id, "split": task.split,
                         "instruction": user["content"], "system_prompt": system["content"],
                         "probes": env.probe_rewards(task.task_id), "template_id": task.template_id,
                         "calibration": env.calibrated(task.task_id)})
    if not rows:
        raise InputError(f"the envs under {root} have no tasks to export")
    out = Path(out)
    package = out / module
    package.mkdir(parents=True, exist_ok=True)
    context = {"dist_name": name, "module": module, "taskset_id": name, "server_url": server_url,
               "synth_version": __version__, "version": __version__, "n_envs": len(envs), "n_tasks": len(rows),
               "env_ids": [e.id for e in envs], "reward_kind": reward}
    for target, template in _FILES.items():
        write_atomic(package / target, render_template("export", f"verifiers/{template}", **context))
    write_atomic(package / "tasks.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    write_atomic(out / "pyproject.toml", render_template("export", "verifiers/pyproject.toml.j2", **context))
    write_atomic(out / "README.md", render_template("export", "verifiers/README.md.j2", **context))
    note = skipped_note(skipped)
    return (f"verifiers: package {name} (module {module}) with {len(rows)} task(s) from {len(envs)} env(s) in {out}; "
            f"install it with `pip install {out}`{note}")
