"""`-n N` means N verified envs: the scheduling loop of `synth run`, driven by fake work.

`provision(total)` hands out scenarios from a fixed list (the seeds' supply);
`work(scenario)` answers verified / failed from a table, after a tick so several
envs are in flight at once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from synth.artifacts import Scenario
from synth.pipeline.scheduler import BUDGET, CAP, EXHAUSTED, REACHED, Provisioned, schedule, yield_estimate


@dataclass
class Result:
    env_id: str
    status: str


def scenario(i: int) -> Scenario:
    return Scenario(name=f"App {i:02d}", description="d", category="c")


class Fake:
    def __init__(self, supply: int, failing: set[int] = frozenset(), stop_after: int | None = None):
        self.supply = [scenario(i) for i in range(supply)]
        self.failing = {scenario(i).env_id for i in failing}
        self.asked: list[int] = []  # totals asked of provision, in order
        self.started: list[str] = []
        self.in_flight = self.max_in_flight = 0
        self.stop_after = stop_after  # the budget runs out after this many envs started

    async def provision(self, total: int) -> Provisioned:
        self.asked.append(total)
        given = self.supply[:total]
        return Provisioned(given, exhausted=len(given) < total)

    async def work(self, sc: Scenario) -> Result:
        self.started.append(sc.env_id)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.001 * (len(self.started) % 3))
        self.in_flight -= 1
        return Result(sc.env_id, "failed" if sc.env_id in self.failing else "verified")

    def budget(self) -> bool:
        return self.stop_after is not None and len(self.started) >= self.stop_after


def run(fake: Fake, target: int, *, parallel: int = 4, cap: int = 100):
    return asyncio.run(schedule(target, parallel=parallel, cap=cap, provision=fake.provision, work=fake.work,
                                budget_reached=fake.budget))


def verified(result) -> int:
    return sum(o.status == "verified" for o in result.outcomes)


def test_when_everything_verifies_exactly_n_are_provisioned_and_built():
    fake = Fake(supply=50)
    result = run(fake, 6)
    assert result.stop_reason == REACHED and verified(result) == 6
    assert fake.asked == [6] and len(fake.started) == 6
    assert fake.max_in_flight <= 4


def test_failures_make_it_provision_more_from_the_observed_yield_until_n_are_verified():
    fake = Fake(supply=50, failing={0, 1, 2, 5})  # 4 of the first 6 fail
    result = run(fake, 5)
    # Envs in flight when the 5th verifies are finished, not thrown away: there may be a few more.
    assert result.stop_reason == REACHED and 5 <= verified(result) < 5 + 4
    assert len(fake.asked) > 1 and fake.asked[0] == 5  # a second wave, sized from the yield
    assert fake.asked[1] > fake.asked[0] + 1  # more than one more: the yield said about half fail
    # every outcome is reported, in start order
    assert [o.env_id for o in result.outcomes] == fake.started


def test_the_seeds_running_out_ends_the_run_short_and_says_so():
    fake = Fake(supply=3, failing={1})
    result = run(fake, 5)
    assert result.stop_reason == EXHAUSTED and verified(result) == 2 and len(fake.started) == 3


def test_the_attempt_cap_ends_a_run_whose_envs_keep_failing():
    fake = Fake(supply=50, failing=set(range(50)))
    result = run(fake, 3, cap=7)
    assert result.stop_reason == CAP and len(fake.started) == 7 and verified(result) == 0


def test_the_budget_stops_new_envs_and_in_flight_ones_finish():
    fake = Fake(supply=50, stop_after=2)
    result = run(fake, 6, parallel=2)
    assert result.stop_reason == BUDGET and len(fake.started) == 2 and len(result.outcomes) == 2


def test_yield_estimate_starts_optimistic_and_follows_the_outcomes():
    assert yield_estimate(0, 0) == 1.0
    assert yield_estimate(1, 3) == 0.5
    assert yield_estimate(9, 9) == 1.0
