"""Where each env's work runs: `--executor local` (this process) or `--executor ray` (Ray tasks).

An executor does one thing, `build(scenario, progress) -> EnvOutcome`: the plain
per-env work (`synth.pipeline.runner.build_then_verify`) done somewhere, with the env's
folders and run-store rows in the driver's output folder by the time it returns.
The driver (`synth.pipeline.runner`) decides around it: what to skip on a rerun, when
to stop, what to count. `drain()` brings in what remote workers recorded so far
(their model calls); `close()` ends the executor.

Ray is an optional extra: synth imports and runs without it, and asking for
`--executor ray` without it installed is a one-line error saying what to install.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from synth.config import Settings
from synth.errors import InputError
from synth.llm import Gateway
from synth.pipeline.progress import Progress
from synth.pipeline.store import RunStore

if TYPE_CHECKING:
    from synth.artifacts import Scenario
    from synth.pipeline.runner import EnvOutcome

RAY_MISSING = '--executor ray needs Ray, which is not installed here: pip install "synth[ray]"'


class Executor(Protocol):
    name: str

    async def build(self, scenario: Scenario, progress: Progress) -> EnvOutcome: ...

    def drain(self) -> None: ...

    def close(self) -> None: ...


class LocalExecutor:
    """Every env in this process (model calls on its event loop, generated code in `pool`'s sandbox workers)."""

    name = "local"

    def __init__(self, settings: Settings, *, gateway: Gateway, out: Path, store: RunStore | None, pool: Any):
        self.settings, self.gateway, self.out, self.store, self.pool = settings, gateway, Path(out), store, pool

    async def build(self, scenario: Scenario, progress: Progress) -> EnvOutcome:
        from synth.pipeline.runner import build_then_verify

        return await build_then_verify(scenario, self.gateway, self.settings, self.out, self.store, self.pool,
                                       progress)

    def drain(self) -> None:
        pass  # every call is recorded as it happens

    def close(self) -> None:
        pass


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError(RAY_MISSING) from None
    return ray


def open_executor(settings: Settings, *, gateway: Gateway, out: Path, store: RunStore | None,
                  pool: Any = None) -> Executor:
    """The executor `settings.executor` names (Ray: joined or started per `settings.ray_address`)."""
    if settings.executor == "ray":
        require_ray()
        from synth.pipeline.executor_ray import RayExecutor

        return RayExecutor(settings, gateway=gateway, out=out, store=store)
    return LocalExecutor(settings, gateway=gateway, out=out, store=store, pool=pool)
