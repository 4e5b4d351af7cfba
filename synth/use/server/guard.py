"""ASGI guards in front of every route of `synth serve` (REST and MCP alike).

- Host and Origin checks (DNS rebinding: a web page the operator visits must not
  be able to create episodes or call tools on a local server). By default only
  loopback names are accepted; `--allowed-host` / `--allowed-origin` widen it
  for remote serving, `*` switches a check off. A request without Origin (every
  non-browser client) passes the Origin check.
- A request body limit: over it the answer is 413 before the body is read whole.

Patterns follow the MCP SDK's TransportSecuritySettings ("host:*" = any port),
so the MCP transport is configured with the same lists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def loopback_hosts() -> list[str]:
    return [h for name in LOOPBACK_HOSTS for h in (name, f"{name}:*")]


def loopback_origins() -> list[str]:
    return [f"{scheme}://{name}{port}" for scheme in ("http", "https") for name in LOOPBACK_HOSTS
            for port in ("", ":*")]


@dataclass
class ServerGuards:
    allowed_hosts: list[str] = field(default_factory=loopback_hosts)
    allowed_origins: list[str] = field(default_factory=loopback_origins)
    max_body_bytes: int = 8 << 20


def matches(value: str, patterns: list[str]) -> bool:
    """SDK semantics: exact match, or "base:*" for base with any port; "*" matches all."""
    for pattern in patterns:
        if pattern == "*" or value == pattern:
            return True
        if pattern.endswith(":*") and value.startswith(pattern[:-2] + ":"):
            return True
    return False


async def _answer(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    def __init__(self, app: Any, guards: ServerGuards):
        self.app, self.guards = app, guards

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host = headers.get("host", "")
        if not matches(host, self.guards.allowed_hosts):
            await _answer(send, 421, f"Host {host[:100]!r} is not served here; start `synth serve` with "
                                     "--allowed-host NAME:* to accept it")
            return
        origin = headers.get("origin")
        if origin is not None and not matches(origin, self.guards.allowed_origins):
            await _answer(send, 403, f"Origin {origin[:100]!r} is not allowed; start `synth serve` with "
                                     "--allowed-origin to accept it")
            return
        limit = self.guards.max_body_bytes
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _answer(send, 413, f"request body of {int(declared):,} bytes; the limit is {limit:,} "
                                     "(--max-body-bytes)")
            return
        if scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        # Read the body here, up to the limit, then hand it on: over the limit nothing
        # else has run yet, so the answer can still be a clean 413.
        chunks, received, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            received += len(chunks[-1])
            more = message.get("more_body", False)
            if received > limit:
                await _answer(send, 413, f"request body over the limit of {limit:,} bytes (--max-body-bytes)")
                return
        replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> Any:
            return replay.pop() if replay else await receive()

        await self.app(scope, replayed, send)
