"""Local-tool request checks for the viewer (ASGI middleware).

- Host: when the viewer listens on a loopback address, a request must name a
  loopback host (127.0.0.1, localhost, ::1), so a web page cannot reach it
  through a DNS name rebound to 127.0.0.1.
- Origin: a state-changing request (anything but GET/HEAD/OPTIONS: approve,
  reject, replay, Try-it calls) from a browser must come from the viewer's own
  origin; a cross-site form or fetch is refused.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def _hostname(host: str) -> str:
    return (urlsplit(f"//{host}").hostname or "").lower()


class LocalGuard:
    def __init__(self, app: Any, bind_host: str):
        self.app = app
        bind = bind_host.strip("[]").lower()
        self.any_host = bind in ("0.0.0.0", "::", "")
        self.allowed = LOOPBACK | {bind}

    def refusal(self, method: str, headers: dict[str, str]) -> str | None:
        host = headers.get("host", "")
        if not self.any_host and _hostname(host) not in self.allowed:
            return f"host {host!r} is not allowed: open the viewer at http://127.0.0.1 (or the --host it listens on)"
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            if origin == "null" or parts.netloc.lower() != host.lower():
                return f"cross-origin request from {origin} refused"
        elif headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
            return "cross-site request refused"
        return None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        reason = self.refusal(scope.get("method", "GET"), headers)
        if reason is None:
            await self.app(scope, receive, send)
            return
        body = f"forbidden: {reason}\n".encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
