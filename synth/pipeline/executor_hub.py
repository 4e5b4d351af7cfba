"""What Ray workers need from the driver, in one actor on the driver's node.

- The model-call cache: the driver's own cache file (the actor runs on the
  driver's machine, so it opens the same file), looked up before every call
  and written as soon as an answer is validated. A worker lost mid-env keeps
  the answers it already had; a rerun anywhere repeats no paid call.
- The budget ledger: everything spent so far in the run, by the driver and
  every worker; each process checks it before each call and adds to it after.
- Model-call records, pushed by workers as calls finish and collected by the
  driver into its run store (so a lost worker's spending is still on record).

`Hub` is a plain class; the Ray executor makes it an actor. The client
classes below give workers (and the driver) the interfaces the gateway
already uses: `get`/`put` of `ResponseCache`, `synth.llm.usage.Ledger`, and
`record_call` of a call recorder. Every client call waits for the actor's
answer, so the order of calls and records is kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.llm.cache import ResponseCache


class Hub:
    def __init__(self, cache_dir: str | None, spent: float):
        self.cache = ResponseCache(Path(cache_dir)) if cache_dir else None
        self.spent = spent
        self.records: list[dict[str, Any]] = []

    def cache_get(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key) if self.cache is not None else None

    def cache_put(self, key: str, fields: dict[str, Any]) -> None:
        if self.cache is not None:
            self.cache.put(key, **fields)

    def add(self, cost: float) -> float:
        self.spent += cost
        return self.spent

    def total(self) -> float:
        return self.spent

    def record_call(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def drain(self) -> list[dict[str, Any]]:
        records, self.records = self.records, []
        return records


def _get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


class HubCache:
    """The driver's model-call cache, as the gateway uses a ResponseCache."""

    def __init__(self, hub: Any):
        self.hub = hub

    def get(self, key: str) -> dict[str, Any] | None:
        return _get(self.hub.cache_get.remote(key))

    def put(self, key: str, **fields: Any) -> None:
        _get(self.hub.cache_put.remote(key, fields))


class HubLedger:
    """The run's shared spending (synth.llm.usage.Ledger)."""

    def __init__(self, hub: Any):
        self.hub = hub

    def add(self, cost: float) -> None:
        _get(self.hub.add.remote(cost))

    def total(self) -> float:
        return _get(self.hub.total.remote())


class HubRecorder:
    """Model-call records, for the driver's run store."""

    def __init__(self, hub: Any):
        self.hub = hub

    def record_call(self, record: dict[str, Any]) -> None:
        _get(self.hub.record_call.remote(record))
