"""`synth dedup`: run the dedup stage alone on a JSONL of scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings


@app.command("dedup")
@settings_options("dedup_threshold", "dedup_borderline", "cache_dir",
                  rename={"dedup_threshold": "--threshold", "dedup_borderline": "--borderline"})
def dedup_command(
    settings: Settings,
    source: Path = typer.Argument(..., metavar="IN.jsonl", help="rows of {name, description, category}"),
    out: Path = typer.Option(
        ..., "--out", "-o", help="kept rows go here; dropped rows with reasons to OUT.rejected.jsonl"
    ),
    target: Optional[int] = typer.Option(
        None, "--target", help="scenarios wanted in total; sets the per-category quota (default: all rows)"
    ),
    existing: Optional[Path] = typer.Option(
        None, "--existing", help="output folder of earlier runs: drop rows it already holds"
    ),
) -> None:
    """Drop duplicate scenarios offline (bundled all-MiniLM-L6-v2; no API key, no network)."""
    from synth.pipeline.stages.scenarios.dedup import dedup_file

    result, rejected = dedup_file(source, out, settings, target=target, existing_dir=existing)
    drops = sorted((rule, n) for rule, n in result.counts().items() if rule not in ("unique", "borderline_kept"))
    why = ", ".join(f"{rule} {n}" for rule, n in drops)
    typer.echo(f"kept {len(result.kept)}, dropped {len(result.dropped)}{f' ({why})' if why else ''}")
    typer.echo(f"kept -> {out}; dropped with reasons -> {rejected}")
