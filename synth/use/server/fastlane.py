"""The hot routes of `synth serve`, answered straight from ASGI.

A rollout spends nearly all its requests on three routes: a REST tool call, a
batch of them, and MCP posts to an episode's endpoint. FastAPI's per-request
machinery (request objects, dependency solving, response models, its middleware
layers, telemetry) cost more than the sandboxed call itself, so this ASGI layer,
in front of the FastAPI app, matches those routes by path and answers them with the
same functions the FastAPI routes call (toolcalls.py, mcp_app.py). Everything
else, and every other method on these paths, goes on to FastAPI. The Host,
Origin and body-size guards run before it (guard.py).
"""

from __future__ import annotations

from typing import Any

from synth.use.server import toolcalls
from synth.use.server.episodes import EpisodeRegistry
from synth.use.server.lanes import CallLanes

_JSON = [(b"content-type", b"application/json")]
MCP_METHODS = ("GET", "POST", "DELETE")


async def read_body(receive: Any) -> bytes | None:
    """The whole request body; None when the client went away."""
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def replaying(body: bytes, receive: Any) -> Any:
    """A receive() that gives `body` again (it was read already), then the client's next messages."""
    replay = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Any:
        return replay.pop() if replay else await receive()

    return replayed


async def send_json(send: Any, status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*_JSON, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class FastLane:
    def __init__(self, app: Any, registry: EpisodeRegistry, lanes: CallLanes, mcp: Any,
                 peers: toolcalls.Peers | None = None):
        self.app, self.registry, self.lanes, self.mcp, self.peers = app, registry, lanes, mcp, peers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path, method = scope["path"], scope["method"]
            if path.startswith("/episodes/"):
                parts = path.split("/")  # "", "episodes", id, "tools", name  |  "", "episodes", id, "mcp"
                if len(parts) == 5 and parts[3] == "tools" and parts[2] and parts[4] and method == "POST":
                    await self._tool_call(parts[2], parts[4], receive, send)
                    return
                if len(parts) == 4 and parts[3] == "mcp" and parts[2] and method in MCP_METHODS:
                    scope["path_params"] = {"episode_id": parts[2]}
                    await self.mcp(scope, receive, send)
                    return
            elif path == "/batch" and method == "POST":
                await self._batch(scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _tool_call(self, episode_id: str, name: str, receive: Any, send: Any) -> None:
        raw = await read_body(receive)
        if raw is None:
            return
        try:
            body = await toolcalls.tool_call(self.registry, self.lanes, episode_id, name, raw)
        except Exception as exc:  # noqa: BLE001 - answered as the FastAPI handlers answer it
            await send_json(send, *toolcalls.error_answer(exc))
            return
        await send_json(send, 200, body)

    async def _batch(self, scope: Any, receive: Any, send: Any) -> None:
        raw = await read_body(receive)
        if raw is None:
            return
        host = next((v for k, v in scope["headers"] if k == b"host"), b"127.0.0.1")
        try:
            calls = toolcalls.parse_batch(raw)
            results = await toolcalls.batch(self.registry, self.lanes, calls, self.peers, host)
        except Exception as exc:  # noqa: BLE001
            await send_json(send, *toolcalls.error_answer(exc))
            return
        await send_json(send, 200, toolcalls.encode({"results": results}))
