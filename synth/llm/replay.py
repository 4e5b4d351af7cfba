"""The replay provider: answers only from recorded responses, never the network.

Recordings use the script format of synth.llm.script (replies chosen by stage
and subject, in order), so the offline demo and the tests' fake server share
one format. A file or a folder of *.json / *.jsonl files can be given.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from synth.config import ConfigError
from synth.llm.errors import ModelError, ReplayMiss, RetryableError
from synth.llm.script import Rule, Script, RequestInfo, approx_tokens, cap_text
from synth.llm.types import Completion, ModelSpec, Request, ToolCallOut


def load_recordings(path: Path) -> Script:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"replay recordings {path} not found; pass an existing file or folder")
    files = sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl")) if path.is_dir() else [path]
    rules: list[Rule] = []
    for file in files:
        try:
            rules.extend(Script.load(file).rules)
        except ValueError as exc:
            raise ConfigError(str(exc).splitlines()[0]) from exc
    return Script(rules)


class ReplayProvider:
    name = "replay"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.script = load_recordings(self.path)
        # Part of the cache key: edited recordings must not be shadowed by cached old answers.
        self.fingerprint = hashlib.sha256(json.dumps(self.script.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    async def complete(self, spec: ModelSpec, request: Request, timeout: float) -> Completion:
        body = {"model": spec.name, "messages": request.messages}
        if request.schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": request.schema_name, "schema": request.schema}}
        if request.tools:
            body["tools"] = request.tools
        info = RequestInfo.from_openai(body, request.stage, request.subject)
        reply = self.script.next_reply(info)
        if reply is None:
            raise ReplayMiss(
                f"replay: no recorded response for stage={request.stage!r} subject={request.subject!r} "
                f"in {self.path}; record one, or pass --model to call a real model"
            )
        if reply.fault in ("400", "401"):
            raise ModelError(f"replay: recorded HTTP {reply.fault} for stage={request.stage!r} subject={request.subject!r}")
        if reply.fault is not None:
            raise RetryableError(f"replay: recorded fault {reply.fault}", status=int(reply.fault)
                                 if reply.fault.isdigit() else None, retry_after=reply.retry_after)
        # A recorded answer longer than the request's max_tokens is cut there, as a real model's
        # would be, so the demo proves its answers fit the stages' output budgets.
        text, cut = cap_text(reply.content_text() or "", request.max_tokens)
        calls = [ToolCallOut(id=c.id or f"call_{uuid.uuid4().hex[:12]}", name=c.name, arguments=c.arguments)
                 for c in reply.tool_calls or []]
        return Completion(
            text=text,
            tool_calls=calls,
            prompt_tokens=reply.prompt_tokens if reply.prompt_tokens is not None else approx_tokens(info.prompt_text),
            completion_tokens=reply.completion_tokens if reply.completion_tokens is not None
            else approx_tokens(text or json.dumps([c.model_dump() for c in calls])),
            finish_reason="tool_calls" if calls else ("length" if reply.truncated or cut else "stop"),
        )
