"""A lean HTTP/1.1 load generator for the serve benchmark.

httpx and the MCP client spend more CPU per request than a tuned server does,
and on a small machine the load generator shares the cores with the server, so
the benchmark would measure its own client. This one writes a request with
asyncio streams on a kept-alive connection and reads a Content-Length answer,
nothing more (the server under test never answers any other way on these
routes; anything else raises).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any


class ProtocolError(RuntimeError):
    pass


class Connection:
    """One kept-alive connection; one request at a time."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._host_header = f"{host}:{port}".encode()

    async def open(self) -> "Connection":
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, bytes]:
        if self._writer is None:
            await self.open()
        head = [f"{method} {path} HTTP/1.1".encode(), b"host: " + self._host_header,
                b"content-length: " + str(len(body)).encode()]
        if body:
            head.append(b"content-type: application/json")
        head.extend(f"{k}: {v}".encode() for k, v in headers)
        self._writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        raw = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        length = None
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        if length is None:
            raise ProtocolError(f"answer without content-length to {method} {path} (status {status})")
        return status, await self._reader.readexactly(length)

    async def json(self, method: str, path: str, payload: Any = None,
                   headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, Any]:
        body = b"" if payload is None else json.dumps(payload).encode()
        status, answer = await self.request(method, path, body, headers)
        return status, json.loads(answer) if answer else None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (ConnectionError, OSError):
                pass
            self._writer = self._reader = None


MCP_HEADERS = (("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-11-25"))


class McpEpisode:
    """The JSON-RPC posts an MCP client sends an episode's endpoint, over one kept-alive connection."""

    def __init__(self, connection: Connection, path: str):
        self.connection, self.path, self._ids = connection, path, 0

    async def rpc(self, method: str, params: dict | None = None, notify: bool = False) -> tuple[int, Any]:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        if not notify:
            self._ids += 1
            message["id"] = self._ids
        return await self.connection.json("POST", self.path, message, MCP_HEADERS)

    async def initialize(self) -> None:
        status, answer = await self.rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                       "clientInfo": {"name": "bench", "version": "1"}})
        if status != 200 or "result" not in answer:
            raise ProtocolError(f"initialize failed: {status} {answer}")
        await self.rpc("notifications/initialized", notify=True)

    async def call_tool(self, name: str, arguments: dict) -> tuple[int, Any]:
        return await self.rpc("tools/call", {"name": name, "arguments": arguments})
