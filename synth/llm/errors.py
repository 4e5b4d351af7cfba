"""Errors of the model gateway, classified so callers know what to do with them."""

from __future__ import annotations

from synth.errors import SynthError


class ModelError(SynthError):
    """A model call failed for good; the message is one line naming provider, model and cause."""


class RetryableError(Exception):
    """429, 5xx, connection errors and timeouts: worth another attempt after a pause."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class BudgetExceeded(ModelError):
    """The --max-cost budget is spent: no new model call starts."""


class RunHalted(BudgetExceeded):
    """Nearly every answer of a stage failed validation: the model does not answer in the shape
    asked, so no new call starts. Handled like a spent budget (work stops cleanly, a rerun resumes)."""


class StructuredOutputError(ModelError):
    """The model's answer still failed validation after every repair turn."""


class ReplayMiss(ModelError):
    """The replay provider has no recorded response for a request."""


class OutputTruncated(StructuredOutputError):
    """The answer hit the output cap (finish_reason "length" / stop_reason "max_tokens").

    Never parsed as a broken answer: a stage that can split its work catches
    this and asks for smaller pieces; any other stage fails with this message.
    """

    def __init__(self, message: str, *, max_tokens: int):
        super().__init__(message)
        self.max_tokens = max_tokens
