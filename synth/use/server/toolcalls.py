"""The work behind the tool-call routes, shared by their FastAPI declarations
(which document them at /docs) and the fast lane (fastlane.py, which serves
them without FastAPI's per-request machinery): the same parsing, the same
observations, the same bytes.

POST /episodes/{episode_id}/tools/{name}   arguments object -> observation
POST /batch   {"calls": [{"episode_id", "tool", "arguments"}, ...]} -> {"results": [observation, ...]}

A batch answers every call in the order given. Calls on one episode run in
that order; calls on different episodes run concurrently. A call whose episode
is unknown or gone, or that the server failed to run, gets {"ok": false,
"error": ..., "status": 404 | 500 | 503} in its place; the rest still run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Protocol

from synth.errors import SynthError
from synth.runtime.sandbox import PoolBusy
from synth.use.server.episodes import EpisodeRegistry, NotFound, RegistryError
from synth.use.server.lanes import CallLanes

log = logging.getLogger(__name__)

MAX_BATCH_CALLS = 4096


class BadRequest(RegistryError):
    status = 422


class Peers(Protocol):
    """The other server processes of `synth serve --workers N` (routing.py)."""

    index: int

    def owner(self, episode_id: str) -> int | None: ...

    async def batch(self, owner: int, calls: list[dict[str, Any]], host: bytes) -> list[dict[str, Any]]: ...


def encode(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def error_answer(exc: BaseException) -> tuple[int, bytes]:
    """The status and JSON body an error becomes (the FastAPI exception handlers answer the same)."""
    if isinstance(exc, RegistryError):
        return exc.status, encode({"detail": exc.message})
    if isinstance(exc, SynthError):
        return (503 if isinstance(exc, PoolBusy) else 500), encode({"detail": str(exc)})
    log.error("a tool call failed in the server", exc_info=exc)
    return 500, encode({"detail": f"internal server error ({type(exc).__name__})"})


def parse_arguments(raw: bytes) -> tuple[Any, dict[str, Any] | None]:
    """(arguments for Episode.call, None) or (None, the observation that answers at once).
    Text that is not JSON is passed on: the runtime reports bad JSON itself."""
    if not raw.strip():
        return {}, None
    text = raw.decode("utf-8", errors="replace")
    try:
        arguments: Any = json.loads(text)
    except RecursionError:
        return None, {"ok": False, "error": "arguments are nested too deeply"}
    except ValueError:
        return text, None
    return _checked_arguments(arguments)


def _checked_arguments(arguments: Any) -> tuple[Any, dict[str, Any] | None]:
    if not isinstance(arguments, (dict, str)):
        return None, {"ok": False, "error": f"arguments must be a JSON object, got {type(arguments).__name__}"}
    return arguments, None


async def tool_call(registry: EpisodeRegistry, lanes: CallLanes, episode_id: str, name: str, raw: bytes) -> bytes:
    """The observation of one call, as JSON bytes; raises NotFound for an unknown episode."""
    live = registry.begin(episode_id)
    try:
        arguments, answer = parse_arguments(raw)
        if answer is None:
            answer = await lanes.submit(live.episode, name, arguments)
            live.calls += 1
    finally:
        registry.end(live)
    return encode(answer)


def parse_batch(raw: bytes) -> list[dict[str, Any]]:
    try:
        body = json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        raise BadRequest("the batch is not valid JSON; send {\"calls\": [{\"episode_id\", \"tool\", "
                         "\"arguments\"}, ...]}") from None
    calls = body.get("calls") if isinstance(body, dict) else None
    if not isinstance(calls, list):
        raise BadRequest("a batch is {\"calls\": [{\"episode_id\", \"tool\", \"arguments\"}, ...]}")
    if len(calls) > MAX_BATCH_CALLS:
        raise BadRequest(f"a batch of {len(calls)} calls; the limit is {MAX_BATCH_CALLS}")
    for i, call in enumerate(calls):
        if not (isinstance(call, dict) and isinstance(call.get("episode_id"), str)
                and isinstance(call.get("tool"), str)):
            raise BadRequest(f"calls[{i}] needs a string episode_id and a string tool")
    return calls


async def batch(registry: EpisodeRegistry, lanes: CallLanes, calls: list[dict[str, Any]],
                peers: Peers | None = None, host: bytes = b"127.0.0.1") -> list[dict[str, Any]]:
    """The observations of checked batch calls (parse_batch), in order; the calls of other
    processes' episodes are sent to them with the request's `host` (it passed our guard)."""
    results: list[dict[str, Any] | None] = [None] * len(calls)
    remote: dict[int, list[int]] = {}
    submitted: list[tuple[int, Any, asyncio.Future]] = []
    held = []
    try:
        for i, call in enumerate(calls):
            owner = peers.owner(call["episode_id"]) if peers is not None else None
            if owner is not None and owner != peers.index:
                remote.setdefault(owner, []).append(i)
                continue
            try:
                live = registry.begin(call["episode_id"])
            except NotFound as exc:
                results[i] = {"ok": False, "error": exc.message, "status": exc.status}
                continue
            held.append(live)
            arguments, answer = _checked_arguments({} if call.get("arguments") is None else call["arguments"])
            if answer is not None:
                results[i] = answer
            else:
                submitted.append((i, live, lanes.submit(live.episode, call["tool"], arguments)))
        forwarded = [(indexes, peers.batch(owner, [calls[i] for i in indexes], host))  # type: ignore[union-attr]
                     for owner, indexes in remote.items()]
        answers = await asyncio.gather(*(f for _, _, f in submitted), *(f for _, f in forwarded),
                                       return_exceptions=True)
    finally:
        for live in held:
            registry.end(live)
    for (i, live, _), answer in zip(submitted, answers):
        if isinstance(answer, BaseException):
            results[i] = _failed(answer)
        else:
            live.calls += 1
            results[i] = answer
    for (indexes, _), answer in zip(forwarded, answers[len(submitted):]):
        for n, i in enumerate(indexes):
            results[i] = _failed(answer) if isinstance(answer, BaseException) else answer[n]
    return results  # type: ignore[return-value]


def _failed(exc: BaseException) -> dict[str, Any]:
    status, body = error_answer(exc)
    return {"ok": False, "error": json.loads(body)["detail"], "status": status}
