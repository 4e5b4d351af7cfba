"""`synth check` (gates + tests replay, no model) and `synth verify` (the check loop)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from synth.cli import app, settings_from
from synth.errors import SynthError


def _env_dirs(paths: list[Path]) -> list[Path]:
    """Each argument is an env folder, or a folder of them (DIR/envs/*/ or DIR/*/)."""
    from synth.envdirs import find_env_dirs

    found: list[Path] = []
    for path in paths:
        found += [d for d in find_env_dirs(path) if d not in found]
    return found


def _table(env_id: str, status: str, gates: list, console: Console) -> None:
    table = Table(title=f"{env_id}: {status}", title_justify="left", show_lines=False)
    table.add_column("gate")
    table.add_column("result")
    table.add_column("evidence", overflow="fold")
    for gate in gates:
        evidence = "; ".join(gate.evidence[:3]) + (f" (+{len(gate.evidence) - 3} more)" if len(gate.evidence) > 3
                                                   else "")
        table.add_row(gate.name, "[green]pass[/green]" if gate.passed else "[red]FAIL[/red]", evidence or "-")
    console.print(table)


_WEAK_HELP = "mark envs verified even where the sandbox's OS layer (seccomp, Landlock, netns) cannot be set up"


def _pool(settings):
    from synth.runtime.sandbox import SandboxPool

    return SandboxPool(workers=2, call_timeout=settings.tool_timeout, allow_weak=settings.allow_weak_sandbox)


@app.command()
def check(
    env_dirs: list[Path] = typer.Argument(..., help="env folders, or folders holding env folders"),
    allow_weak_sandbox: Optional[bool] = typer.Option(None, "--allow-weak-sandbox", help=_WEAK_HELP),
) -> None:
    """Replay every quality gate and tests.jsonl with no model; exit 0 only if every env is verified."""
    from synth.verify import check_env

    console = Console()
    settings = settings_from(allow_weak_sandbox=allow_weak_sandbox)
    dirs, results, errors = _env_dirs(env_dirs), [], []
    with _pool(settings) as pool:
        for env_dir in dirs:
            try:  # one unreadable env is reported, the others are still checked
                results.append(check_env(env_dir, pool=pool, settings=settings))
            except SynthError as exc:
                errors.append(f"{env_dir}: {exc}")
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    for result in results:
        _table(result.env_id, result.status, result.gates, console)
    verified = sum(r.verified for r in results)
    typer.echo(f"{verified}/{len(dirs)} env(s) verified")
    raise typer.Exit(0 if verified == len(dirs) else 1)


@app.command()
def verify(
    env_dirs: list[Path] = typer.Argument(..., help="built env folders, or folders holding them"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="provider/model (or SYNTH_MODEL / synth.toml)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server URL"),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="USD budget for this command"),
    allow_weak_sandbox: Optional[bool] = typer.Option(None, "--allow-weak-sandbox", help=_WEAK_HELP),
) -> None:
    """Gold solutions, verifiers and the check loop on built envs; exit 0 only if every env ends verified."""
    from synth.llm import Gateway
    from synth.verify import verify_env

    settings = settings_from(model=model, base_url=base_url, max_cost=max_cost, allow_weak_sandbox=allow_weak_sandbox)
    dirs = _env_dirs(env_dirs)
    pool = _pool(settings)
    gateway = Gateway(settings)
    console = Console()

    errors: list[str] = []

    async def run_all() -> list:
        results = []
        for env_dir in dirs:  # one env at a time: each loop already runs its model calls concurrently
            try:
                results.append(await verify_env(env_dir, gateway, settings, pool=pool))
            except SynthError as exc:  # this env is unusable (e.g. its build failed); go on with the next
                errors.append(f"{env_dir}: {exc}")
                continue
            if results[-1].budget_stopped:
                break
        return results

    try:
        results = asyncio.run(run_all())
    finally:
        pool.close()
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    for result in results:
        _table(result.env_id, result.status, result.gates, console)
        note = "budget reached; rerun to continue" if result.budget_stopped else "; ".join(result.reasons)[:300]
        typer.echo(f"{result.env_id}: {result.status}" + (f" (pass rate {result.pass_rate:.0%})"
                                                           if result.pass_rate is not None else "")
                   + (f" - {note}" if note else ""))
    verified = sum(r.verified for r in results)
    t = gateway.usage.total
    typer.echo(f"{verified}/{len(dirs)} env(s) verified; {t.calls} model calls, ${t.cost:.4f}")
    raise typer.Exit(0 if verified == len(dirs) else 1)
