"""The model gateway: every model call in synth goes through `Gateway`."""

from synth.llm.errors import (BudgetExceeded, ModelError, OutputTruncated, ReplayMiss, RunHalted,
                              StructuredOutputError)
from synth.llm.gateway import Gateway
from synth.llm.types import Completion, ModelSpec, parse_model

__all__ = [
    "BudgetExceeded", "Completion", "Gateway", "ModelError", "ModelSpec", "OutputTruncated", "ReplayMiss", "RunHalted",
    "StructuredOutputError", "parse_model",
]
