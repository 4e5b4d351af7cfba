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
from rich.text import Text

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError

DEMO_N = 2  # of the demo's 3 domains: `synth run -n 1` afterwards still has one to add
NO_MODEL = ("pass --model provider/model (e.g. openai/gpt-4.1-mini with OPENAI_API_KEY set, or a local server "
            "with --base-url)")


def demo_paths() -> tuple[Path, Path]:
    """The bundled offline demo: its seed file and its folder of recorded answers."""
    root = resources.files("synth_seeds")
    return Path(str(root.joinpath("demo.txt"))), Path(str(root.joinpath("demo")))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def _demo(settings: Settings, seeds: Optional[Path], n: Optional[int]) -> tuple[Settings, Path, int]:
    """No model and no key: the offline demo, which can only replay its own recorded domains."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("ANTHROPIC_API_KEY"):
        raise InputError(f"an API key is set but no model: {NO_MODEL}")
    demo_seeds, recordings = demo_paths()
    if seeds is not None and not _same_file(seeds, demo_seeds):
        raise InputError(f"no model: offline, only the bundled demo runs (its recorded answers cover "
                         f"{demo_seeds.name} only); to use {seeds}, {NO_MODEL}")
    return (settings.model_copy(update={"model": "replay/demo", "replay_file": recordings}), demo_seeds,
            DEMO_N if n is None else n)


def _demo_room(seed_list: list, n: int, settings: Settings) -> int:
    """How many envs the demo can still add to this output folder (a rerun of a run keeps its own room)."""
    from synth.pipeline.runner import run_id_for
    from synth.pipeline.scenario_files import load_existing
    from synth.pipeline.seeds import name_key
    from synth.pipeline.store import RUN_DB

    run_dir = Path(settings.out) / "runs" / run_id_for(seed_list, n, settings)
    held = load_existing(settings.out)
    if (run_dir / RUN_DB).exists():  # resuming: the room is what the folder held when the run started
        from synth.artifacts import Scenario
        from synth.pipeline.runner import EXISTING_ITEM
        from synth.pipeline.store import RunStore

        store = RunStore(run_dir)
        try:
            row = store.get(*EXISTING_ITEM)
        finally:
            store.close()
        if row and row["status"] == "done":
            held = [Scenario.model_validate(s) for s in row["output"]]
    taken = {name_key(s.seed) for s in held}
    room = sum(name_key(s.name) not in taken for s in seed_list)
    where = Path(settings.out) / "envs"
    if room == 0:
        raise InputError(f"the offline demo holds {len(seed_list)} domains and {where} already has all of them; "
                         f"to synthesize more, {NO_MODEL} (or pass another --out)")
    return room


@app.command()
@settings_options("all")
def run(
    settings: Settings,
    seeds: Optional[Path] = typer.Option(None, "--seeds", help="seed file \\[default: the bundled domains; "
                                         "with no model, the offline demo's]"),
    n: Optional[int] = typer.Option(None, "-n", help=f"verified environments wanted \\[default: {DEMO_N} for the "
                                    "offline demo; required otherwise]"),
    plain: bool = typer.Option(False, "--plain", help="plain progress lines even on a terminal"),
) -> None:
    """Synthesize N verified environments from seeds. Rerun the same command to resume."""
    from synth.cli.model import preflight
    from synth.pipeline.progress import make_progress
    from synth.pipeline.runner import Pipeline
    from synth.pipeline.seeds import bundled_seeds_path, load_seeds
    from synth.pipeline.store import check_output_folder

    if settings.executor == "ray":  # before any work: a missing extra or a wrong address is a one-line error
        from synth.pipeline.executor import require_ray

        require_ray()
        from synth.pipeline.executor_ray import cluster_address

        cluster_address(settings.ray_address)
    if n is not None and n < 1:
        raise InputError(f"-n is the number of verified environments wanted; it must be at least 1, got {n}")
    check_output_folder(settings.out)
    if seeds is not None:
        load_seeds(seeds)  # a missing or malformed seed file is named before anything about the model
    demo = settings.model is None
    if demo:
        settings, seeds, n = _demo(settings, seeds, n)
    if n is None:
        raise InputError("pass -n N: how many verified environments to synthesize")
    seed_list = load_seeds(seeds or bundled_seeds_path())
    target = n
    if demo:
        room = _demo_room(seed_list, n, settings)
        target = min(n, room)
        taken = "" if room >= len(seed_list) else f", {len(seed_list) - room} already in {settings.out}/envs"
        note = f"{n} env(s)" if target == n else (f"{target} env(s), not {n}: the demo holds {len(seed_list)} "
                                                f"domains{taken}; for more, {NO_MODEL}")
        typer.echo(f"no API key and no --model: running the offline demo ({note}; recorded answers in "
                   f"{settings.replay_file})", err=True)
    else:
        typer.echo(f"model check: {preflight(settings)}", err=True)
    pipeline = Pipeline(seed_list, n, settings, one_scenario_per_seed=demo, target=target)
    if pipeline.existing:
        typer.echo(f"{len(pipeline.existing)} scenario(s) already in {settings.out} from other runs are kept; "
                   "new scenarios must differ from them", err=True)
    with make_progress(plain=plain or None) as progress:
        summary = pipeline.execute(progress)
    print_summary(summary)
    typer.echo(summary["stop_message"], err=True)
    if summary["funnel"]["verified"] == 0:
        typer.echo("no env was verified; the failures above say why", err=True)
    if summary["stop_reason"] != "reached":
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
        for reason, info in summary["failures"].items():  # Text: a reason's brackets are not markup
            failures.add_row(Text(reason), str(info["count"]), Text(", ".join(info["examples"])))
        console.print(failures)
    total = summary["usage"]["total"]
    per = summary["per_verified_env"]
    reused = total.get("reused_tokens", 0)
    console.print(
        f"model calls {total['calls']} ({total['cached']} cached), tokens "
        f"{total['prompt_tokens'] + total['completion_tokens']:,}"
        + (f" (+ {reused:,} in cached answers, at their first cost)" if reused else "")
        + f", cost ${total['cost']:.4f}"
        + (f"; per verified env: {per['tokens']:,.0f} tokens" + (
            f" ({per['tokens_with_reused']:,.0f} with the cached answers)" if reused else "")
           + f", ${per['cost']:.4f}" if per["cost"] is not None else "")
    )
    for name, path in summary["paths"].items():
        console.print(f"{name:>7}: {path}")


@app.command()
def show(
    env_dir: Path = typer.Argument(..., help="an env folder"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """A readable summary of one env: scenario, tables, tools, tasks, gates, cost. Exit 1 if the folder has
    problems (listed at the end)."""
    from synth.folder.summary import env_summary, render_env_summary

    summary = env_summary(env_dir)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        render_env_summary(summary, Console())
    if summary["problems"]:
        raise typer.Exit(1)


# Stages in pipeline order, for tables that list them; stages not named here follow in the order met.
STAGE_ORDER = ("scenarios", "expand", "classify", "dedup", "dedup_judge", "env", "build", "tasks", "schema", "data", "data_fix",
               "tool_spec", "tool_code", "verify", "gold", "check_tests", "check_judge", "check_repair", "paraphrase",
               "solve", "red_team", "reward_judge", "templates")


def in_pipeline_order(stages: list[str]) -> list[str]:
    known = [s for s in STAGE_ORDER if s in stages]
    return known + [s for s in dict.fromkeys(stages) if s not in STAGE_ORDER]


def _env_usage(folder: Path, per_env: dict[str, dict], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({"run": str(folder), "envs": per_env}, indent=2))
        return
    table = Table(title=f"run {folder.name}: model usage per env")
    for col in ("env", "calls", "cached", "tokens", "+ reused", "cost", "busy"):
        table.add_column(col, justify="left" if col == "env" else "right")
    for env, u in sorted(per_env.items()):
        table.add_row(env, str(u["calls"]), str(u["cached"]), f"{u['prompt_tokens'] + u['completion_tokens']:,}",
                      f"{u['reused_tokens']:,}", f"${u['cost']:.4f}", f"{u['busy_seconds'] / 60:.1f} min")
    Console().print(table)


@app.command()
@settings_options("out")
def stats(
    settings: Settings,
    run: str = typer.Argument(..., help="run folder, or run id under <out>/runs"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
    envs: bool = typer.Option(False, "--envs", help="model usage per env instead: calls, tokens (+ what its "
                              "cached answers cost when first asked), cost, and the time at least one of its "
                              "calls was in flight"),
    until: str = typer.Option("", "--until", help="with --envs: count each env's calls only until its item of "
                              "this stage ended (verify: what the env cost to verify, without the tasks step)"),
) -> None:
    """Items per stage and status, and model usage per stage (or per env), for a run."""
    from synth.pipeline.store import RUN_DB, RunStore

    folder = Path(run)
    if not (folder / RUN_DB).exists():
        folder = Path(settings.out) / "runs" / run
    if not (folder / RUN_DB).exists():
        if (Path(run) / "runs").is_dir():
            raise InputError(f"{run!r} is an output folder, not a run: `synth runs {run}` lists its runs; pass "
                             "one of them (its folder, or its id with --out)")
        raise InputError(f"no run at {run!r}: pass a run folder (generated/runs/<id>) or a run id "
                         "(`synth runs` lists them)")
    store = RunStore(folder)
    try:
        data = {"run": str(folder), "items": store.counts(), "usage": store.usage()}
        per_env = store.usage_by_env(until or None) if envs else {}
    finally:
        store.close()
    if envs:
        _env_usage(folder, per_env, as_json)
        return
    summary_file = folder / "summary.json"
    if summary_file.exists():
        summary = json.loads(summary_file.read_text())
        funnel = summary.get("funnel") or {}
        order = ("seeds", "candidates", "crud_able", "unique", "built", "verified")  # older files sorted their keys
        data["funnel"] = {**{k: funnel[k] for k in order if k in funnel}, **funnel} or None
        data["stop_message"] = summary.get("stop_message")
    stages = in_pipeline_order(list(data["items"]) + list(data["usage"]["stages"]))
    data["items"] = {s: data["items"][s] for s in stages if s in data["items"]}
    data["usage"]["stages"] = {s: data["usage"]["stages"][s] for s in stages if s in data["usage"]["stages"]}
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    console = Console()
    items = Table(title=f"run {folder.name}")
    for col in ("stage", "done", "failed", "running", "calls", "cached", "tokens", "cost"):
        items.add_column(col, justify="left" if col == "stage" else "right")
    for stage in stages:
        c, u = data["items"].get(stage, {}), data["usage"]["stages"].get(stage, {})
        items.add_row(stage, str(c.get("done", 0)), str(c.get("failed", 0)), str(c.get("running", 0)),
                      str(u.get("calls", 0)), str(u.get("cached", 0)),
                      f"{u.get('prompt_tokens', 0) + u.get('completion_tokens', 0):,}", f"${u.get('cost', 0):.4f}")
    console.print(items)
    if data.get("funnel"):
        console.print("funnel: " + " -> ".join(f"{k} {v}" for k, v in data["funnel"].items()), highlight=False)
    if data.get("stop_message"):
        console.print(data["stop_message"], highlight=False)
