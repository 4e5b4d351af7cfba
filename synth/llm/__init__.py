"""The model gateway: every model call in synth goes through `Gateway`."""

from synth.llm.errors import BudgetExceeded, ModelError, OutputTruncated, ReplayMiss, StructuredOutputError
from synth.llm.gateway import Gateway
from synth.llm.types import Completion, ModelSpec, parse_model

__all__ = [
    "BudgetExceeded", "Completion", "Gateway", "ModelError", "ModelSpec", "OutputTruncated", "ReplayMiss",
    "StructuredOutputError", "parse_model",
]
