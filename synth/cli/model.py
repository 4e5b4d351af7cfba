"""`synth ping` and `synth cache ...`: talking to the model and managing its cache."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any, Optional

import typer
from pydantic import BaseModel, Field

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError
from synth.pipeline.prompts import render_prompt

cache_app = typer.Typer(help="Inspect or clear the model-call cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


class Pong(BaseModel):
    ok: bool = Field(description="Always true")
    word: str = Field(description="The word 'pong'")


def ping_model(settings: Settings) -> tuple[Any, Pong, float]:
    """One tiny structured call, uncached, at most two attempts: (gateway, answer, seconds)."""
    from synth.llm import Gateway

    if settings.model is None:
        raise InputError("no model to check: pass --model provider/model (e.g. openai/gpt-4.1-mini)")
    gateway = Gateway(settings.model_copy(update={"no_cache": True, "max_attempts": min(2, settings.max_attempts)}))

    async def call() -> Pong:
        try:
            return await gateway.structured(Pong, render_prompt("ping", word="pong"), stage="ping", subject="ping")
        finally:
            # SDK clients are bound to this event loop: close them in it, or their cleanup
            # runs later (when a run has started its own loop) and prints a traceback.
            for client in list(getattr(gateway.provider, "_clients", {}).values()):
                await client.close()

    started = time.monotonic()
    answer = asyncio.run(call())
    return gateway, answer, time.monotonic() - started


def preflight(settings: Settings, before: str = "any stage") -> str:
    """Before any stage (or any episode: `before`): resolve model, key and endpoint with the ping call; one line on failure.

    A model that answers at all has a working key, endpoint and name, so an answer that
    misses the JSON shape passes here (the stages repair such answers). Recorded
    answers (replay) need no call: loading them is the check."""
    from synth.llm import Gateway, ModelError, StructuredOutputError, parse_model

    if settings.model is None:
        raise InputError("no model: pass --model provider/model (e.g. openai/gpt-4.1-mini)")
    if parse_model(settings.model).provider == "replay":
        Gateway(settings)
        return f"replaying recorded answers from {settings.replay_file}"
    try:
        _, _, seconds = ping_model(settings)
    except StructuredOutputError:
        return f"{settings.model} answers (not in the JSON shape asked; the stages will repair that)"
    except ModelError as exc:
        raise ModelError(f"model check failed before {before}: {exc}") from None
    return f"{settings.model} answers ({seconds:.1f}s)"


@app.command()
@settings_options("model", "base_url", "timeout")
def ping(settings: Settings) -> None:
    """Make one tiny structured call and print provider, model, latency and tokens."""
    gateway, answer, elapsed = ping_model(settings)
    t = gateway.usage.total
    typer.echo(
        f"provider={gateway.spec.provider} model={gateway.spec.name} latency={elapsed * 1000:.0f}ms "
        f"prompt_tokens={t.prompt_tokens} completion_tokens={t.completion_tokens} answer={answer.word!r}"
    )


def _cache(settings: Settings):
    """The cache of settings.cache_dir; a folder that holds none is reported, never created."""
    from synth.llm.cache import CACHE_FILE, ResponseCache

    if not (Path(settings.cache_dir) / CACHE_FILE).is_file():
        return None
    return ResponseCache(settings.cache_dir)


@cache_app.command("stats")
@settings_options("cache_dir", "out")
def cache_stats(
    settings: Settings,
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Entries and tokens in the cache, by stage and model."""
    cache = _cache(settings)
    if cache is None:
        stats = {"path": str(settings.cache_dir), "entries": 0, "bytes": 0, "groups": []}
    else:
        stats = cache.stats()
        cache.close()
    if as_json:
        typer.echo(json.dumps(stats, indent=2))
        return
    if cache is None:
        typer.echo(f"{settings.cache_dir}: no model-call cache there (nothing cached yet, or another --cache-dir)")
        return
    typer.echo(f"{stats['path']}: {stats['entries']} entries, {stats['bytes'] / 1024:.0f} KiB")
    for g in stats["groups"]:
        typer.echo(f"  {g['stage']:<16} {g['model']:<32} {g['entries']:>6} entries "
                   f"{g['prompt_tokens']:>9} in {g['completion_tokens']:>9} out")


@cache_app.command("clear")
@settings_options("cache_dir", "out")
def cache_clear(
    settings: Settings,
    stage: Optional[str] = typer.Option(None, "--stage", help="only entries of this stage (see `synth cache stats`)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask"),
) -> None:
    """Delete cached responses (all, or one stage's)."""
    cache = _cache(settings)
    if cache is None:
        typer.echo(f"{settings.cache_dir}: no model-call cache there; nothing to delete")
        return
    try:
        stages = sorted({g["stage"] for g in cache.stats()["groups"]})
        if stage is not None and stage not in stages:
            raise InputError(f"no cached responses of stage {stage!r}; stages in {settings.cache_dir}: "
                             f"{', '.join(stages) or 'none'}")
        if not yes:
            typer.confirm(f"delete cached responses{' of stage ' + stage if stage else ''}?", abort=True)
        n = cache.clear(stage)
    finally:
        cache.close()
    typer.echo(f"deleted {n} cached responses" + (f" of stage {stage}" if stage else ""))
