"""A real HTTP model server for tests, answering from a :class:`Script`.

It speaks the OpenAI chat-completions and Anthropic messages wire formats, so
the official SDKs are exercised for real, and injects the faults a real API
shows (429/503 with Retry-After, 500, 400, 401, timeouts, dropped sockets).
It binds 127.0.0.1 only. ``stream=true`` is refused with a loud 400.

Like a real API it stops an answer at the request's ``max_tokens`` (and at
``output_cap``, the model's own limit, when set), reporting finish_reason
"length" / stop_reason "max_tokens"; and it simulates provider prompt caching
in the usage it reports: OpenAI-style automatic prefix caching
(``prompt_tokens_details.cached_tokens`` for a prefix of at least 1024 tokens
already seen, in 128-token steps) and Anthropic-style caching up to a
``cache_control`` breakpoint (``cache_creation_input_tokens`` the first time,
``cache_read_input_tokens`` after).

    with FakeModelServer(script) as fake:
        client = OpenAI(base_url=fake.openai_base_url, api_key="test")
"""

from __future__ import annotations

import itertools
import json
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from synth.llm.script import (
    STAGE_HEADER, SUBJECT_HEADER, Reply, RequestInfo, Script, ToolCall, approx_tokens, cap_text,
)

MODEL_IDS = ["fake-model", "fake-model-large"]
CACHE_MIN_TOKENS = 1024  # the shortest prefix a provider caches
CACHE_STEP = 128  # OpenAI reports cached prefixes in steps of this many tokens

# (OpenAI error type, OpenAI code, Anthropic error type) per status code.
_ERRORS = {
    400: ("invalid_request_error", None, "invalid_request_error"),
    401: ("invalid_request_error", "invalid_api_key", "authentication_error"),
    404: ("invalid_request_error", "unknown_url", "not_found_error"),
    429: ("requests", "rate_limit_exceeded", "rate_limit_error"),
    500: ("server_error", None, "api_error"),
    503: ("server_error", "service_unavailable", "overloaded_error"),
}


@dataclass
class LoggedRequest:
    api: str  # "openai" | "anthropic": the wire format answered in
    method: str
    path: str
    stage: str
    subject: str
    body: Any
    headers: dict[str, str]
    time: float  # time.monotonic() on arrival, to measure gaps between retries
    status: int | None = None  # None: the socket was dropped without an answer
    reply: Reply | None = field(default=None, repr=False)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops SYNs under a burst of 20 clients
    fake: FakeModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (timeouts, drops) is expected; anything else is a bug.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like a real API
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.fake._track(self.connection, add=False)

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    # -- plumbing ------------------------------------------------------------

    def _dispatch(self) -> None:
        fake = self.server.fake
        path = urlsplit(self.path).path.rstrip("/")
        # Which wire format to answer in (errors included): the SDK's header tells.
        api = "anthropic" if path == "/v1/messages" or "anthropic-version" in self.headers else "openai"
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            body = raw.decode("utf-8", "replace")
        self.entry = LoggedRequest(
            api=api, method=self.command, path=path,
            stage=unquote(self.headers.get(STAGE_HEADER, "")),
            subject=unquote(self.headers.get(SUBJECT_HEADER, "")),
            body=body, headers={k.lower(): v for k, v in self.headers.items()}, time=time.monotonic())
        fake._enter(self.entry)
        try:
            self._route(api, path, body)
        except OSError:
            self.close_connection = True  # the client went away mid-answer
        except Exception as e:  # a bug here or in a test's handler: make it loud
            fake.errors.append(e)
            self._error(api, 500, f"fake server: {type(e).__name__}: {e}\n{traceback.format_exc()}",
                        no_retry=True)
        finally:
            fake._leave()

    def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.entry.status = status  # before the bytes leave, so the log is ready first
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, api: str, status: int, message: str, retry_after: float | None = None,
               no_retry: bool = False) -> None:
        oa_type, oa_code, an_type = _ERRORS.get(status, _ERRORS[500])
        if api == "anthropic":
            payload: dict[str, Any] = {"type": "error", "error": {"type": an_type, "message": message}}
        else:
            payload = {"error": {"message": message, "type": oa_type, "param": None, "code": oa_code}}
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        if no_retry:  # both SDKs honour this; a missing fixture should fail at once
            headers["x-should-retry"] = "false"
        self._send(status, payload, headers)

    # -- endpoints -----------------------------------------------------------

    def _route(self, api: str, path: str, body: Any) -> None:
        if self.command == "GET" and path in ("/v1/models", "/models"):
            return self._send(200, _model_list(api))
        expected = ("/v1/messages",) if api == "anthropic" else ("/v1/chat/completions", "/chat/completions")
        if self.command != "POST" or path not in expected:
            return self._error(api, 404, f"fake server: no endpoint {self.command} {path}")
        if not isinstance(body, dict):
            return self._error(api, 400, "fake server: request body is not a JSON object")
        if body.get("stream"):
            return self._error(api, 400, "fake server: stream=true is not supported", no_retry=True)
        try:
            make = RequestInfo.from_anthropic if api == "anthropic" else RequestInfo.from_openai
            info = make(body, self.entry.stage, self.entry.subject)
        except (KeyError, TypeError, AttributeError) as e:
            return self._error(api, 400, f"fake server: malformed request: {e!r}")
        fake = self.server.fake
        n = (body.get("n") or 1) if api == "openai" else 1
        replies = [fake.script.next_reply(info) for _ in range(n)]
        if any(r is None for r in replies):
            return self._error(api, 500, "fake server: no scripted reply for "
                               f"stage={info.stage!r} subject={info.subject!r}", no_retry=True)
        reply = self.entry.reply = replies[0]
        assert reply is not None
        wait = reply.sleep_seconds()
        if wait and fake._stopping.wait(wait):
            self.close_connection = True  # shutting down: abandon the answer
            return
        if reply.fault == "drop":
            self.close_connection = True  # no status line at all
            return
        if reply.fault and reply.fault != "timeout":
            status = int(reply.fault)
            return self._error(api, status, f"fake server: scripted {status} fault", reply.retry_after)
        seq = next(fake._ids)
        cap = fake.output_cap_for(body, api)
        if api == "anthropic":
            return self._send(200, _anthropic_message(info, reply, seq, cap, fake.anthropic_cache(info)))
        return self._send(200, _openai_completion(info, replies, seq, cap,  # type: ignore[arg-type]
                                                  fake.openai_cache(info)))


def _prefix_text(messages: list[dict[str, Any]]) -> str:
    return "".join(f"<{m.get('role')}>{m.get('content') or ''}" for m in messages)


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of a and b (binary search on slices: C-speed comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _model_list(api: str) -> dict[str, Any]:
    if api == "anthropic":
        data = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in MODEL_IDS]
        return {"data": data, "has_more": False, "first_id": MODEL_IDS[0], "last_id": MODEL_IDS[-1]}
    return {"object": "list",
            "data": [{"id": m, "object": "model", "created": 0, "owned_by": "synth"} for m in MODEL_IDS]}


def _calls_text(calls: list[ToolCall]) -> str:
    return json.dumps([{"name": c.name, "arguments": c.arguments} for c in calls]) if calls else ""


def _usage(info: RequestInfo, reply: Reply, answer: str) -> tuple[int, int]:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else approx_tokens(info.prompt_text)
    completion = (reply.completion_tokens if reply.completion_tokens is not None
                  else approx_tokens(answer))
    return prompt, completion


def _openai_completion(info: RequestInfo, replies: list[Reply], seq: int, cap: int | None = None,
                       cached: int = 0) -> dict[str, Any]:
    choices, prompt, completion = [], 0, 0
    for index, reply in enumerate(replies):
        text, calls = reply.content_text(), reply.tool_calls or []
        cut = False
        if text is not None:
            text, cut = cap_text(text, cap)
        message: dict[str, Any] = {"role": "assistant", "refusal": None,
                                   "content": text if text is not None or not calls else None}
        if message["content"] is None and not calls:
            message["content"] = ""
        if calls:
            message["tool_calls"] = [
                {"id": c.id or f"call_{seq}_{index}_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for i, c in enumerate(calls)]
        finish = "length" if reply.truncated or cut else "tool_calls" if calls else "stop"
        choices.append({"index": index, "message": message, "finish_reason": finish, "logprobs": None})
        prompt, c = _usage(info, reply, (text or "") + _calls_text(calls))
        completion += c
    return {"id": f"chatcmpl-fake{seq}", "object": "chat.completion", "created": int(time.time()),
            "model": info.model, "choices": choices, "system_fingerprint": None,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion,
                      "prompt_tokens_details": {"cached_tokens": min(cached, prompt)}}}


def _anthropic_message(info: RequestInfo, reply: Reply, seq: int, cap: int | None = None,
                       cache: tuple[int, int] = (0, 0)) -> dict[str, Any]:
    text, calls = reply.content_text(), list(reply.tool_calls or [])
    cut = False
    if text is not None:
        text, cut = cap_text(text, cap)
    choice = info.body.get("tool_choice") or {}
    if choice.get("type") == "tool" and not calls and text is not None:
        # Forced tool use is how synth asks Anthropic for structured output: an
        # object becomes the tool's input; anything else stays visible as text.
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            calls, text = [ToolCall(name=choice["name"], arguments=obj)], None
    content: list[dict[str, Any]] = []
    if text is not None or not calls:
        content.append({"type": "text", "text": text or ""})
    content += [{"type": "tool_use", "id": c.id or f"toolu_fake{seq}_{i}", "name": c.name,
                 "input": c.arguments} for i, c in enumerate(calls)]
    stop = "max_tokens" if reply.truncated or cut else "tool_use" if calls else "end_turn"
    prompt, completion = _usage(info, reply, (text or "") + _calls_text(calls))
    read, written = (min(n, prompt) for n in cache)
    written = min(written, prompt - read)
    return {"id": f"msg_fake{seq}", "type": "message", "role": "assistant", "model": info.model,
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": prompt - read - written, "output_tokens": completion,
                      "cache_read_input_tokens": read, "cache_creation_input_tokens": written}}


class FakeModelServer:
    """A started-on-enter fake OpenAI + Anthropic server on 127.0.0.1:<random port>."""

    def __init__(self, script: Script | None = None, *, output_cap: int | None = None) -> None:
        self.script = script if script is not None else Script()
        self.output_cap = output_cap  # the model's own output limit (None: only the request's max_tokens)
        self._seen_openai: list[str] = []  # prompts seen, for simulated prefix caching
        self._seen_anthropic: set[str] = set()  # cache_control prefixes written
        self.errors: list[Exception] = []  # exceptions raised while answering
        self._log: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._in_flight = self._max_in_flight = 0
        self._ids = itertools.count(1)
        self._conns: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> FakeModelServer:
        if self._httpd is not None:
            raise RuntimeError("FakeModelServer already started")
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)  # listening from here on
        self._httpd.fake = self
        ready = threading.Event()

        def serve() -> None:
            ready.set()
            self._httpd.serve_forever(poll_interval=0.05)  # type: ignore[union-attr]

        self._thread = threading.Thread(target=serve, name="fake-model-server", daemon=True)
        self._thread.start()
        if not ready.wait(5):
            raise RuntimeError("fake model server thread did not start")
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping on a delay or timeout fault
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # unblock keep-alive connections waiting for a next request
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeModelServer is not started")
        return self._httpd.server_address[1]

    @property
    def openai_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[LoggedRequest]:
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    @property
    def max_in_flight(self) -> int:
        """Peak number of requests being handled at the same time."""
        return self._max_in_flight

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- output cap and prompt caching, as a provider applies them -------------

    def output_cap_for(self, body: dict[str, Any], api: str) -> int | None:
        asked = body.get("max_tokens") if api == "anthropic" else (
            body.get("max_completion_tokens") or body.get("max_tokens"))
        caps = [c for c in (asked, self.output_cap) if isinstance(c, int)]
        return min(caps) if caps else None

    def openai_cache(self, info: RequestInfo) -> int:
        """Tokens of the longest prefix this prompt shares with an earlier one (automatic prefix caching)."""
        text = _prefix_text(info.messages)
        with self._lock:
            best = max((_common_prefix(text, seen) for seen in self._seen_openai), default=0)
            self._seen_openai.append(text)
        tokens = best // 4
        return 0 if tokens < CACHE_MIN_TOKENS else tokens - tokens % CACHE_STEP

    def anthropic_cache(self, info: RequestInfo) -> tuple[int, int]:
        """(cache read, cache write) tokens: the tools and system blocks up to a cache_control breakpoint."""
        system = info.body.get("system")
        if not isinstance(system, list) or not any(isinstance(b, dict) and b.get("cache_control") for b in system):
            return 0, 0
        text = "".join(b.get("text", "") for b in system if isinstance(b, dict))
        tokens = approx_tokens(text)
        if tokens < CACHE_MIN_TOKENS:
            return 0, 0
        key = json.dumps(info.body.get("tools") or [], sort_keys=True) + "\x00" + text
        with self._lock:
            if key in self._seen_anthropic:
                return tokens, 0
            self._seen_anthropic.add(key)
        return 0, tokens

    def reset_counters(self) -> None:
        """Clear the request log, errors and peak in-flight, and rewind the script."""
        with self._lock:
            self._log.clear()
            self._max_in_flight = self._in_flight
        self.errors.clear()
        self.script.reset()

    def _enter(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._log.append(entry)
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)
