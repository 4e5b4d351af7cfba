"""`synth runs` (the runs of an output folder) and `synth rebuild-db` (an env's database from its SQL)."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any, Optional

import typer

from synth.cli.app import app
from synth.cli.options import settings_options
from synth.config import Settings
from synth.errors import InputError


def _json_file(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_row(folder: Path) -> dict[str, Any]:
    """One run folder as a row: what it was, how far it got, what it cost."""
    from synth.pipeline.store import RUN_DB, RunStore

    config, summary = _json_file(folder / "config.json"), _json_file(folder / "summary.json")
    store = RunStore(folder)
    try:
        usage, counts = store.usage()["total"], store.counts()
    finally:
        store.close()
    funnel = summary.get("funnel") or {}
    if summary:
        state = "done" if summary.get("stop_reason") == "reached" else f"stopped: {summary.get('stop_reason')}"
    elif any(c.get("running") for c in counts.values()):
        state = "unfinished (running, or killed: rerun its command to resume)"
    else:
        state = "unfinished (rerun its command to resume)"
    command = config.get("command") or ("run" if "n" in config else "?")
    updated = (folder / RUN_DB).stat().st_mtime
    return {
        "run_id": folder.name, "path": str(folder), "command": command, "model": config.get("model"),
        "wanted": summary.get("wanted", config.get("n")), "verified": funnel.get("verified"), "state": state,
        "stop_message": summary.get("stop_message"), "calls": usage["calls"], "cost": usage["cost"],
        "tokens": usage["prompt_tokens"] + usage["completion_tokens"],
        "updated": _dt.datetime.fromtimestamp(updated).strftime("%Y-%m-%d %H:%M:%S"),
    }


def list_runs(out: Path) -> list[dict[str, Any]]:
    """Every run folder under <out>/runs, most recently updated first."""
    from synth.pipeline.store import RUN_DB

    runs_dir = Path(out) / "runs"
    if not Path(out).is_dir():
        raise InputError(f"no output folder at {out}; pass the --out of your runs (default: generated)")
    folders = [p for p in runs_dir.iterdir() if (p / RUN_DB).is_file()] if runs_dir.is_dir() else []
    return sorted((run_row(p) for p in folders), key=lambda r: r["updated"], reverse=True)


@app.command()
@settings_options("out")
def runs(
    settings: Settings,
    folder: Optional[Path] = typer.Argument(None, help="output folder \\[default: --out, i.e. generated]"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """List the runs of an output folder: command, model, verified of wanted, state, calls and cost."""
    out = folder or Path(settings.out)
    rows = list_runs(out)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo(f"no runs in {out}/runs yet")
        return
    typer.echo(f"{len(rows)} run(s) in {out}/runs, newest first (`synth stats RUN_ID` shows one):")
    for r in rows:  # plain lines: they fit a terminal of any width and a pipe alike
        verified = "" if r["verified"] is None else f"  {r['verified']}/{r['wanted']} verified"
        typer.echo(f"{r['run_id']}  {r['updated']}  {r['command']}  {r['model'] or '-'}{verified}  "
                   f"{r['calls']} calls  ${r['cost']:.4f}  {r['state']}")


def rebuild_db(env_dir: Path) -> Path:
    """db/initial.sqlite again from db/schema.sql and db/data.sql (foreign keys on), written only
    when it matches env.json's initial_db_sha256, so the env is exactly the one that was verified."""
    from synth.atomic import write_atomic
    from synth.folder.database import DatabaseError, build_database, db_sha256

    root = Path(env_dir)
    manifest = _json_file(root / "env.json")
    if not manifest:
        raise InputError(f"{root} is not an env folder (no readable env.json)")
    try:
        schema, data = ((root / "db" / name).read_text(encoding="utf-8") for name in ("schema.sql", "data.sql"))
    except OSError as exc:
        raise InputError(f"{root}: cannot rebuild the database: {exc.filename} cannot be read "
                         f"({exc.strerror}); build the env again") from None
    try:
        db = build_database(schema, data)
    except DatabaseError as exc:
        raise InputError(f"{root}: db/schema.sql and db/data.sql no longer build a database ({exc}); "
                         "build the env again") from None
    wanted = manifest.get("initial_db_sha256")
    if wanted and db_sha256(db) != wanted:
        raise InputError(f"{root}: the database rebuilt from db/schema.sql and db/data.sql differs from the one "
                         "env.json records (initial_db_sha256); the SQL files changed since the build, so nothing "
                         "was written")
    target = root / "db" / "initial.sqlite"
    write_atomic(target, db)
    return target


@app.command("rebuild-db")
def rebuild_db_command(
    env_dirs: list[Path] = typer.Argument(..., help="env folders whose db/initial.sqlite is missing or damaged"),
) -> None:
    """Rebuild db/initial.sqlite from db/schema.sql and db/data.sql; checked against env.json's sha256."""
    for env_dir in env_dirs:
        typer.echo(f"rebuilt {rebuild_db(env_dir)}")
