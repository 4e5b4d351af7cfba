"""Tool calls of many episodes in one go.

A server that receives calls faster than one round trip at a time can take
them in batches: the calls of every episode whose worker is the same go to it
pipelined (SandboxPool.call_many), so the worker runs them back to back, and
the caller pays one thread hop per batch instead of one per call. Each call is
answered exactly as Episode.call would answer it alone; calls on the same
episode run in the order given.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Sequence

from synth.runtime.episode import Episode
from synth.runtime.sandbox import EpisodeLost


def lane_of(episode: Episode) -> tuple[int, Any]:
    """Episodes with the same lane share a worker: their calls run one after another."""
    backend = episode._backend
    lane = getattr(backend, "lane", None)
    return id(backend), (lane(episode._handle) if lane is not None else id(episode))


def call_many(calls: Sequence[tuple[Episode, str, Any]]) -> list[dict[str, Any]]:
    """Observations for (episode, tool name, arguments) calls, in order. A recorded
    episode's steps get the batch's duration."""
    start = time.perf_counter()
    observations: list[dict[str, Any] | None] = [None] * len(calls)
    sends: dict[int, tuple[Any, list[tuple[int, Episode, str, dict]]]] = {}
    for i, (episode, name, arguments) in enumerate(calls):
        clean, early = episode._prepare(name, arguments)
        if early is not None:
            observations[i] = early
        else:
            sends.setdefault(id(episode._backend), (episode._backend, []))[1].append((i, episode, name, clean))
    for backend, items in sends.values():
        episodes = sorted({id(e): e for _, e, _, _ in items}.values(), key=id)  # one lock order for everyone
        with contextlib.ExitStack() as held:
            for episode in episodes:
                held.enter_context(episode._lock)
            live = [item for item in items if not item[1].closed]
            replies = _send(backend, [(e._handle, name, clean) for _, e, name, clean in live])
        for (i, episode, name, clean), reply in zip(live, replies):
            observations[i] = episode._finish(name, clean, reply)
        for i, episode, _, _ in items:
            if observations[i] is None:
                observations[i] = {"ok": False, "error": "the episode is closed"}
    return [episode._observed(name, arguments, observation, start)
            for (episode, name, arguments), observation in zip(calls, observations)]


def _send(backend: Any, calls: list[tuple[Any, str, dict]]) -> list[tuple | EpisodeLost]:
    return backend.call_many(calls)  # every backend has it: the sandbox pipelines, trusted mode loops
