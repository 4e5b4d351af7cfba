"""Envs per minute through the local and the Ray executor on one machine.

N envs (copies of the demo's three scenarios, renamed "<name> <k>") are built
and verified through each executor in turn, with the same `-n`-loop, the same
--parallel-envs and the same run store, cache and gateway plumbing `synth run`
uses; only the executor differs. The tests' fake model server answers every
call with the demo's recorded answers after a fixed latency (each copy gets its
own copy of the recordings, so every env asks and is answered the same way
under both executors; the bench checks that both end with the same outcomes).
The scenario stage is left out: it runs on the driver either way.

Ray runs on a local instance started here with as many CPUs as envs in flight
(an env task asks for one CPU), so both executors have the same parallelism.
Start-up is printed apart and not timed: the local sandbox pool's, and the
Ray executor's actor and worker warm-up, which `synth run` overlaps with the
driver's scenario stage. The overhead of the Ray executor is its time over the
local one's, minus 1 (target: within 15%). The machine may be shared: each
executor runs `--rounds` times, in alternating order, and its best run counts.

    python bench/executor.py [--envs 12] [--parallel 4] [--latency 0.3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the local instance on 127.0.0.1 only
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
logging.getLogger("asyncio").setLevel(logging.CRITICAL)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_server import FakeModelServer  # noqa: E402

from synth.artifacts import Scenario  # noqa: E402
from synth.config import Settings  # noqa: E402
from synth.llm import Gateway  # noqa: E402
from synth.llm.extract import extract_json  # noqa: E402
from synth.llm.replay import load_recordings  # noqa: E402
from synth.llm.script import Reply, RequestInfo, Rule, Script  # noqa: E402
from synth.pipeline.executor import open_executor  # noqa: E402
from synth.pipeline.progress import Progress  # noqa: E402
from synth.pipeline.runner import build_and_verify  # noqa: E402
from synth.pipeline.scheduler import Provisioned, schedule  # noqa: E402
from synth.pipeline.store import RunStore  # noqa: E402

DEMO = ROOT / "seeds" / "demo"


def demo_scenarios() -> list[Scenario]:
    """The demo's three scenarios, as its recorded expand answers give them."""
    found = []
    for rule in load_recordings(DEMO).rules:
        if rule.stage == "expand":
            draft = extract_json(rule.replies[0].content_text() or "")["scenarios"][0]
            found.append(Scenario(**draft, seed=rule.subject))
    return found


def copies(n: int) -> list[Scenario]:
    base = demo_scenarios()
    return [base[i % len(base)].model_copy(update={"name": f"{base[i % len(base)].name} {i // len(base) + 1}"})
            for i in range(n)]


class Copies:
    """Answers a copy's request (subject `<env>_<k>/...`) as the recordings answer the original, after `latency`."""

    def __init__(self, latency: float):
        self.latency, self.scripts, self.lock = latency, {}, threading.Lock()

    def __call__(self, info: RequestInfo) -> Reply | None:
        env, slash, rest = info.subject.partition("/")
        original, _, k = env.rpartition("_")
        with self.lock:
            script = self.scripts.setdefault(k, load_recordings(DEMO))
        reply = script.next_reply(dataclasses.replace(info, subject=original + slash + rest))
        # A request the recordings do not cover (a copy's walks can find what the original's did not) is
        # refused at once, as a real API refuses a bad request: that env fails the same way under both executors.
        return (reply or Reply(fault="400")).model_copy(update={"delay": self.latency})


def run(executor: str, scenarios: list[Scenario], server: FakeModelServer, work: Path, parallel: int) -> tuple:
    """(start-up seconds, run seconds, {env id: (status, reason)}) for every scenario through one executor."""
    from synth.runtime.sandbox import SandboxPool

    settings = Settings(model="openai/test-model", base_url=server.openai_base_url, out=work / "out",
                        cache_dir=work / "cache", executor=executor, parallel_envs=parallel, templates=0)
    store = RunStore(work / "run")
    gateway = Gateway(settings, recorder=store)
    opened = time.monotonic()
    pool = SandboxPool(workers=2, call_timeout=settings.tool_timeout) if executor == "local" else None
    runner = open_executor(settings, gateway=gateway, out=settings.out, store=store, pool=pool)
    if pool is not None:
        pool.warm()
    else:  # in `synth run` this happens while the driver makes scenarios
        runner.ray.get(runner.warming)
    show = Progress()

    async def provision(total: int) -> Provisioned:
        return Provisioned(scenarios[:total], exhausted=total >= len(scenarios))

    async def one(scenario: Scenario):
        return await build_and_verify(scenario, gateway, settings, settings.out, store=store, pool=pool,
                                      progress=show, executor=runner)

    started = time.monotonic()
    try:
        result = asyncio.run(schedule(len(scenarios), parallel=parallel, cap=len(scenarios), provision=provision,
                                      work=one))
        runner.drain()
        seconds = time.monotonic() - started
    finally:
        runner.close()
        store.close()
        if pool is not None:
            pool.close()
    return started - opened, seconds, {o.env_id: (o.status, o.reason) for o in result.outcomes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=int, default=12, help="envs per run")
    parser.add_argument("--parallel", type=int, default=4, help="--parallel-envs of every run")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds the fake model takes per call")
    parser.add_argument("--rounds", type=int, default=2, help="runs per executor, in alternating order; the best counts")
    args = parser.parse_args()
    import ray

    scenarios = copies(args.envs)
    started = time.monotonic()
    ray.init(address="local", num_cpus=args.parallel, include_dashboard=False, logging_level="WARNING",
             log_to_driver=False)
    print(f"Ray local instance: started in {time.monotonic() - started:.1f}s "
          f"({ray.get_runtime_context().gcs_address}, {args.parallel} CPUs); {args.envs} envs per run, "
          f"{args.parallel} in flight, the fake model answering in {args.latency:g}s")
    best: dict[str, float] = {}
    outcomes: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp, FakeModelServer(Script([Rule(handler=Copies(args.latency))])) as fake:
            for round_ in range(args.rounds):
                for name in ("local", "ray") if round_ % 2 == 0 else ("ray", "local"):
                    fake.reset_counters()
                    fake.script.rules[0].handler.scripts.clear()  # every run is answered from the start
                    warm, seconds, got = run(name, scenarios, fake, Path(tmp) / f"{name}{round_}", args.parallel)
                    if outcomes.setdefault(name, got) != got:
                        raise SystemExit(f"{name}: outcomes differ between rounds: {outcomes[name]} / {got}")
                    calls = len([r for r in fake.requests if r.status == 200])
                    verified = sum(status == "verified" for status, _ in got.values())
                    best[name] = min(seconds, best.get(name, seconds))
                    print(f"{name:>5}: {len(got)} envs in {seconds:6.1f}s = {60 * len(got) / seconds:5.1f} envs/minute, "
                          f"{verified} verified, {calls} model calls (start-up before it: {warm:.1f}s)")
    finally:
        ray.shutdown()
    if outcomes["ray"] != outcomes["local"] or len(outcomes["local"]) != len(scenarios):
        raise SystemExit(f"the executors disagree: local {outcomes['local']}, ray {outcomes['ray']}")
    for env_id, (status, reason) in outcomes["local"].items():
        if status != "verified":  # the same under both executors (checked above)
            print(f"  {env_id}: {status} under both: {(reason or '')[:120]}")
    ratio = best["ray"] / best["local"]
    print(f"best of {args.rounds}: local {60 * args.envs / best['local']:.1f} envs/minute, ray "
          f"{60 * args.envs / best['ray']:.1f} envs/minute; Ray time / local time = {ratio:.3f} "
          f"(overhead {ratio - 1:+.1%}; target within 15%: {'met' if ratio <= 1.15 else 'NOT met'})")


if __name__ == "__main__":
    main()
