"""Output budgets: how many tokens each stage may ask a model to write.

A real model has an output cap (`--max-tokens`, default 8192) and stops there
mid-answer. Each stage asks for at most its own budget, never more than the
cap; stages whose answers grow with the env (data, tool spec, tool code, test
batches) size each request from these budgets and split their work so every
answer fits, and a cut-off answer is detected (finish_reason "length" /
stop_reason "max_tokens") and handled, never parsed as a broken answer.
"""

from __future__ import annotations

from typing import Awaitable, Callable, TypeVar

from synth.llm.errors import OutputTruncated

T = TypeVar("T")
R = TypeVar("R")

# Tokens a stage asks for by default; the model's cap (settings.max_tokens) bounds them all.
STAGE_BUDGETS: dict[str, int] = {
    "ping": 256,
    "classify": 512,
    "dedup_judge": 512,
    "expand": 4096,
    "tasks": 4096,
    "schema": 8192,
    "data": 8192,
    "data_fix": 8192,
    "tool_spec": 8192,
    "tool_code": 8192,
    "gold": 6144,
    "check_tests": 6144,
    "check_judge": 4096,
    "check_repair": 4096,
    "paraphrase": 4096,
    "solve": 4096,
    "red_team": 4096,
    "reward_judge": 2048,
    "templates": 8192,
}
# Share of a budget a split stage plans to fill: estimates are rough, and a cut answer costs a retry.
FILL = 0.7
CHARS_PER_TOKEN = 4  # the usual rough figure for English text and code


def output_budget(stage: str, cap: int) -> int:
    """The max_tokens a request of `stage` carries: its budget, never above the model's cap."""
    return max(1, min(STAGE_BUDGETS.get(stage, cap), cap))


def planned_tokens(stage: str, cap: int) -> int:
    """How many output tokens a split stage should plan one request to need."""
    return max(1, int(output_budget(stage, cap) * FILL))


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def pack(items: list, cost: dict, limit: int) -> list[list]:
    """Consecutive groups of `items` whose summed `cost[item]` stays within `limit`
    (an item that alone exceeds it gets a group of its own)."""
    groups: list[list] = []
    current: list = []
    used = 0
    for item in items:
        need = cost[item]
        if current and used + need > limit:
            groups.append(current)
            current, used = [], 0
        current.append(item)
        used += need
    if current:
        groups.append(current)
    return groups


def halves(items: list) -> list[list]:
    """A group split in two (for a request whose answer was cut off)."""
    mid = max(1, len(items) // 2)
    return [items[:mid], items[mid:]] if len(items) > 1 else [items]


async def asked_in_halves(ask: Callable[[list[T]], Awaitable[list[R]]], items: list[T]) -> list[R]:
    """`ask(items)`; an answer cut off at the output cap is asked again for each half, recursively
    (a single item that still does not fit raises OutputTruncated)."""
    try:
        return await ask(items)
    except OutputTruncated:
        if len(items) == 1:
            raise
        return [r for half in halves(items) for r in await asked_in_halves(ask, half)]
