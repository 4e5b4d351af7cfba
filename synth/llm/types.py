"""The provider-neutral request and response shapes the gateway works with.

Messages use the OpenAI chat shape ({role, content, tool_calls?, tool_call_id?});
each provider converts to its own wire format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, Field

from synth.config import ConfigError

PROVIDERS = ("openai", "anthropic", "replay")
TRUNCATED_REASONS = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class ModelSpec:
    provider: str
    name: str

    @property
    def full(self) -> str:
        return f"{self.provider}/{self.name}"


def parse_model(model: str) -> ModelSpec:
    """`openai/gpt-4.1-mini` -> ModelSpec('openai', 'gpt-4.1-mini'); the name may contain slashes."""
    provider, sep, name = model.partition("/")
    if provider == "replay" and not sep:
        return ModelSpec("replay", "recorded")
    if not sep or not name or provider not in PROVIDERS:
        raise ConfigError(
            f"model {model!r} must look like provider/model with provider one of {', '.join(PROVIDERS)} "
            "(e.g. openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, openai/Qwen3-32B with --base-url)"
        )
    return ModelSpec(provider, name)


@dataclass
class Request:
    messages: list[dict[str, Any]]
    stage: str
    subject: str
    schema: dict[str, Any] | None = None  # JSON schema for structured output
    schema_name: str | None = None
    tools: list[dict[str, Any]] | None = None  # OpenAI function-tool schemas
    temperature: float | None = None
    max_tokens: int = 4096
    sample: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def canonical(self, spec: ModelSpec) -> dict[str, Any]:
        """What identifies the answer: the cache key is a hash of this."""
        return {
            "provider": spec.provider,
            "model": spec.name,
            "messages": self.messages,
            "schema": self.schema,
            "tools": self.tools,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "sample": self.sample,
        }


class ToolCallOut(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] | str  # str when the model sent arguments that are not JSON


class Completion(BaseModel):
    text: str = ""
    tool_calls: list[ToolCallOut] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = ""
    refusal: str | None = None
    cached: bool = False  # served from synth's own response cache (no call was made)
    cached_tokens: int = 0  # prompt tokens the provider read from its prompt cache (part of prompt_tokens)
    cache_write_tokens: int = 0  # prompt tokens written to the provider's prompt cache (part of prompt_tokens)

    @property
    def truncated(self) -> bool:
        """The answer stopped at the output cap: OpenAI "length", Anthropic "max_tokens"."""
        return self.finish_reason in TRUNCATED_REASONS


class Provider(Protocol):
    name: str

    async def complete(self, spec: ModelSpec, request: Request, timeout: float) -> Completion: ...
