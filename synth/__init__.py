"""synth: synthesize verified tool-use environments for agent RL.

The public API; everything else may change. Names load lazily so that
`synth --version` does not import the model SDKs or the runtime.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Env": "synth.runtime", "Episode": "synth.runtime", "SandboxPool": "synth.runtime",
    "Settings": "synth.config", "load_settings": "synth.config",
    "Gateway": "synth.llm", "ModelError": "synth.llm", "BudgetExceeded": "synth.llm",
    "RunStore": "synth.pipeline.store",
    "Scenario": "synth.artifacts", "Seed": "synth.artifacts", "Task": "synth.artifacts", "Fact": "synth.artifacts",
    "ToolSpec": "synth.artifacts", "Reward": "synth.artifacts", "Check": "synth.artifacts",
    "generate_scenarios": "synth.pipeline.scenarios", "build_env": "synth.pipeline.build",
    "verify_env": "synth.pipeline.verify", "check_env": "synth.pipeline.verify",
    "run_pipeline": "synth.pipeline.runner", "SynthError": "synth.errors",
    "add_tasks": "synth.pipeline.tasks.step", "TaskTemplate": "synth.artifacts",
    "calibrate_async": "synth.use.calibrate",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'synth' has no attribute {name!r}")
