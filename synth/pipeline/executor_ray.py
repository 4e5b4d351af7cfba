"""`--executor ray`: each env's build and verify as a Ray task on any node of a cluster.

The driver (the `synth run` process) keeps what must stay exact in one place:
the run store, the progress display and funnel, the env folders in the output
folder and the model-call cache. A task gets the scenario, the settings, the
env's folders as the output folder holds them (an earlier attempt's built env,
or the failed build whose answers a retry must move past) and its run-store
rows; it returns the finished folders and rows, which the driver writes. No
node needs the driver's file system (synth.pipeline.executor_worker).

Through one actor on the driver's node (synth.pipeline.executor_hub), workers look up
and fill the driver's cache, check and add to one budget ledger before and
after every call, and push their call records, which the driver collects into
its run store every second and when each env returns.

The budget: the driver starts no env once the ledger reaches --max-cost, and
no worker starts a call then; what can still be spent is the calls already in
flight, at most --parallel-envs x --concurrency of them.

Faults: a task whose worker is lost (killed, out of memory, node lost) is
dispatched again, up to --env-attempts times; the run store's `env` row counts
the attempts and each loss's reason is kept in the outcome (`lost`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synth.config import Settings
from synth.errors import InputError
from synth.folder.pack import pack_env, pack_files, unpack_env
from synth.llm import Gateway
from synth.pipeline.executor import require_ray
from synth.pipeline.executor_hub import Hub, HubLedger
from synth.pipeline.executor_worker import ITEM_STAGES, SHIPPED, run_env_task, warm_up
from synth.pipeline.progress import Progress
from synth.pipeline.store import RunStore

if TYPE_CHECKING:
    from synth.artifacts import Scenario
    from synth.pipeline.runner import EnvOutcome

ENV_STAGE = "env"  # synth.pipeline.runner's run-store item per env
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")  # what providers read; workers get the driver's
LOST = ("WorkerCrashedError", "NodeDiedError", "OutOfMemoryError", "ObjectLostError", "LocalRayletDiedError",
        "RaySystemError")  # ray.exceptions meaning the worker, not the env, failed
DRAIN_SECONDS = 1.0
CONNECT_SECONDS = 10.0


def cluster_address(address: str | None) -> str:
    """The cluster to join, checked: `address`, else RAY_ADDRESS, else "local" (start a local instance)."""
    address = address or os.environ.get("RAY_ADDRESS") or "local"
    if address.startswith("ray://"):
        raise InputError(f"--ray-address {address}: Ray Client addresses are not supported (the driver must run on "
                         "a node of the cluster, where it writes the output folder); run synth on a node and pass "
                         "the head's HOST:PORT, or auto")
    if address not in ("local", "auto"):
        _reachable(address)
    return address


def connect(address: str | None) -> bool:
    """Join the cluster at `address` (see cluster_address); True if this call started Ray in this process
    (and closing should shut it down)."""
    ray = require_ray()
    if ray.is_initialized():
        return False
    address = cluster_address(address)
    quiet = {"logging_level": logging.WARNING, "log_to_driver": False}
    try:
        if address == "local":
            ray.init(address="local", include_dashboard=False, **quiet)
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"could not join the Ray cluster at {address}: {first}; check --ray-address (the head "
                         "node's HOST:PORT that `ray start` printed)") from None
    return True


def _reachable(address: str) -> None:
    """Fail in seconds, not after Ray's minutes of retries, when nothing listens at HOST:PORT."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray-address {address}: expected HOST:PORT of the cluster's head node, or auto")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise InputError(f"--ray-address {address}: nothing answers there ({exc.strerror or exc}); start the "
                         "cluster's head node with `ray start` and pass the address it prints") from None


class RayExecutor:
    name = "ray"

    def __init__(self, settings: Settings, *, gateway: Gateway, out: Path, store: RunStore | None):
        self.ray = require_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.settings, self.gateway, self.out, self.store = settings, gateway, Path(out), store
        self.owns_ray = connect(settings.ray_address)
        here = NodeAffinitySchedulingStrategy(self.ray.get_runtime_context().get_node_id(), soft=False)
        cache_dir = None if settings.no_cache else str(Path(settings.cache_dir).resolve())
        actor = self.ray.remote(num_cpus=0)(Hub)
        self.hub = actor.options(scheduling_strategy=here).remote(cache_dir, gateway.usage.spent)
        gateway.usage.ledger = HubLedger(self.hub)  # the driver's own calls count in the same ledger
        self.shipped = self.ray.put(pack_files({name: getattr(settings, name) for name in SHIPPED}))
        keys = {k: os.environ[k] for k in KEY_VARS if os.environ.get(k)}
        self.options: dict[str, Any] = {"num_cpus": 1, "max_retries": 0, "scheduling_strategy": "SPREAD"}
        if keys:
            self.options["runtime_env"] = {"env_vars": keys}
        self.task = self.ray.remote(run_env_task)
        warm = self.ray.remote(warm_up).options(**self.options)
        self.warming = [warm.remote(settings.tool_timeout, settings.allow_weak_sandbox) for _ in range(settings.parallel_envs)]  # not awaited
        self.lost_errors = tuple(getattr(self.ray.exceptions, n) for n in LOST if hasattr(self.ray.exceptions, n))
        self.in_flight = 0
        self.pump: asyncio.Task | None = None

    # ------------------------------------------------------------------ one env

    def _payload(self, scenario: Scenario) -> dict[str, Any]:
        env_id = scenario.env_id
        rows = self.store.export_items(env_id, ITEM_STAGES) if self.store is not None else []
        return {"scenario": scenario, "settings": self.settings, "env": pack_env(self.out, env_id), "rows": rows}

    async def build(self, scenario: Scenario, progress: Progress) -> EnvOutcome:
        from synth.pipeline.runner import EnvOutcome

        env_id = scenario.env_id
        lost: list[str] = []
        progress.started("build")
        self.in_flight += 1
        if self.pump is None or self.pump.done():
            self.pump = asyncio.ensure_future(self._drain_while_busy())
        try:
            while True:
                task = self.task.options(name=f"synth:{env_id}", **self.options)
                ref = task.remote(self._payload(scenario), self.hub, self.shipped)
                try:
                    result = await ref
                    break
                except asyncio.CancelledError:
                    self.ray.cancel(ref, force=True)
                    raise
                except self.lost_errors as exc:
                    attempt = self._attempts(env_id, len(lost) + 1)
                    reason = f"attempt {attempt}: worker lost: {_first_line(exc)}"
                    lost.append(reason)
                    if self.store is not None:
                        self.store.fail(ENV_STAGE, env_id, reason)
                    if attempt >= self.settings.env_attempts:
                        progress.finished("build", False)
                        return EnvOutcome(env_id, "failed", "build", None, f"the worker was lost on each of "
                                          f"{attempt} attempt(s) (--env-attempts); last: {reason}", lost=lost)
                    progress.note(f"{env_id}: {reason}; dispatching it again")
                    if self.store is not None:
                        self.store.start(ENV_STAGE, env_id)
                except self.ray.exceptions.RayTaskError as exc:  # raised by synth on the worker: a bug
                    progress.finished("build", False)
                    return EnvOutcome(env_id, "failed", "build", None,
                                      f"internal error on a Ray worker: {_first_line(exc.cause or exc)}", lost=lost)
        finally:
            self.in_flight -= 1
        return self._receive(env_id, result, lost, progress)

    def _attempts(self, env_id: str, here: int) -> int:
        """The env's attempts so far: the run store counts those of earlier runs too (a driver restarted)."""
        row = self.store.get(ENV_STAGE, env_id) if self.store is not None else None
        return max(here, int(row["attempts"] or 0)) if row else here

    def _receive(self, env_id: str, result: dict[str, Any], lost: list[str], progress: Progress) -> EnvOutcome:
        """Write what the worker sent back into the output folder and run store; the outcome, in driver paths."""
        from synth.pipeline.runner import EnvOutcome

        def here(text: Any) -> Any:  # the worker's output folder named in text, as the driver's
            if not isinstance(text, str):
                return text
            for theirs, ours in ((result["out"], str(self.out)), (json.dumps(result["out"])[1:-1],
                                                                   json.dumps(str(self.out))[1:-1])):
                text = text.replace(theirs, ours)
            return text

        unpack_env(result["env"], self.out, env_id)
        if self.store is not None:
            self.store.import_items([{**row, "output": here(row["output"]), "error": here(row["error"])}
                                     for row in result["rows"]])
        self.drain()
        data = result["outcome"]
        outcome = EnvOutcome(**{**data, "path": str(self.out / data["path"]) if data["path"] else None,
                                "reason": here(data["reason"]), "lost": lost + data.get("lost", [])})
        progress.finished("build", outcome.stage == "verify" or outcome.status == "verified")
        if outcome.stage == "verify":
            progress.started("verify")
            progress.finished("verify", outcome.status == "verified")
        return outcome

    # ------------------------------------------------------------------ records

    async def _drain_while_busy(self) -> None:
        while self.in_flight:
            await asyncio.sleep(DRAIN_SECONDS)
            self.drain()

    def drain(self) -> None:
        """Move the call records workers pushed into the run store and the driver's usage totals."""
        for record in self.ray.get(self.hub.drain.remote()):
            if self.store is not None:
                self.store.record_call(record)
            if record["status"] != "error":
                self.gateway.usage.record(
                    record["stage"], cached=bool(record["cached"]), prompt_tokens=record["prompt_tokens"],
                    completion_tokens=record["completion_tokens"], cost=record["cost"],
                    cached_tokens=record.get("cached_tokens", 0), spend=False)

    def close(self) -> None:
        if self.ray.is_initialized():
            self.drain()
            self.ray.kill(self.hub)
            self.gateway.usage.ledger = None
            if self.owns_ray:
                self.ray.shutdown()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


__all__ = ["RayExecutor", "cluster_address", "connect"]
