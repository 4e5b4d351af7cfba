"""`synth build`: turn scenarios into env folders (status `built`, or `failed` with a reason)."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings


def _line(result) -> str:
    c = result.counts
    if result.status in ("built", "verified"):
        detail = (f"{result.path}  tables={c.get('tables', 0)} rows={c.get('rows', 0)} tools={c.get('tools', 0)} "
                  f"tasks={c.get('tasks', 0)}")
    else:
        detail = result.reason or ""
    resumed = " (earlier run)" if result.resumed else ""
    return f"{result.status:<8} {result.env_id}{resumed}  {detail}"


@app.command()
@settings_options("model", "output", "build")
def build(
    settings: Settings,
    scenarios: Path = typer.Argument(..., help="JSONL file, one scenario object per line"),
) -> None:
    """Build an env folder per scenario: tasks, schema, data, tools, each validated by execution."""
    from synth.llm import Gateway
    from synth.pipeline.build import build_all, load_scenarios
    from synth.pipeline.store import RunStore, derive_run_id

    items = load_scenarios(scenarios)
    digest = hashlib.sha256(scenarios.read_bytes()).hexdigest()
    run_id = settings.run_id or derive_run_id({"command": "build", "scenarios": digest, "model": settings.model})
    gateway = Gateway(settings)  # no model, no replay file: one error line before any run folder exists
    store = RunStore.open(settings.out, run_id)
    try:
        store.write_config({**settings.public_dict(), "command": "build"})
        gateway.record_into(store, spent_before=store.usage()["total"]["cost"])
        results = asyncio.run(build_all(items, gateway, settings, settings.out, store=store,
                                        parallel=settings.parallel_envs, on_result=lambda r: typer.echo(_line(r))))
    finally:
        store.close()
    counts = {s: sum(r.status == s for r in results) for s in ("built", "verified", "failed", "stopped")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    usage = gateway.usage.total
    typer.echo(f"{len(results)} scenario(s): {summary}; {usage.calls} model call(s) ({usage.cached} cached), "
               f"${usage.cost:.4f}; run {run_id} in {settings.out}")
    if counts["stopped"]:  # the budget, or a model whose answers keep failing validation (it says so)
        typer.echo(gateway.usage.halted or "the budget ran out: raise --max-cost and rerun the same command to "
                   "continue", err=True)
