"""`synth run` (the main job), `synth show ENV_DIR` and `synth stats RUN`."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from synth.cli import app, settings_from
from synth.errors import InputError

DEMO_N = 3


def demo_paths() -> tuple[Path, Path]:
    """The bundled offline demo: its seed file and its folder of recorded answers."""
    root = resources.files("synth_seeds")
    return Path(str(root.joinpath("demo.txt"))), Path(str(root.joinpath("demo")))


@app.command()
def run(
    seeds: Optional[Path] = typer.Option(None, "--seeds", help="seed file (default: bundled domains, or the demo)"),
    n: Optional[int] = typer.Option(None, "-n", help="number of environments to synthesize"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="provider/model, e.g. openai/gpt-4.1-mini"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server URL"),
    out: Optional[Path] = typer.Option(None, "--out", help="output folder (default generated/)"),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="USD budget; no new work starts after it"),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="model requests in flight"),
    parallel_envs: Optional[int] = typer.Option(None, "--parallel-envs", help="envs built at the same time"),
    run_id: Optional[str] = typer.Option(None, "--run-id", help="name the run (default: derived from the inputs)"),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="model-call cache folder"),
    plain: bool = typer.Option(False, "--plain", help="plain progress lines even on a terminal"),
    allow_weak_sandbox: Optional[bool] = typer.Option(None, "--allow-weak-sandbox", help="mark envs verified even "
                                                      "where the sandbox's OS layer cannot be set up"),
) -> None:
    """Synthesize N verified environments from seeds. Rerun the same command to resume."""
    from synth.pipeline import run_pipeline
    from synth.progress import make_progress
    from synth.seeds import bundled_seeds_path, load_seeds

    settings = settings_from(model=model, base_url=base_url, out=out, max_cost=max_cost, concurrency=concurrency,
                             parallel_envs=parallel_envs, run_id=run_id, cache_dir=cache_dir,
                             allow_weak_sandbox=allow_weak_sandbox)
    if settings.model is None:
        if os.environ.get("OPENAI_API_KEY") or os.environ.get("ANTHROPIC_API_KEY"):
            raise InputError("an API key is set but no model: pass --model provider/model (e.g. openai/gpt-4.1-mini)")
        demo_seeds, recordings = demo_paths()
        settings = settings.model_copy(update={"model": "replay/demo", "replay_file": recordings})
        seeds = seeds or demo_seeds
        n = n or DEMO_N
        typer.echo(f"no API key and no --model: running the offline demo ({n} envs from recorded answers in "
                   f"{recordings})", err=True)
    seed_list = load_seeds(seeds or bundled_seeds_path())
    if n is None:
        raise InputError("pass -n N: how many environments to synthesize")
    with make_progress(plain=plain or None) as progress:
        summary = run_pipeline(seed_list, n, settings, progress)
    print_summary(summary)
    if summary["budget_stopped"]:
        typer.echo(summary["budget_message"], err=True)
    if summary["funnel"]["verified"] == 0:
        typer.echo("no env was verified; the failures above say why", err=True)
        raise typer.Exit(1)


def print_summary(summary: dict[str, Any]) -> None:
    console = Console()
    funnel = Table(title=f"run {summary['run_id']} ({summary['model']})")
    for key in summary["funnel"]:
        funnel.add_column(key.replace("_", "-"), justify="right")
    funnel.add_row(*(str(v) for v in summary["funnel"].values()))
    console.print(funnel)
    if summary["failures"]:
        failures = Table(title="failures by reason")
        failures.add_column("reason")
        failures.add_column("count", justify="right")
        failures.add_column("examples")
        for reason, info in summary["failures"].items():
            failures.add_row(reason, str(info["count"]), ", ".join(info["examples"]))
        console.print(failures)
    total = summary["usage"]["total"]
    per = summary["per_verified_env"]
    console.print(
        f"model calls {total['calls']} ({total['cached']} cached), tokens "
        f"{total['prompt_tokens'] + total['completion_tokens']:,}, cost ${total['cost']:.4f}"
        + (f"; per verified env: {per['tokens']:,.0f} tokens, ${per['cost']:.4f}" if per["cost"] is not None else "")
    )
    for name, path in summary["paths"].items():
        console.print(f"{name:>7}: {path}")


@app.command()
def show(env_dir: Path = typer.Argument(..., help="an env folder")) -> None:
    """A readable summary of one env: scenario, tables, tools, tasks, gates, cost."""
    from synth.envsummary import env_summary, render_env_summary

    render_env_summary(env_summary(env_dir), Console())


@app.command()
def stats(
    run: str = typer.Argument(..., help="run folder, or run id under --out/runs"),
    out: Optional[Path] = typer.Option(None, "--out", help="output folder (default generated/)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """Items per stage and status, and model usage per stage, for a run."""
    from synth.store import RUN_DB, RunStore

    folder = Path(run)
    if not (folder / RUN_DB).exists():
        folder = Path(settings_from(out=out).out) / "runs" / run
    if not (folder / RUN_DB).exists():
        raise InputError(f"no run at {run!r}: pass a run folder (generated/runs/<id>) or a run id")
    store = RunStore(folder)
    try:
        data = {"run": str(folder), "items": store.counts(), "usage": store.usage()}
    finally:
        store.close()
    summary_file = folder / "summary.json"
    if summary_file.exists():
        data["funnel"] = json.loads(summary_file.read_text()).get("funnel")
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console()
    items = Table(title=f"run {folder.name}")
    for col in ("stage", "done", "failed", "running", "calls", "cached", "tokens", "cost"):
        items.add_column(col, justify="left" if col == "stage" else "right")
    stages = sorted(set(data["items"]) | set(data["usage"]["stages"]))
    for stage in stages:
        c, u = data["items"].get(stage, {}), data["usage"]["stages"].get(stage, {})
        items.add_row(stage, str(c.get("done", 0)), str(c.get("failed", 0)), str(c.get("running", 0)),
                      str(u.get("calls", 0)), str(u.get("cached", 0)),
                      f"{u.get('prompt_tokens', 0) + u.get('completion_tokens', 0):,}", f"${u.get('cost', 0):.4f}")
    console.print(items)
    if data.get("funnel"):
        console.print("funnel: " + " -> ".join(f"{k} {v}" for k, v in data["funnel"].items()))
