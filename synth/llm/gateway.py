"""The one gateway every model call in synth goes through.

It owns the cache, classified retries, concurrency, structured output with
repair turns, usage accounting and the budget, so no stage ever sees them.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from synth.config import ConfigError, Settings
from synth.llm.budgets import output_budget
from synth.llm.cache import ResponseCache, request_key
from synth.llm.errors import ModelError, OutputTruncated, RetryableError, StructuredOutputError
from synth.llm.extract import NoJSONFound, extract_json
from synth.llm.limiter import AdaptiveLimiter
from synth.llm.types import Completion, ModelSpec, Provider, Request, parse_model
from synth.llm.usage import PriceTable, UsageMeter

T = TypeVar("T", bound=BaseModel)
Check = Callable[[Any], list[str]]  # extra semantic checks: problems, or [] when fine


class CallRecorder(Protocol):
    def record_call(self, record: dict[str, Any]) -> None: ...


def make_provider(spec: ModelSpec, settings: Settings) -> Provider:
    if spec.provider == "openai":
        from synth.llm.providers import OpenAIProvider

        return OpenAIProvider(settings.base_url)
    if spec.provider == "anthropic":
        from synth.llm.providers import AnthropicProvider

        return AnthropicProvider(settings.base_url)
    from synth.llm.replay import ReplayProvider

    if settings.replay_file is None:
        raise ConfigError("the replay provider needs recorded responses: pass --replay-file FILE")
    return ReplayProvider(settings.replay_file)


def schema_instruction(schema: dict[str, Any]) -> str:
    return (
        "Answer with a single JSON object, and nothing else, that matches this JSON Schema:\n"
        + json.dumps(schema, separators=(",", ":"))
    )


def with_schema_instruction(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation with the answer-format instruction at the end of its first user
    message, so the messages before it (the env's shared context) stay a byte-identical
    prefix across stages and provider prompt caching applies."""
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = m["content"].rstrip() + "\n\n" + schema_instruction(schema)
            return out
    return out + [{"role": "user", "content": schema_instruction(schema)}]


def describe_problems(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:8]]
        return "; ".join(parts)
    return str(exc)


class Gateway:
    def __init__(
        self,
        settings: Settings,
        *,
        provider: Provider | None = None,
        recorder: CallRecorder | None = None,
        spent_before: float = 0.0,
        usage: UsageMeter | None = None,
        cache: ResponseCache | None = None,
    ):
        if not settings.model:
            raise ConfigError("no model configured: pass --model provider/model (or set SYNTH_MODEL)")
        self.settings = settings
        self.spec = parse_model(settings.model)
        self.provider = provider or make_provider(self.spec, settings)
        self.cache = cache if cache is not None else (None if settings.no_cache else ResponseCache(settings.cache_dir))
        self.prices = PriceTable.load(settings.prices_file)
        self.usage = usage if usage is not None else UsageMeter(settings.max_cost, spent_before,
                                                                max_invalid_streak=settings.max_invalid_streak)
        self.limiter = AdaptiveLimiter(settings.concurrency)
        self.recorder = recorder
        self._judge: Gateway | None = None

    @property
    def model(self) -> str:
        return self.spec.full

    def record_into(self, recorder: CallRecorder, *, spent_before: float = 0.0) -> None:
        """Record calls into a run store opened after this gateway (so a bad model setting fails
        before any run folder exists), counting what the run spent before toward the budget."""
        self.recorder = recorder
        self.usage.spent_before = spent_before

    def judge(self) -> "Gateway":
        """The gateway of the checking agent: --judge-model (with --judge-base-url), or this one.

        It shares this gateway's cache, usage meter (so one budget covers both) and recorder."""
        wanted = self.settings.judge_model
        if not wanted or wanted == self.model:
            return self
        if self._judge is None:
            settings = self.settings.model_copy(update={
                "model": wanted, "base_url": self.settings.judge_base_url, "judge_model": None})
            self._judge = Gateway(settings, recorder=self.recorder, usage=self.usage, cache=self.cache)
        return self._judge

    # ------------------------------------------------------------------ public calls

    async def structured(
        self,
        schema: type[T],
        messages: list[dict[str, Any]],
        *,
        stage: str,
        subject: str,
        check: Check | None = None,
        sample: int = 0,
        temperature: float | None = None,
        repair_turns: int | None = None,
        max_tokens: int | None = None,
        grow: bool = True,
    ) -> T:
        """Ask for an instance of `schema`; feed validation (and `check`) problems back.

        `max_tokens` defaults to the stage's output budget. An answer cut off at the
        output cap is never parsed: with `grow` it is asked again once at the model's
        cap (settings.max_tokens); otherwise, or if still cut, OutputTruncated is raised
        so a stage that can split its work asks for smaller pieces.

        Only a validated answer is cached. It is stored under the first turn's
        key too, so a rerun of the same call is free even if it needed repairs.
        """
        json_schema = schema.model_json_schema()
        convo = with_schema_instruction(messages, json_schema)
        turns = self.settings.repair_turns if repair_turns is None else repair_turns
        budget = max_tokens or output_budget(stage, self.settings.max_tokens)
        first_key: str | None = None
        problems = ""
        turn = 0
        while turn <= turns:
            request = Request(
                messages=list(convo), stage=stage, subject=subject, schema=json_schema,
                schema_name=schema.__name__, temperature=self._temperature(temperature),
                max_tokens=budget, sample=sample,
            )
            key = self._key(request)
            first_key = first_key or key
            completion, latency = await self._call(request, key)
            if completion.truncated:
                self._record(request, completion, latency, status="truncated",
                             error=f"answer cut off at {budget} output tokens")
                if grow and budget < self.settings.max_tokens:
                    budget = self.settings.max_tokens  # the same turn again, with the model's whole cap
                    continue
                raise OutputTruncated(
                    f"{self.model}: the answer for {stage}/{subject} was cut off at the output cap of {budget} "
                    "tokens; the stage must ask for less per request (or raise --max-tokens if the model allows)",
                    max_tokens=budget)
            turn += 1
            try:
                if completion.refusal:
                    raise ValueError(f"the model refused: {completion.refusal}")
                value = schema.model_validate(extract_json(completion.text))
                found = check(value) if check else []
                if found:
                    raise ValueError("; ".join(found))
            except (ValidationError, NoJSONFound, ValueError) as exc:
                problems = describe_problems(exc)
                self._record(request, completion, latency, status="invalid", error=problems)
                self.usage.answer(stage, valid=False, problems=problems)
                convo += [
                    {"role": "assistant", "content": completion.text},
                    {"role": "user", "content": f"Your answer has problems: {problems}\n"
                     "Reply again with the complete, corrected JSON object only."},
                ]
                continue
            self._record(request, completion, latency, status="ok")
            self.usage.answer(stage, valid=True)
            if not completion.cached:
                self._store(key, stage, subject, completion)
                if key != first_key:
                    self._store(first_key, stage, subject, completion)
            return value
        raise StructuredOutputError(
            f"{self.model}: answer for {stage}/{subject} still invalid after {turns + 1} turn(s): "
            + (problems if len(problems) <= 300 else problems[:300].rsplit(" ", 1)[0] + " ...")
        )

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        stage: str,
        subject: str,
        tools: list[dict[str, Any]] | None = None,
        sample: int = 0,
        temperature: float | None = None,
        use_cache: bool = True,
    ) -> Completion:
        """A free-form turn (agents, rollouts). Refusals are never cached."""
        request = Request(
            messages=list(messages), stage=stage, subject=subject, tools=tools,
            temperature=self._temperature(temperature), max_tokens=self.settings.max_tokens, sample=sample,
        )
        key = self._key(request)
        completion, latency = await self._call(request, key if use_cache else None)
        self._record(request, completion, latency, status="refused" if completion.refusal else "ok")
        if use_cache and not completion.cached and not completion.refusal:
            self._store(key, stage, subject, completion)
        return completion

    # ------------------------------------------------------------------ machinery

    def _key(self, request: Request) -> str:
        canonical = request.canonical(self.spec)
        fingerprint = getattr(self.provider, "fingerprint", None)
        if fingerprint:  # providers whose answers come from data (replay) key on that data too
            canonical["provider_data"] = fingerprint
        return request_key(canonical)

    def _temperature(self, value: float | None) -> float | None:
        return self.settings.temperature if value is None else value

    async def _call(self, request: Request, key: str | None) -> tuple[Completion, float]:
        if key and self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                return Completion.model_validate(hit).model_copy(update={"cached": True}), 0.0
        self.usage.check_budget()  # no new call starts once the budget is spent
        return await self._with_retries(request)

    async def _with_retries(self, request: Request) -> tuple[Completion, float]:
        s = self.settings
        deadline = time.monotonic() + s.max_retry_seconds
        for attempt in range(1, s.max_attempts + 1):
            started = time.monotonic()
            try:
                async with self.limiter:
                    completion = await self.provider.complete(self.spec, request, s.timeout)
                self.limiter.on_success()
                return completion, time.monotonic() - started
            except RetryableError as exc:
                if exc.status == 429:
                    self.limiter.on_rate_limit()
                self._record_error(request, str(exc))
                if attempt == s.max_attempts:
                    raise ModelError(f"{exc} (gave up after {attempt} attempts)") from exc
                backoff = min(60.0, s.retry_base_delay * 2 ** (attempt - 1)) * (0.5 + random.random())
                delay = max(exc.retry_after or 0.0, backoff)
                if exc.retry_after is not None:
                    delay = exc.retry_after + random.random() * min(1.0, 0.1 * exc.retry_after + 0.05)
                if time.monotonic() + delay > deadline:
                    raise ModelError(f"{exc} (retry time limit of {s.max_retry_seconds:.0f}s reached)") from exc
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    def _store(self, key: str, stage: str, subject: str, completion: Completion) -> None:
        if self.cache is None:
            return
        data = completion.model_dump(exclude={"cached"})
        self.cache.put(key, provider=self.spec.provider, model=self.spec.name, stage=stage, subject=subject, response=data)

    def _record(
        self, request: Request, completion: Completion, latency: float, *, status: str, error: str | None = None
    ) -> None:
        """Count usage and cost once per answer that came back, with its final status."""
        cost = 0.0 if completion.cached else self.prices.cost(
            self.model, completion.prompt_tokens, completion.completion_tokens,
            cached_tokens=completion.cached_tokens, cache_write_tokens=completion.cache_write_tokens,
        )
        self.usage.record(
            request.stage, cached=completion.cached, prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens, cost=cost, cached_tokens=completion.cached_tokens,
            subject=request.subject,
        )
        if self.recorder:
            fresh = not completion.cached
            self.recorder.record_call({
                "stage": request.stage, "subject": request.subject, "provider": self.spec.provider,
                "model": self.spec.name, "cached": completion.cached,
                "prompt_tokens": completion.prompt_tokens if fresh else 0,
                "completion_tokens": completion.completion_tokens if fresh else 0,
                "cached_tokens": completion.cached_tokens if fresh else 0,
                "reused_prompt_tokens": 0 if fresh else completion.prompt_tokens,
                "reused_completion_tokens": 0 if fresh else completion.completion_tokens,
                "cost": cost, "latency": round(latency, 4), "status": status, "error": error, "time": time.time(),
            })

    def _record_error(self, request: Request, error: str) -> None:
        if self.recorder:
            self.recorder.record_call({
                "stage": request.stage, "subject": request.subject, "provider": self.spec.provider,
                "model": self.spec.name, "cached": False, "prompt_tokens": 0, "completion_tokens": 0,
                "cached_tokens": 0, "cost": 0.0, "latency": 0.0, "status": "error", "error": error, "time": time.time(),
            })
