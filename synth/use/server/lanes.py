"""Tool calls from the event loop to the episodes' workers, batched per lane.

A lane is one sandbox worker (synth.runtime.batch.lane_of): the calls on its
episodes run one after another anyway. Each lane has one thread. A request
submits its call and awaits a future; the calls submitted in one turn of the
event loop go to the lane's queue together, and the thread takes everything
queued so far and runs it as pipelined batches (at most MAX_BATCH calls each),
handing each batch's answers back to the event loop in one wake-up. Alone,
a call costs one thread hop, as before; under load, a hop and a worker round
trip carry many calls, and calls are served first come, first served (a thread
pool waiting on a worker's lock is not fair, which showed as a long p99).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

from synth.runtime.batch import call_many, lane_of

MAX_BATCH = 256  # calls one batch carries at most: a later call waits for one batch, not for all queued

_STOP = object()


class _Lane:
    def __init__(self, name: str):
        self.queue: queue.SimpleQueue = queue.SimpleQueue()  # lists of (call, future), or _STOP
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            first = self.queue.get()
            if first is _STOP:
                self._refuse_rest()
                return
            queued, stop = list(first), False
            while True:
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is _STOP:
                    stop = True
                    break
                queued.extend(more)
            for start in range(0, len(queued), MAX_BATCH):
                batch = queued[start:start + MAX_BATCH]
                try:
                    answers: Any = call_many([call for call, _ in batch])
                except BaseException as exc:  # noqa: BLE001 - every caller of the batch gets it
                    answers = exc
                _hand_back([future for _, future in batch], answers)
            if stop:
                self._refuse_rest()
                return

    def _refuse_rest(self) -> None:
        """Calls queued behind the stop (none, when the server drained its requests first)."""
        while True:
            try:
                items = self.queue.get_nowait()
            except queue.Empty:
                return
            if items is not _STOP:
                _hand_back([future for _, future in items], RuntimeError("the server is shutting down"))


def _hand_back(futures: list[asyncio.Future], answers: Any) -> None:
    try:
        futures[0].get_loop().call_soon_threadsafe(_deliver, futures, answers)
    except RuntimeError:
        pass  # the event loop is closed: nobody waits for these answers any more


def _deliver(futures: list[asyncio.Future], answers: Any) -> None:
    for i, future in enumerate(futures):
        if future.done():  # its request was cancelled (the client went away)
            continue
        if isinstance(answers, BaseException):
            future.set_exception(answers)
        else:
            future.set_result(answers[i])


class CallLanes:
    """Use from one event loop; close() at shutdown stops the threads after their current batch."""

    def __init__(self) -> None:
        self._lanes: dict[Any, _Lane] = {}
        self._pending: dict[Any, list] = {}  # calls submitted in this turn of the event loop, by lane
        self._closed = False

    async def call(self, episode: Any, name: str, arguments: Any) -> dict[str, Any]:
        """Episode.call's observation, without blocking the event loop."""
        return await self.submit(episode, name, arguments)

    def submit(self, episode: Any, name: str, arguments: Any) -> asyncio.Future:
        """The future of Episode.call's observation; calls on one episode run in the order submitted."""
        if self._closed:
            raise RuntimeError("the server is shutting down")
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        key = lane_of(episode)
        pending = self._pending.get(key)
        if pending is None:  # the first call on this lane in this turn of the event loop
            pending = self._pending[key] = []
            loop.call_soon(self._flush, key)
        pending.append(((episode, name, arguments), future))
        return future

    def _flush(self, key: Any) -> None:
        """One hand-over (one thread wake-up) per lane per turn of the event loop."""
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(f"synth-lane-{len(self._lanes)}")
        lane.queue.put(self._pending.pop(key))

    def close(self, timeout: float = 30.0) -> None:
        """Stop every lane (blocking: call it off the event loop)."""
        self._closed = True
        for lane in self._lanes.values():
            lane.queue.put(_STOP)
        for lane in self._lanes.values():
            lane.thread.join(timeout)
