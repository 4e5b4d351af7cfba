"""Request checks for the viewer (ASGI middleware).

- Host: a request must name a host the viewer answers to, so a web page cannot
  reach it through a DNS name rebound to its address: loopback names when it
  listens on loopback; off loopback also literal IP addresses (a rebinding attack
  needs a name), the address it listens on and the names given with
  `--allowed-host`.
- Token: off loopback, anyone on the network could otherwise approve or reject
  envs or run their code, so every request must carry the token `synth view`
  printed at start: in the URL once (`?token=...`), after which it is kept in a
  cookie (HttpOnly, SameSite=Strict) and the URL is shown without it.
- Origin: a state-changing request (anything but GET/HEAD/OPTIONS: approve,
  reject, replay, Try-it calls) from a browser must come from the viewer's own
  origin; a cross-site form or fetch is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
WILDCARDS = {"0.0.0.0", "::", ""}


def _hostname(host: str) -> str:
    try:
        return (urlsplit(f"//{host}").hostname or "").lower()
    except ValueError:
        return ""


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def is_loopback(bind_host: str) -> bool:
    name = bind_host.strip("[]").lower()
    return name == "localhost" or (_is_ip(name) and ipaddress.ip_address(name).is_loopback)


def new_token() -> str:
    return secrets.token_urlsafe(24)


class LocalGuard:
    """`token` is required when the viewer listens off loopback (create_app makes one)."""

    def __init__(self, app: Any, bind_host: str, token: str | None = None, allowed_hosts: list[str] | tuple = ()):
        self.app = app
        bind = bind_host.strip("[]").lower()
        self.remote = not is_loopback(bind)
        self.allowed = LOOPBACK | ({bind} - WILDCARDS) | {h.strip("[]").lower() for h in allowed_hosts}
        if self.remote and not token:
            raise ValueError("a viewer that listens off loopback needs a token")
        self.token = token if self.remote else None
        # A cookie per token: two viewers on one machine do not overwrite each other's.
        self.cookie = "synth_view_" + hashlib.sha256((token or "").encode()).hexdigest()[:10]

    def host_refusal(self, host: str) -> str | None:
        name = _hostname(host)
        if name in self.allowed or (self.remote and _is_ip(name)):
            return None
        hint = f"; pass --allowed-host {name} if that is this machine's name" if self.remote and name else ""
        return f"host {host!r} is not allowed: open the viewer at http://127.0.0.1 (or the --host it listens on){hint}"

    def _token_given(self, headers: dict[str, str], query: str) -> tuple[bool, bool]:
        """(the request carries the token, it came in the URL)."""
        for key, value in parse_qsl(query, keep_blank_values=True):
            if key == "token" and hmac.compare_digest(value.encode(), self.token.encode()):
                return True, True
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie and hmac.compare_digest(value.encode(), self.token.encode()):
                return True, False
        return False, False

    def refusal(self, method: str, headers: dict[str, str]) -> str | None:
        host = headers.get("host", "")
        refused = self.host_refusal(host)
        if refused or method in SAFE_METHODS:
            return refused
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
        method = scope.get("method", "GET")
        reason = self.refusal(method, headers)
        if reason is not None:
            await _plain(send, 403, f"forbidden: {reason}\n")
            return
        if self.token is not None:
            query = scope.get("query_string", b"").decode("latin-1")
            given, in_url = self._token_given(headers, query)
            if not given:
                await _plain(send, 401, "a token is required: open the URL `synth view` printed when it started "
                             "(it ends in ?token=...)\n")
                return
            if in_url and method in ("GET", "HEAD"):  # keep it in a cookie, show the URL without it
                rest = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "token"])
                where = scope.get("path", "/") + (f"?{rest}" if rest else "")
                cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                await _plain(send, 303, "", [(b"location", where.encode("latin-1")),
                                             (b"set-cookie", cookie.encode("latin-1"))])
                return
        await self.app(scope, receive, send)


async def _plain(send: Any, status: int, text: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
