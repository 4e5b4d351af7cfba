"""How many scenarios `synth run -n N` builds: until N are verified, or it has to stop.

The loop knows nothing about what building an env means: it is given
`provision(total)` (the first `total` unique scenarios, generating more when
needed; a rerun returns the same ones first) and `work(scenario)` (build and
verify one env, a plain call that an executor may run elsewhere) and decides
only what to start next:

- at most `parallel` envs in flight, and no more than the observed yield says
  are needed: an env in flight counts as `yield` of a verified one, where
  yield = (verified + 1) / (finished + 1) (one optimistic prior success, so the
  first wave is exactly N and a run with failures provisions more);
- when every provisioned scenario has started and more are needed, it asks
  for ceil(shortfall / yield) more scenarios;
- it stops starting new envs when N are verified, the seeds give no more
  unique scenarios, the budget is spent, or `cap` scenarios have been started.

Envs already in flight when N is reached are finished, not cancelled: their
cost is already paid.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from synth.artifacts import Scenario

REACHED = "reached"
EXHAUSTED = "seeds exhausted"
BUDGET = "budget"
CAP = "attempt cap"


class Outcome(Protocol):
    env_id: str
    status: str  # verified | failed | stopped


@dataclass
class Provisioned:
    scenarios: Sequence[Scenario]  # the first `total` unique scenarios, in a stable order
    exhausted: bool  # the seeds cannot give more than these
    budget_stopped: bool = False


@dataclass
class ScheduleResult:
    outcomes: list[Any] = field(default_factory=list)  # in the order the envs were started
    stop_reason: str = REACHED
    started: int = 0
    provisioned: int = 0


def yield_estimate(verified: int, finished: int) -> float:
    return (verified + 1) / (finished + 1)


async def schedule(
    target: int,
    *,
    parallel: int,
    cap: int,
    provision: Callable[[int], Awaitable[Provisioned]],
    work: Callable[[Scenario], Awaitable[Outcome]],
    budget_reached: Callable[[], bool] = lambda: False,
    on_queue: Callable[[int], None] = lambda n: None,
) -> ScheduleResult:
    """Run `work` on provisioned scenarios until `target` outcomes are verified or a stop applies."""
    result = ScheduleResult()
    queue: list[Scenario] = []
    seen: set[str] = set()
    running: dict[asyncio.Task, int] = {}
    slots: list[Any] = []  # outcome per started env, by start order
    verified = finished = 0
    exhausted = budget = False

    def expected_in_flight() -> float:
        return len(running) * yield_estimate(verified, finished)

    async def more(total: int) -> None:
        nonlocal exhausted, budget
        got = await provision(total)
        before = len(queue)
        for scenario in got.scenarios:
            if scenario.env_id not in seen:
                seen.add(scenario.env_id)
                queue.append(scenario)
        result.provisioned = len(queue)
        on_queue(len(queue))
        budget = budget or got.budget_stopped
        if got.exhausted or len(queue) == before:
            exhausted = True

    try:
        while True:
            while (len(running) < parallel and verified + expected_in_flight() < target and not budget
                   and result.started < cap):
                if budget_reached():
                    budget = True
                    break
                if result.started == len(queue):
                    if exhausted:
                        break
                    shortfall = target - verified - expected_in_flight()
                    wanted = len(queue) + max(1, math.ceil(shortfall / yield_estimate(verified, finished)))
                    await more(min(wanted, cap))
                    continue
                slots.append(None)
                running[asyncio.ensure_future(work(queue[result.started]))] = result.started
                result.started += 1
            if not running:
                break
            done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                outcome = task.result()  # `work` records its failures in the outcome; a raise is a bug
                slots[running.pop(task)] = outcome
                if outcome.status == "stopped":
                    budget = True
                    continue
                finished += 1
                verified += outcome.status == "verified"
    finally:
        for task in running:
            task.cancel()
    result.outcomes = [o for o in slots if o is not None]
    if verified >= target:
        result.stop_reason = REACHED
    elif budget or budget_reached():
        result.stop_reason = BUDGET
    elif result.started >= cap:
        result.stop_reason = CAP
    else:
        result.stop_reason = EXHAUSTED
    return result
