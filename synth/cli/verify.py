"""`synth check` (gates + tests replay, no model) and `synth verify` (the check loop)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import SynthError


def _env_dirs(paths: list[Path]) -> list[Path]:
    """Each argument is an env folder, or a folder of them (DIR/envs/*/ or DIR/*/)."""
    from synth.folder.dirs import find_env_dirs

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


def _pool(settings: Settings):
    from synth.pipeline.runner import pipeline_pool

    return pipeline_pool(settings)


def failed_gate_lines(gates: list) -> list[str]:
    """One line per distinct failure: gates failing with the same evidence (an env that does not
    load fails every executing gate alike) share a line."""
    groups: dict[str, list[str]] = {}
    for gate in gates:
        if not gate.passed:
            evidence = "; ".join(gate.evidence[:3]) + (f" (+{len(gate.evidence) - 3} more)"
                                                       if len(gate.evidence) > 3 else "")
            groups.setdefault(evidence or "no evidence recorded", []).append(gate.name)
    return [f"FAIL {', '.join(names)}: {evidence}" for evidence, names in groups.items()]


def _previous_status(env_dir: Path) -> str | None:
    from synth.folder.files import read_env_json

    try:
        return read_env_json(env_dir, "env.json").get("status")
    except (SynthError, AttributeError):
        return None


def _check_one(env_dir: Path, settings: Settings, pool: object) -> dict:
    from synth.pipeline.verify import check_env

    before = _previous_status(env_dir)
    try:
        result = check_env(env_dir, settings=settings, pool=pool)
    except Exception as exc:  # noqa: BLE001 - one broken env is reported; the others are still checked
        why = str(exc) if isinstance(exc, SynthError) else f"{type(exc).__name__}: {exc}"
        return {"env_id": env_dir.name, "path": str(env_dir), "status": "error", "previous_status": before,
                "changed": False, "error": " ".join(why.split())[:500], "gates": []}
    from synth.pipeline.verify import probes_report

    from synth.pipeline.layout import place_env

    # envs/ holds verified envs only: an env whose status changed moves to where it now belongs
    where = place_env(env_dir, result.status) if before != result.status else env_dir
    return {"env_id": result.env_id, "path": str(where), "status": result.status, "previous_status": before,
            "changed": before != result.status, "moved_from": str(env_dir) if where != env_dir else None,
            "error": None,
            "gates": [g.model_dump(mode="json") for g in result.gates], "failures": failed_gate_lines(result.gates),
            "probes": probes_report(result.gates) or {}, "templates": _instance_templates(env_dir)}


def _instance_templates(env_dir: Path) -> dict[str, str]:
    """task_id -> template_id of the env's template instances (read as data; unreadable lines are skipped)."""
    out = {}
    try:
        lines = (env_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            task = json.loads(line)
        except ValueError:
            continue
        if isinstance(task, dict) and task.get("template_id") and task.get("task_id"):
            out[str(task["task_id"])] = str(task["template_id"])
    return out


@app.command()
@settings_options("check_pass_rate", "tool_timeout", "probe_threshold", "probe_margin", "allow_weak_sandbox")
def check(
    settings: Settings,
    env_dirs: list[Path] = typer.Argument(..., help="env folders, or folders holding env folders"),
    as_json: bool = typer.Option(False, "--json", help="print JSON, one object per env"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="only envs that are not verified, and the total"),
) -> None:
    """Replay every quality gate and tests.jsonl with no model; records each env's status in env.json.

    Exit 0 if every env is verified, 1 if any is not (each one is reported), 2 for a usage error."""
    dirs = _env_dirs(env_dirs)
    pool = _pool(settings)
    try:
        results = []
        for env_dir in dirs:
            results.append(_check_one(env_dir, settings, pool))
            if not as_json:
                _print_check(results[-1], quiet)
    finally:
        pool.close()
    verified = sum(r["status"] == "verified" for r in results)
    if as_json:
        typer.echo(json.dumps({"verified": verified, "envs": results}, indent=2))
    else:
        typer.echo(f"{verified}/{len(results)} env(s) verified")
    raise typer.Exit(0 if verified == len(results) else 1)


def _print_check(r: dict, quiet: bool) -> None:
    ok = r["status"] == "verified"
    if quiet and ok and not r["changed"]:
        return
    passed = sum(g["passed"] for g in r["gates"])
    counts = f" ({passed}/{len(r['gates'])} gates)" if r["gates"] else ""
    name = r["env_id"] if Path(r["path"]).name == r["env_id"] else f"{r['env_id']} in {r['path']}"
    typer.echo(f"{'ok  ' if ok else 'FAIL'} {name}: {r['status']}{counts}")
    if r["error"]:
        typer.echo(f"     could not be checked: {r['error']}")
    for line in r.get("failures", []):
        typer.echo(f"     {line}")
    from synth.folder.summary import probe_line

    templates = r.get("templates") or {}
    grouped: dict[str, list] = {}
    for task_id, records in (r.get("probes") or {}).items():
        if task_id in templates:  # a template's instances share a line: hundreds of them would bury the rest
            grouped.setdefault(templates[task_id], []).append(records)
        else:
            typer.echo(f"     probes {task_id}: {probe_line(records)}")
    for template_id, per_task in grouped.items():
        highest = max((float(p.get("reward") or 0) for records in per_task for p in records), default=0.0)
        paid = sum(any(p.get("passed") for p in records) for records in per_task)
        typer.echo(f"     probes of template {template_id} ({len(per_task)} instances): max {highest:.2f}"
                   + (f", paid on {paid} instance(s)!" if paid else ""))
    if r["changed"] and r["status"] != "error":
        typer.echo(f"     status changed: {r['previous_status']} -> {r['status']} (env.json and report.json updated)")
    if r.get("moved_from"):
        typer.echo(f"     moved to {r['path']}")


@app.command()
@settings_options("model", "verify")
def verify(
    settings: Settings,
    env_dirs: list[Path] = typer.Argument(..., help="built env folders, or folders holding them"),
) -> None:
    """Gold solutions, verifiers and the check loop on built envs; exit 0 only if every env ends verified."""
    from synth.llm import Gateway
    from synth.pipeline.verify import verify_env

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

    from synth.pipeline.runner import with_sandbox_threads

    try:
        results = asyncio.run(with_sandbox_threads(run_all()))
    finally:
        pool.close()
    for error in errors:
        typer.echo(f"error: {error}", err=True)
    from synth.pipeline.layout import place_env

    for result in results:
        moved = place_env(Path(result.path), result.status) if not result.budget_stopped else Path(result.path)
        _table(result.env_id, result.status, result.gates, console)
        if moved != Path(result.path):
            typer.echo(f"{result.env_id}: moved to {moved}")
        note = "budget reached; rerun to continue" if result.budget_stopped else "; ".join(result.reasons)[:300]
        typer.echo(f"{result.env_id}: {result.status}" + (f" (pass rate {result.pass_rate:.0%})"
                                                           if result.pass_rate is not None else "")
                   + (f" - {note}" if note else ""))
    verified = sum(r.verified for r in results)
    t = gateway.usage.total
    typer.echo(f"{verified}/{len(dirs)} env(s) verified; {t.calls} model calls, ${t.cost:.4f}")
    raise typer.Exit(0 if verified == len(dirs) else 1)
