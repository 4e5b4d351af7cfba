"""Which MCP posts may skip the SDK's transport.

In stateless JSON mode the SDK builds, for every POST, a transport, a task
group, memory streams, a dispatcher and a session, and validates the message
with pydantic: several times the cost of the sandboxed tool call it carries.
A rollout's posts are nearly all plain `tools/call` requests, so EpisodeMcp
answers those itself, with the same handler and the same serialization, and
gives everything else to the SDK: other methods, notifications, batches,
`_meta`, unknown protocol versions, and every request the SDK would refuse
(wrong Accept or Content-Type, bad JSON). The tests hold both paths to the
same answers.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

try:  # mcp >= 2.3 names the versions its initialize-handshake transport serves
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as _VERSIONS
except ImportError:  # older SDKs: every supported version goes through that transport
    from mcp.types import SUPPORTED_PROTOCOL_VERSIONS as _VERSIONS

_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
_PARAM_KEYS = frozenset({"name", "arguments"})


def _header(scope: Any, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _accepts_json(accept: str) -> bool:
    """The SDK's check_accept_headers for JSON responses (RFC 7231 wildcards)."""
    types = [part.strip().split(";")[0].strip().lower() for part in accept.split(",")]
    return any(t in ("*/*", "application/*", "application/json") for t in types)


def plain_tool_call(scope: Any, body: bytes) -> tuple[Any, str, dict[str, Any]] | None:
    """(request id, tool name, arguments) of a POST the fast path answers exactly as the SDK
    would, or None: the SDK takes it."""
    content_type = (_header(scope, b"content-type") or "").lower()
    if content_type.split(";")[0].strip() != "application/json":
        return None
    if not _accepts_json(_header(scope, b"accept") or ""):
        return None
    if _header(scope, b"mcp-protocol-version") not in _VERSIONS:
        return None
    try:
        message = pydantic_core.from_json(body)  # the SDK's parser: the same JSON accepted
    except ValueError:
        return None
    if not (isinstance(message, dict) and message.keys() == _REQUEST_KEYS and message["jsonrpc"] == "2.0"
            and message["method"] == "tools/call"):
        return None
    request_id, params = message["id"], message["params"]
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None
    if not (isinstance(params, dict) and params.keys() <= _PARAM_KEYS and isinstance(params.get("name"), str)):
        return None
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return None
    return request_id, params["name"], arguments or {}
