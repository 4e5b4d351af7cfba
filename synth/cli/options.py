"""Settings as command-line flags, and `synth config`.

Every field of `synth.config.Settings` becomes a flag (`max_retry_seconds` ->
`--max-retry-seconds`) on the commands it affects, generated from the field's
type, default and description, so a setting added to Settings is a flag (and a
line of `synth config`) with no CLI code. `synth run` and `synth config` take
every setting; other commands take the groups below. A field in no group is
still on those two.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer

from synth.cli.app import app
from synth.config import CONFIG_FILE, ENV_PREFIX, Settings, resolve_settings

# Which settings a command group affects. "all" = every field, including ones added later.
GROUPS: dict[str, tuple[str, ...]] = {
    "model": ("model", "base_url", "temperature", "max_tokens", "concurrency", "timeout", "max_attempts",
              "retry_base_delay", "max_retry_seconds", "repair_turns", "max_invalid_streak", "max_cost", "prices_file", "cache_dir",
              "no_cache", "replay_file"),
    "output": ("out", "run_id"),
    "scenarios": ("dedup_threshold", "dedup_borderline", "max_stall_rounds"),
    "build": ("parallel_envs", "build_repair_rounds", "tool_timeout"),
    "tasks": ("templates", "per_template", "template_sample", "judge_model", "judge_base_url", "probe_threshold",
              "probe_margin", "tool_timeout", "allow_weak_sandbox"),
    "verify": ("check_rounds", "verifier_rounds", "task_repairs", "check_pass_rate", "tool_timeout", "judge_model",
               "judge_base_url", "probe_threshold", "probe_margin", "allow_weak_sandbox"),
}
SHORT = {"model": "-m"}
PANEL = f"Settings (also in {CONFIG_FILE} or {ENV_PREFIX}* variables; see `synth config`)"


def flag_name(field: str, rename: dict[str, str] | None = None) -> str:
    return (rename or {}).get(field) or "--" + field.replace("_", "-")


def expand(selection: tuple[str, ...]) -> list[str]:
    """Field names of the given groups / fields, in Settings order, no repeats."""
    wanted: set[str] = set()
    for item in selection:
        if item == "all":
            wanted |= set(Settings.model_fields)
        elif item in GROUPS:
            wanted |= set(GROUPS[item])
        elif item in Settings.model_fields:
            wanted.add(item)
        else:
            raise ValueError(f"unknown settings group or field {item!r}")
    return [f for f in Settings.model_fields if f in wanted]


def _cli_type(annotation: Any) -> type:
    """The flag's type: the field's own scalar type; anything else is parsed by the Settings model."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    kind = args[0] if len(args) == 1 else str
    return kind if kind in (int, float, str, bool, Path) else str


def _default_text(field: str) -> str:
    if field == "cache_dir":
        return "<out>/.cache"
    default = Settings.model_fields[field].default
    return "none" if default is None else str(default)


def _option(field: str, rename: dict[str, str] | None) -> tuple[Any, Any]:
    info = Settings.model_fields[field]
    kind = _cli_type(info.annotation)
    decls = [flag_name(field, rename)] + ([SHORT[field]] if field in SHORT else [])
    # Typer renders help as Rich markup: escape brackets so `synth[ray]` stays as written.
    help_text = (info.description or field.replace("_", " ")).replace("[", "\\[")
    if kind is bool:  # a switch: given = true; "not given" leaves the other sources in charge
        return Optional[bool], typer.Option(None, *decls, help=help_text, show_default=False,
                                            rich_help_panel=PANEL)
    return Optional[kind], typer.Option(None, *decls, help=f"{help_text} \\[default: {_default_text(field)}]",
                                        show_default=False, rich_help_panel=PANEL)


def settings_options(*selection: str, rename: dict[str, str] | None = None,
                     overrides: dict[str, Any] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add a flag per selected setting to a command and hand it the resolved `settings`.

    The command declares a `settings` parameter (and optionally `sources`: where each value
    came from). A parameter the command declares itself with a setting's name wins over
    the generated flag. `overrides` are fixed values for this command (e.g. ping: no cache).
    """

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(func)
        own = [p.replace(annotation=hints.get(p.name, p.annotation))
               for p in inspect.signature(func).parameters.values() if p.name not in ("settings", "sources")]
        taken = {p.name for p in own}
        fields = [f for f in expand(selection) if f not in taken and f not in (overrides or {})]
        added = []
        for field in fields:
            annotation, option = _option(field, rename)
            added.append(inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=option,
                                           annotation=annotation))
        wants_sources = "sources" in inspect.signature(func).parameters
        names = {f: flag_name(f, rename) for f in fields}

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            flags = {f: kwargs.pop(f) for f in fields}
            settings, sources = resolve_settings({**flags, **(overrides or {})}, flag_names=names)
            if overrides:
                sources.update({k: f"fixed by `synth {func.__name__}`" for k in overrides})
            extra = {"sources": sources} if wants_sources else {}
            return func(**kwargs, settings=settings, **extra)

        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        del command.__wrapped__  # typer must read the new signature, not the function's own
        return command

    return wrap


@app.command("config")
@settings_options("all")
def config_command(
    settings: Settings,
    sources: dict[str, str],
    as_json: bool = typer.Option(False, "--json", help="print JSON: {key: {value, source, flag, env}}"),
) -> None:
    """Print every setting: its resolved value, where it came from, and its flag and SYNTH_* variable.

    Precedence: defaults < synth.toml (in this folder) < SYNTH_* environment variables < flags.
    """
    values = settings.public_dict()
    rows = {key: {"value": values[key], "source": sources[key], "flag": flag_name(key),
                  "env": ENV_PREFIX + key.upper(), "description": Settings.model_fields[key].description or ""}
            for key in Settings.model_fields}
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    width = max(len(k) for k in rows)
    for key, row in rows.items():
        value = json.dumps(row["value"])
        typer.echo(f"{key:<{width}}  {value:<24} ({row['source']})")
    typer.echo(f"set a key in {CONFIG_FILE} (`key = value`), as {ENV_PREFIX}<KEY>, or with its flag (dashes for "
               "underscores); flags win, then variables, then the file")
