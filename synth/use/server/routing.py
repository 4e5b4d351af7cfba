"""Several server processes behind one port: `synth serve --workers N`.

The processes share nothing but the env folders: each loads the envs, runs its
own sandbox workers and keeps its own episodes. The kernel hands each new
connection to one of them, and a kept-alive connection carries requests for
any episode, so every request is routed to the process that owns its episode:

- An episode id names its owner: "p<index>-<random>" (EpisodeRegistry.id_prefix).
- OwnerRouter, in front of every route but behind the Host/Origin guard,
  forwards a request for another process's episode over that process's Unix
  socket (each process listens on the public port and on its own socket) and
  streams the answer back, MCP GET streams included.
- A batch is split by owner: each process runs its part, the answers are put
  back in order (toolcalls.batch).
- A new episode is opened by the process that got the request; when that one
  answers 503 (at its share of --max-episodes), the next process with room opens it.
- OpenEnv's HTTP MCP (POST /openenv/<env_id>/mcp) names its session, an episode id,
  in the JSON-RPC params.session_id: routed by its prefix; `openenv/session/create`
  is opened like a REST episode (on to the next process when this one is full). An
  OpenEnv WebSocket session stays on its connection's process.
- An ORS session is named by the client's X-Session-ID, which says nothing about
  a process: its requests (create, and every later one) go to the process the id
  picks (ors_owner), so a session counts against that process's share of the cap.
- /health, /envs, the docs and every face's descriptions (tasks, tools, schema)
  are answered by whichever process gets them.
A new protocol face whose requests name their episode somewhere else needs its
rule in OwnerRouter.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from dataclasses import dataclass
from typing import Any

import h11

from synth.use.server.fastlane import read_body, replaying, send_json
from synth.use.server.toolcalls import encode

_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"content-length",
               b"proxy-connection"}
NO_SPILL = b"x-synth-no-spill"  # a creation passed on because its first process was full: open it here or 503


@dataclass(frozen=True)
class Process:
    """This server process's place among all of them."""

    index: int
    count: int
    sockets: tuple[str, ...]  # the Unix socket of every process, by index

    @property
    def id_prefix(self) -> str:
        return f"p{self.index}-"

    def peers(self) -> "Peers":
        return Peers(self)


def owner_of(episode_id: str, count: int) -> int | None:
    """The index of the process that owns an episode id, None when the id names none."""
    head, sep, _ = episode_id.partition("-")
    if sep and head[:1] == "p" and head[1:].isdigit():
        index = int(head[1:])
        return index if index < count else None
    return None


ORS_SESSION_ROUTES = {"create", "delete", "delete_session", "ping", "task_tools", "prompt", "messages", "call"}
OPENENV_CREATE = "openenv/session/create"


def ors_session(scope: Any) -> bytes | None:
    """The X-Session-ID of an ORS request that works on a session (/call, /<env_id>/call, ...)."""
    parts = scope["path"].strip("/").split("/")
    if len(parts) > 2 or parts[-1] not in ORS_SESSION_ROUTES:
        return None
    sid = next((v.strip() for k, v in scope["headers"] if k == b"x-session-id"), b"")
    return sid or None


def ors_owner(session_id: bytes, count: int) -> int:
    """The process that holds an ORS session: every process computes the same from the id alone."""
    return zlib.crc32(session_id) % count


def openenv_mcp(scope: Any) -> bool:
    parts = scope["path"].split("/")  # "", "openenv", env_id, "mcp"
    return scope["method"] == "POST" and len(parts) == 4 and parts[1] == "openenv" and parts[3] == "mcp"


def rpc_target(body: bytes) -> tuple[Any, str | None]:
    """A JSON-RPC request's method and params.session_id (None, None when it is not one)."""
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    params = request.get("params") if isinstance(request, dict) else None
    session = params.get("session_id") if isinstance(params, dict) else None
    return request.get("method") if isinstance(request, dict) else None, session if isinstance(session, str) else None


def _rest_full(status: int, body: bytes) -> bool:
    return status == 503


def _openenv_full(status: int, body: bytes) -> bool:
    from synth.use.server.openenv_face import CAPACITY

    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and isinstance(error.get("data"), dict) and error["data"].get("code") == CAPACITY


class PeerDown(Exception):
    pass


class _Upstream:
    """One kept-alive HTTP/1.1 connection to a peer's Unix socket."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.http = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0

    async def next_event(self) -> Any:
        while True:
            event = self.http.next_event()
            if event is h11.NEED_DATA:
                self.http.receive_data(await self.reader.read(1 << 16))
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionResetError("the server process closed the connection")
            else:
                return event

    def reusable(self) -> bool:
        if self.http.our_state is h11.DONE and self.http.their_state is h11.DONE:
            self.http.start_next_cycle()
            return True
        return False

    def close(self) -> None:
        self.writer.close()


_BROKEN = (OSError, EOFError, h11.ProtocolError)
_IDLE_SECONDS = 3.0  # a peer drops a connection idle for 5 s (uvicorn's keep-alive); never reuse one near that


class Peers:
    """Forwarding to the other processes, over a few kept-alive connections each."""

    def __init__(self, process: Process):
        self.process, self.index = process, process.index
        self._idle: dict[int, list[_Upstream]] = {i: [] for i in range(process.count)}

    def owner(self, episode_id: str) -> int | None:
        return owner_of(episode_id, self.process.count)

    async def _open(self, owner: int, method: str, target: bytes, headers: list,
                    body: bytes) -> tuple[_Upstream, Any]:
        """Send a request and read its answer's head. A kept-alive connection the peer closed
        meanwhile fails before any answer: the request is sent again on a new one."""
        request = h11.Request(method=method, target=target,
                              headers=[*headers, (b"content-length", str(len(body)).encode())])
        idle, now = self._idle[owner], time.monotonic()
        while True:
            upstream = idle.pop() if idle else None
            if upstream is not None and (now - upstream.idle_since > _IDLE_SECONDS or upstream.reader.at_eof()):
                upstream.close()
                continue
            if upstream is None:
                try:
                    upstream = _Upstream(*await asyncio.open_unix_connection(self.process.sockets[owner]))
                except OSError as exc:
                    raise PeerDown(f"server process {owner} is not running ({exc.strerror or exc}); the "
                                   "episodes it held are lost") from None
                reused = False
            else:
                reused = True
            try:
                upstream.writer.write(upstream.http.send(request) + upstream.http.send(h11.Data(data=body))
                                      + upstream.http.send(h11.EndOfMessage()))
                return upstream, await upstream.next_event()
            except _BROKEN as exc:
                upstream.close()
                if not reused:
                    raise PeerDown(f"server process {owner} broke the connection ({exc})") from None

    def _done(self, owner: int, upstream: _Upstream) -> None:
        if upstream.reusable():
            upstream.idle_since = time.monotonic()
            self._idle[owner].append(upstream)
        else:
            upstream.close()

    async def request(self, owner: int, method: str, target: bytes, headers: list,
                      body: bytes) -> tuple[int, list, bytes]:
        """One request to a peer, its answer read whole."""
        upstream, response = await self._open(owner, method, target, headers, body)
        try:
            chunks = []
            while not isinstance(event := await upstream.next_event(), h11.EndOfMessage):
                chunks.append(bytes(event.data))
        except BaseException:
            upstream.close()
            raise
        self._done(owner, upstream)
        return response.status_code, _passed_on(response.headers), b"".join(chunks)

    async def forward(self, owner: int, scope: Any, body: bytes, receive: Any, send: Any) -> None:
        """Pass a request to its owner and stream the answer back as it comes."""
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP]
        try:
            upstream, response = await self._open(owner, scope["method"], target, headers, body)
        except PeerDown as exc:
            await send_json(send, 503, encode({"detail": str(exc)}))
            return
        watcher = asyncio.ensure_future(_disconnected(receive)) if scope["method"] == "GET" else None
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": _passed_on(response.headers, keep_length=True)})
            pump = asyncio.ensure_future(self._pump(upstream, send))
            await asyncio.wait({pump} if watcher is None else {pump, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not pump.done():  # the client went away from a stream
                pump.cancel()
                upstream.close()
                return
            pump.result()
        except BaseException:
            upstream.close()
            raise
        finally:
            if watcher is not None:
                watcher.cancel()
        self._done(owner, upstream)

    async def _pump(self, upstream: _Upstream, send: Any) -> None:
        while True:
            event = await upstream.next_event()
            if isinstance(event, h11.EndOfMessage):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": bytes(event.data), "more_body": True})

    async def batch(self, owner: int, calls: list[dict[str, Any]], host: bytes) -> list[dict[str, Any]]:
        try:
            status, _, body = await self.request(owner, "POST", b"/batch", [
                (b"host", host), (b"content-type", b"application/json")], encode({"calls": calls}))
        except PeerDown as exc:
            return [{"ok": False, "error": str(exc), "status": 503}] * len(calls)
        if status != 200:
            detail = json.loads(body).get("detail", body.decode(errors="replace"))
            return [{"ok": False, "error": f"server process {owner}: {detail}", "status": status}] * len(calls)
        return json.loads(body)["results"]

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                idle.pop().close()


def _passed_on(headers: list, keep_length: bool = False) -> list:
    return [(k, v) for k, v in headers
            if k not in _HOP_BY_HOP or (keep_length and k == b"content-length")]


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class OwnerRouter:
    """ASGI middleware: each request goes to the process that owns its episode."""

    def __init__(self, app: Any, peers: Peers):
        self.app, self.peers = app, peers

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            spilled = any(k == NO_SPILL for k, _ in scope["headers"])
            if path.startswith("/episodes/"):
                if await self._to_owner(self.peers.owner(path.split("/", 3)[2]), scope, receive, send):
                    return
            elif (scope["method"] == "POST" and path.startswith("/envs/") and path.endswith("/episodes")
                  and not spilled):
                body = await read_body(receive)
                if body is not None:
                    await self._open_where_room(scope, body, receive, send, _rest_full)
                return
            elif openenv_mcp(scope):
                await self._openenv(scope, receive, send, spilled)
                return
            elif (session := ors_session(scope)) is not None:
                if await self._to_owner(ors_owner(session, self.peers.process.count), scope, receive, send):
                    return
        await self.app(scope, receive, send)

    async def _to_owner(self, owner: int | None, scope: Any, receive: Any, send: Any) -> bool:
        """Pass the request to `owner` when that is another process (True: it was answered)."""
        if owner is None or owner == self.peers.index:
            return False
        body = await read_body(receive)
        if body is not None:
            await self.peers.forward(owner, scope, body, receive, send)
        return True

    async def _openenv(self, scope: Any, receive: Any, send: Any, spilled: bool) -> None:
        """OpenEnv's HTTP MCP: the session's owner answers; a new session opens where there is room."""
        body = await read_body(receive)
        if body is None:
            return
        method, session = rpc_target(body)
        if method == OPENENV_CREATE and not spilled:
            await self._open_where_room(scope, body, receive, send, _openenv_full)
            return
        owner = self.peers.owner(session) if session is not None else None
        if owner is not None and owner != self.peers.index:
            await self.peers.forward(owner, scope, body, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)

    async def _open_where_room(self, scope: Any, body: bytes, receive: Any, send: Any, full: Any) -> None:
        """Open the episode here; when this process answers that it is `full` (at its share of the
        cap, its sandbox workers busy), the next process that can open it does."""
        held: list[dict[str, Any]] = []

        async def hold(message: dict[str, Any]) -> None:
            held.append(message)

        await self.app(scope, replaying(body, receive), hold)
        if held and full(held[0].get("status"), b"".join(m.get("body", b"") for m in held[1:])):
            count = self.peers.process.count
            headers = [(k, v) for k, v in scope["headers"] if k.lower() not in _HOP_BY_HOP] + [(NO_SPILL, b"1")]
            for step in range(1, count):
                owner = (self.peers.index + step) % count
                try:
                    status, answer_headers, answer = await self.peers.request(
                        owner, "POST", scope["path"].encode(), headers, body)
                except PeerDown:
                    continue
                if not full(status, answer):
                    await send({"type": "http.response.start", "status": status,
                                "headers": [*answer_headers, (b"content-length", str(len(answer)).encode())]})
                    await send({"type": "http.response.body", "body": answer})
                    return
        for message in held:  # this process's own answer (full too when no process had room)
            await send(message)
