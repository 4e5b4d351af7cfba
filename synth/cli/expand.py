"""`synth scenarios`: seeds -> unique, CRUD-able scenarios (expand, classify, dedup)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError

@app.command("scenarios")
@settings_options("model", "scenarios", "output", rename={"out": "--out-dir"})
def scenarios_command(
    settings: Settings,
    seeds: Path = typer.Option(..., "--seeds", help="seed file: one 'name | description | category' per line"),
    count: int = typer.Option(..., "-n", "--count", help="number of unique scenarios wanted"),
    out_file: Optional[Path] = typer.Option(None, "--out", "-o", help="scenarios JSONL; rejected candidates with "
                                            "reasons go to OUT.rejected.jsonl \\[default: <out-dir>/scenarios.jsonl]"),
) -> None:
    """Expand seed domains into scenarios, keep the CRUD-able ones, drop duplicates (also of OUT's folder).

    The run's state goes to <out-dir>/runs/ and the cache to <out-dir>/.cache."""
    from synth.cli.model import preflight
    from synth.pipeline.runner import shown_reason
    from synth.pipeline.scenarios import run_scenarios
    from synth.pipeline.seeds import load_seeds

    if count < 1:
        raise InputError(f"-n is the number of scenarios wanted; it must be at least 1, got {count}")
    load_seeds(seeds)  # a bad seed file is reported before any model call
    typer.echo(f"model check: {preflight(settings)}", err=True)
    run = run_scenarios(seeds, count, out_file or Path(settings.out) / "scenarios.jsonl", settings)
    result = run.result
    typer.echo(result.summary())
    for seed, reason in result.stalled.items():
        typer.echo(f"  seed {seed!r}: {reason}")
    for failure in result.failures:
        typer.echo(f"  failed {failure.stage} {failure.item_id}: {shown_reason(failure.error)}")
    typer.echo(f"{len(result.kept)} scenario(s) -> {run.out}; {len(result.rejected)} rejected with reasons -> "
               f"{run.rejected}; compared against {run.existing} existing; run {run.run_id}")
    if result.budget_stopped:  # the budget, or a model whose answers keep failing validation (its own message)
        halted = (result.budget_message or "").startswith("stopped:")
        typer.echo(result.budget_message if halted else
                   "the budget ran out: raise --max-cost and rerun the same command to continue", err=True)
