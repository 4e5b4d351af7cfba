"""A streaming front for the fake model server.

Some clients only stream (verifiers' chat harness asks for `stream=true` with
`stream_options.include_usage`); the fake server answers whole completions. This
relay forwards each request without the streaming fields and replays the answer
as OpenAI chat-completion chunks (server-sent events), the way OpenAI streams:
a role/content chunk, one chunk per tool call, a finish chunk, a usage chunk and
`data: [DONE]`. Anything else is forwarded unchanged. It binds 127.0.0.1 only.

    with SseRelay(fake.openai_base_url) as relay:
        client = OpenAI(base_url=relay.base_url, api_key="test")
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def completion_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat.completion as the chunks OpenAI would have streamed."""
    base = {"id": completion["id"], "object": "chat.completion.chunk", "created": completion["created"],
            "model": completion["model"]}
    chunks = []
    for choice in completion["choices"]:
        message, index = choice["message"], choice["index"]
        chunks.append({**base, "choices": [{"index": index, "finish_reason": None, "delta": {
            "role": "assistant", "content": message.get("content") or ""}}]})
        for i, call in enumerate(message.get("tool_calls") or []):
            delta = {"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"],
                                                  "arguments": call["function"]["arguments"]}}]}
            chunks.append({**base, "choices": [{"index": index, "finish_reason": None, "delta": delta}]})
        chunks.append({**base, "choices": [{"index": index, "finish_reason": choice["finish_reason"], "delta": {}}]})
    chunks.append({**base, "choices": [], "usage": completion.get("usage")})
    return chunks


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def do_GET(self) -> None:
        self._forward(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._forward(self.rfile.read(length) if length else b"")

    def _forward(self, raw: bytes | None) -> None:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        streaming = isinstance(body, dict) and bool(body.get("stream"))
        if streaming:
            body = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
            raw = json.dumps(body).encode()
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "accept-encoding", "connection")}
        url = self.server.upstream + self.path
        with httpx.Client(timeout=120) as client:
            if raw is None:
                response = client.get(url, headers=headers)
            else:
                response = client.post(url, content=raw, headers=headers)
        self.server.requests.append(body)
        if not streaming or response.status_code != 200:
            self._send(response.status_code, response.content, response.headers.get("content-type", "application/json"))
            return
        events = "".join(f"data: {json.dumps(c)}\n\n" for c in completion_chunks(response.json()))
        self._send(200, (events + "data: [DONE]\n\n").encode(), "text/event-stream")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    upstream: str
    requests: list[Any]


class SseRelay:
    """Started on enter, on 127.0.0.1:<free port>; `base_url` ends in /v1 like the upstream's."""

    def __init__(self, upstream_base_url: str) -> None:
        root = upstream_base_url.rstrip("/")
        self._prefix = "/v1" if root.endswith("/v1") else ""
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.upstream = root[: -len(self._prefix)] if self._prefix else root
        self._server.requests = []
        self._thread = threading.Thread(target=self._server.serve_forever, name="sse-relay", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._prefix}"

    @property
    def requests(self) -> list[Any]:
        return self._server.requests

    def __enter__(self) -> "SseRelay":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)
