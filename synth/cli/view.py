"""`synth view`: browse runs and env folders in a local web app, and record review decisions."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from synth.cli.app import app


@app.command()
def view(
    paths: Optional[list[Path]] = typer.Argument(None, help="output folder (default generated/), run folder or env "
                                                "folders"),
    host: str = typer.Option("127.0.0.1", "--host", help="interface to listen on (keep the default: the viewer "
                             "can run env code and write review.json)"),
    port: int = typer.Option(8765, "--port", help="TCP port"),
    reviewer: Optional[str] = typer.Option(None, "--reviewer", help="name stored in review.json (default: your "
                                           "user name)"),
    workers: int = typer.Option(2, "--workers", help="sandbox worker processes for replays and Try it"),
) -> None:
    """Open a web page over runs and env folders: funnel, env list, env pages, replays, Try it, review."""
    from synth.errors import InputError
    from synth.use.server.run import serve_forever
    from synth.view.app import create_app
    from synth.view.sources import resolve

    if workers < 1:
        raise InputError("--workers must be at least 1")
    sources = resolve(paths or [Path("generated")])
    envs, runs = sources.envs(), sources.runs()
    typer.echo(f"synth view: {len(envs)} env folder(s), {len(runs)} run(s) on http://{host}:{port}/ (Ctrl-C stops)")
    serve_forever(create_app(sources, host=host, reviewer=reviewer, workers=workers), host, port)
