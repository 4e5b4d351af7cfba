"""Tool calls from the event loop to the episodes' workers, batched per lane.

A lane is one sandbox worker (synth.runtime.batch.lane_of): the calls on its
episodes run one after another anyway. Each lane has one thread. A request
puts its call on the lane's queue and awaits a future; the thread takes
everything queued so far (at most MAX_BATCH calls) and runs it as one pipelined
batch, then hands every answer back to the event loop in one wake-up. Alone,
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
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            first = self.queue.get()
            if first is _STOP:
                self._refuse_rest()
                return
            batch, stop = [first], False
            while len(batch) < MAX_BATCH:
                try:
                    item = self.queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
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
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                _hand_back([item[1]], RuntimeError("the server is shutting down"))


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
        self._closed = False

    async def call(self, episode: Any, name: str, arguments: Any) -> dict[str, Any]:
        """Episode.call's observation, without blocking the event loop."""
        return await self.submit(episode, name, arguments)

    def submit(self, episode: Any, name: str, arguments: Any) -> asyncio.Future:
        """The future of Episode.call's observation; calls on one episode run in the order submitted."""
        if self._closed:
            raise RuntimeError("the server is shutting down")
        future = asyncio.get_running_loop().create_future()
        key = lane_of(episode)
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(f"synth-lane-{len(self._lanes)}")
        lane.queue.put(((episode, name, arguments), future))
        return future

    def close(self, timeout: float = 30.0) -> None:
        """Stop every lane (blocking: call it off the event loop)."""
        self._closed = True
        for lane in self._lanes.values():
            lane.queue.put(_STOP)
        for lane in self._lanes.values():
            lane.thread.join(timeout)
