"""OpenAI (and any OpenAI-compatible server) and Anthropic through their official SDKs.

The SDKs' own retries are switched off (max_retries=0): the gateway owns
retries so they are classified and bounded in one place. Every SDK error is
mapped to RetryableError (429, 5xx, timeouts, connection errors) or to a
one-line ModelError naming provider, model and HTTP status.
"""

from __future__ import annotations

import asyncio
import email.utils
import inspect
import json
import os
import time
from typing import Any
from urllib.parse import quote

from synth.llm.errors import ModelError, RetryableError
from synth.llm.types import Completion, ModelSpec, Request, ToolCallOut

_HINTS = {
    401: "check the API key",
    403: "the key lacks access to this model",
    404: "check the model name and --base-url",
}


def parse_retry_after(headers: Any) -> float | None:
    """Seconds from Retry-After (seconds or HTTP date) or retry-after-ms; None if absent."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _accepts(func: Any, name: str) -> bool:
    try:
        return name in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(str(text).split())[:limit]


def classify_status(spec: ModelSpec, status: int, message: str, headers: Any, key_var: str) -> Exception:
    if status in (408, 409, 429) or status >= 500:
        return RetryableError(
            f"{spec.full}: HTTP {status}: {_one_line(message)}", status=status, retry_after=parse_retry_after(headers)
        )
    hint = _HINTS.get(status, "the request was rejected")
    if status == 401:
        hint = f"check {key_var}"
    return ModelError(f"{spec.full}: HTTP {status} from the {spec.provider} API ({hint}): {_one_line(message)}")


def _api_key(var: str, spec: ModelSpec, base_url: str | None) -> str:
    key = os.environ.get(var)
    if key:
        return key
    if base_url:  # local OpenAI-compatible servers usually ignore the key
        return "not-needed"
    raise ModelError(f"{spec.full}: {var} is not set; export it, or pass --base-url for a local server")


def _headers(request: Request) -> dict[str, str]:
    # Lets fake servers and proxies route by stage/subject; real APIs ignore them.
    # Quoted: header values must be ASCII and subjects may not be.
    return {"x-synth-stage": quote(request.stage, safe=""), "x-synth-subject": quote(request.subject[:200], safe="")}


class OpenAIProvider:
    name = "openai"

    def __init__(self, base_url: str | None = None):
        self.base_url = base_url
        self._clients: dict[int, Any] = {}  # one client per event loop (httpx clients are loop-bound)

    def _client(self, spec: ModelSpec, timeout: float):
        import openai

        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._clients:
            key = _api_key("OPENAI_API_KEY", spec, self.base_url)
            self._clients[loop_id] = openai.AsyncOpenAI(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout
            )
        return self._clients[loop_id]

    async def complete(self, spec: ModelSpec, request: Request, timeout: float) -> Completion:
        import openai

        kwargs: dict[str, Any] = {"model": spec.name, "messages": request.messages, "timeout": timeout}
        kwargs["max_tokens" if self.base_url else "max_completion_tokens"] = request.max_tokens
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name or "answer", "schema": request.schema, "strict": False},
            }
        if request.tools:
            kwargs["tools"] = request.tools
        client = self._client(spec, timeout)
        try:
            resp = await client.chat.completions.create(extra_headers=_headers(request), **kwargs)
        except openai.APITimeoutError as exc:
            raise RetryableError(f"{spec.full}: request timed out after {timeout:.0f}s") from exc
        except openai.APIConnectionError as exc:
            raise RetryableError(f"{spec.full}: connection error: {_one_line(exc)}") from exc
        except openai.APIStatusError as exc:
            raise classify_status(spec, exc.status_code, exc.message, exc.response.headers, "OPENAI_API_KEY") from exc
        if not resp.choices:
            raise RetryableError(f"{spec.full}: empty choices in response")
        choice = resp.choices[0]
        msg = choice.message
        calls = []
        for tc in msg.tool_calls or []:
            raw = tc.function.arguments or "{}"
            try:
                args: dict[str, Any] | str = json.loads(raw)
            except ValueError:
                args = raw
            calls.append(ToolCallOut(id=tc.id, name=tc.function.name, arguments=args))
        usage = resp.usage
        details = getattr(usage, "prompt_tokens_details", None)  # prefix caching (OpenAI; some servers)
        return Completion(
            text=msg.content or "",
            tool_calls=calls,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            cached_tokens=getattr(details, "cached_tokens", 0) or 0,
            cache_write_tokens=getattr(details, "cache_write_tokens", 0) or 0,
            finish_reason=choice.finish_reason or "",
            refusal=getattr(msg, "refusal", None),
        )


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI-shaped messages -> (system text, Anthropic messages)."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "system":
            system.append(m["content"])
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": str(m["content"])}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif role == "assistant" and m.get("tool_calls"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            for tc in m["tool_calls"]:
                fn = tc["function"]
                args = fn["arguments"]
                blocks.append(
                    {"type": "tool_use", "id": tc["id"], "name": fn["name"],
                     "input": json.loads(args) if isinstance(args, str) else args}
                )
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": role, "content": m["content"]})
    return "\n\n".join(system), out


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, base_url: str | None = None):
        self.base_url = base_url
        self._clients: dict[int, Any] = {}

    def _client(self, spec: ModelSpec, timeout: float):
        import anthropic

        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._clients:
            key = _api_key("ANTHROPIC_API_KEY", spec, self.base_url)
            self._clients[loop_id] = anthropic.AsyncAnthropic(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=timeout
            )
        return self._clients[loop_id]

    async def complete(self, spec: ModelSpec, request: Request, timeout: float) -> Completion:
        import anthropic

        system, messages = to_anthropic(request.messages)
        kwargs: dict[str, Any] = {
            "model": spec.name,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "timeout": timeout,
        }
        if system:
            # The system text is the env's shared context, byte-identical across its calls:
            # a cache breakpoint there lets Anthropic serve tools + system from its prompt cache.
            kwargs["system"] = [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
        client = self._client(spec, timeout)
        # anthropic>=2 has no sampling temperature; older SDKs (which users may pin) do.
        if request.temperature is not None and _accepts(client.messages.create, "temperature"):
            kwargs["temperature"] = request.temperature
        tools = [
            {"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
            for t in request.tools or []
        ]
        if request.schema is not None:  # structured output = forced use of one tool
            name = request.schema_name or "answer"
            tools.append({"name": name, "description": "Record the answer.", "input_schema": request.schema})
            kwargs["tool_choice"] = {"type": "tool", "name": name}
        if tools:
            kwargs["tools"] = tools
        try:
            resp = await client.messages.create(extra_headers=_headers(request), **kwargs)
        except anthropic.APITimeoutError as exc:
            raise RetryableError(f"{spec.full}: request timed out after {timeout:.0f}s") from exc
        except anthropic.APIConnectionError as exc:
            raise RetryableError(f"{spec.full}: connection error: {_one_line(exc)}") from exc
        except anthropic.APIStatusError as exc:
            raise classify_status(spec, exc.status_code, exc.message, exc.response.headers, "ANTHROPIC_API_KEY") from exc
        texts, calls = [], []
        for block in resp.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if request.schema is not None and block.name == (request.schema_name or "answer"):
                    texts.append(json.dumps(block.input))
                else:
                    calls.append(ToolCallOut(id=block.id, name=block.name, arguments=dict(block.input)))
        stop = resp.stop_reason or ""
        usage = resp.usage
        read = getattr(usage, "cache_read_input_tokens", 0) or 0
        written = getattr(usage, "cache_creation_input_tokens", 0) or 0
        return Completion(
            text="\n".join(texts),
            tool_calls=calls,
            # Anthropic's input_tokens leaves out cache reads and writes; prompt_tokens counts every input token.
            prompt_tokens=(usage.input_tokens or 0) + read + written,
            completion_tokens=usage.output_tokens or 0,
            cached_tokens=read,
            cache_write_tokens=written,
            finish_reason=stop,
            refusal="the model refused" if stop == "refusal" else None,
        )
