"""Runtime: load an env folder, run episodes, call tools in a sandbox, compute rewards.

Names are imported lazily so the sandbox worker (`python -m synth.runtime.worker`)
starts without loading pydantic and the rest of the parent-side machinery.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Env": "synth.runtime.env",
    "Episode": "synth.runtime.episode",
    "SandboxPool": "synth.runtime.sandbox",
    "SandboxError": "synth.runtime.sandbox",
    "EpisodeLost": "synth.runtime.sandbox",
    "EnvLoadError": "synth.runtime.sandbox",
    "LocalHost": "synth.runtime.local",
    "CodeRejected": "synth.runtime.codecheck",
    "check_source": "synth.runtime.codecheck",
    "ArgumentError": "synth.runtime.schema_check",
    "validate_arguments": "synth.runtime.schema_check",
    "default_pool": "synth.runtime.sandbox",
    "call_many": "synth.runtime.batch",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'synth.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
