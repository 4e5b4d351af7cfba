"""`synth tasks` (tasks from templates) and `synth calibrate` (pass rates from rollouts)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError, SynthError


def env_dirs(paths: list[Path]) -> list[Path]:
    from synth.cli.verify import _env_dirs

    dirs = _env_dirs(paths)
    if not dirs:
        raise InputError(f"no env folder under {', '.join(map(str, paths))}")
    return dirs


def task_pool(settings: Settings) -> Any:
    """Sandbox workers for one env at a time: it may use them all (its instances are checked side by side)."""
    from synth.runtime.sandbox import SandboxPool

    return SandboxPool(workers=2, call_timeout=settings.tool_timeout, allow_weak=settings.allow_weak_sandbox,
                       wait_timeout=max(600.0, settings.timeout))


def offline_demo(settings: Settings) -> Settings:
    """No model and no API key: the offline demo's recorded templates (they cover the demo's envs only)."""
    import os

    from synth.cli.run import NO_MODEL, demo_paths

    if os.environ.get("OPENAI_API_KEY") or os.environ.get("ANTHROPIC_API_KEY"):
        raise InputError(f"an API key is set but no model: {NO_MODEL} (the model writes the templates; --more "
                         "instantiates an env's templates again with none)")
    recordings = demo_paths()[1]
    typer.echo(f"no API key and no --model: using the offline demo's recorded templates ({recordings}); they "
               "cover the demo's envs only", err=True)
    return settings.model_copy(update={"model": "replay/demo", "replay_file": recordings})


def tasks_line(result: Any) -> str:
    kept = result.kept_templates()
    reads = sum(t.kind == "read" for t in kept)
    per = result.tokens_per_task
    checked = result.instances_checked
    timing = ""
    if checked:
        spent = result.seconds.get("instantiate", 0.0) + result.seconds.get("check", 0.0)
        timing = f"; {spent / checked * 1000:.0f} ms per instance to instantiate and check"
    dropped = sum(t.status == "dropped" for t in result.templates)
    exhausted = sum(t.status == "exhausted" for t in result.templates)
    line = (f"{result.env_id}: +{result.added} task(s) from {len(kept)} template(s) ({reads} read, "
            f"{len(kept) - reads} write; {dropped} dropped" + (f", {exhausted} with no rows left" if exhausted else "")
            + f"), {result.tasks} in all; "
            f"{result.tokens:,} tokens" + (f", {per:,.0f} per new task" if per is not None else "") + timing)
    return line + ("" if result.status == "verified" else f"; status {result.status}")


@app.command()
@settings_options("model", "tasks")
def tasks(
    settings: Settings,
    env_dirs_: list[Path] = typer.Argument(..., metavar="ENV_DIR...", help="verified env folders, or folders "
                                           "holding them"),
    more: bool = typer.Option(False, "--more", help="no model: make more instances of the templates in each env's "
                              "task_templates.jsonl, from the query rows not used yet"),
) -> None:
    """Add tasks from templates: the model writes templates, synth instantiates and verifies them with none.

    Exit 0 when every env is still verified (with its new tasks), 1 otherwise, 2 for a usage error."""
    from synth.llm import Gateway
    from synth.pipeline.runner import with_sandbox_threads
    from synth.pipeline.tasks.step import add_tasks

    dirs = env_dirs(env_dirs_)
    if not more and settings.model is None:
        settings = offline_demo(settings)
    gateway = Gateway(settings) if not more else None
    pool = task_pool(settings)
    errors: list[str] = []

    async def run_all() -> list:
        results = []
        for env_dir in dirs:
            try:
                results.append(await add_tasks(env_dir, gateway, settings, more=more, pool=pool))
            except SynthError as exc:
                errors.append(f"{env_dir}: {exc}")
                continue
            typer.echo(tasks_line(results[-1]))
            for error in results[-1].errors:
                typer.echo(f"  {error}", err=True)
        return results

    try:
        results = asyncio.run(with_sandbox_threads(run_all()))
    finally:
        pool.close()
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    added = sum(r.added for r in results)
    typer.echo(f"{added} task(s) added to {len(results)} env(s)")
    ok = not errors and all(r.status == "verified" for r in results)
    raise typer.Exit(0 if ok else 1)


def pass_band(text: Optional[str]) -> tuple[float, float] | None:
    """--pass-rate LO:HI -> (LO, HI), each in [0, 1] and LO <= HI."""
    if text is None:
        return None
    lo, sep, hi = text.partition(":")
    try:
        band = (float(lo), float(hi)) if sep else (float("nan"), float("nan"))
    except ValueError:
        band = (float("nan"), float("nan"))
    if not (0.0 <= band[0] <= band[1] <= 1.0):
        raise InputError(f"--pass-rate {text!r}: give LO:HI with 0 <= LO <= HI <= 1, e.g. 0.1:0.9")
    return band


@app.command()
@settings_options("model")
def calibrate(
    settings: Settings,
    env_dirs_: list[Path] = typer.Argument(..., metavar="ENV_DIR...", help="env folders, or folders holding them"),
    k: int = typer.Option(8, "-k", help="rollouts per task"),
    concurrency: int = typer.Option(4, "--concurrency", help="episodes in flight"),
    max_turns: int = typer.Option(10, "--max-turns", help="model turns per episode"),
    reward: str = typer.Option("rubric", "--reward", help="the reward a rollout must pass: rubric, state or both"),
    split: Optional[str] = typer.Option(None, "--split", help="only tasks of this split (train or test)"),
    trusted: bool = typer.Option(False, "--trusted", help="run generated code in this process with no "
                                 "protection (only envs you wrote or reviewed)"),
    include_rejected: bool = typer.Option(False, "--include-rejected", help="also envs rejected in review.json"),
) -> None:
    """Roll every task k times with a model and record its pass rate and mean rewards in calibration.json."""
    from synth.use.calibrate import CALIBRATION_FILE, calibrate as run_calibrate

    if reward not in ("rubric", "state", "both"):
        raise InputError(f"--reward must be rubric, state or both, not {reward!r}")
    if split not in (None, "train", "test"):
        raise InputError(f"--split must be train or test, not {split!r}")
    summaries = run_calibrate(list(env_dirs_), settings, k=k, concurrency=concurrency, max_turns=max_turns,
                              reward=reward, split=split, trusted=trusted, include_rejected=include_rejected)
    for s in summaries:
        rates = s.rates
        band = sum(0 < r < 1 for r in rates)
        mean = f"mean pass rate {sum(rates) / len(rates):.2f}, " if rates else ""
        typer.echo(f"{s.env_id}: {s.tasks} task(s) calibrated ({s.skipped} already done), {s.rollouts} rollouts, "
                   f"{mean}{band} with a pass rate strictly between 0 and 1; {s.path / CALIBRATION_FILE}"
                   + (f"; {s.errors} rollout(s) errored (rerun to retry)" if s.errors else ""))
        if s.stopped:
            typer.echo(f"stopped early: {s.stopped}", err=True)
    raise typer.Exit(1 if any(s.errors or s.stopped for s in summaries) else 0)
