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
    allowed_host: Optional[list[str]] = typer.Option(None, "--allowed-host", help="a name this machine is reached "
                                                     "by, off loopback (repeatable; IP addresses always work)"),
) -> None:
    """Open a web page over runs and env folders: funnel, env list, env pages, replays, Try it, review.

    Off loopback (--host 0.0.0.0) every request needs the token printed at start."""
    from synth.errors import InputError
    from synth.use.server.run import serve_forever
    from synth.view.app import create_app
    from synth.view.sources import resolve

    if workers < 1:
        raise InputError("--workers must be at least 1")
    sources = resolve(paths or [Path("generated")])
    envs, runs = sources.envs(), sources.runs()
    app = create_app(sources, host=host, reviewer=reviewer, workers=workers, allowed_hosts=allowed_host or ())
    url = f"http://{host}:{port}/" + (f"?token={app.token}" if app.token else "")
    typer.echo(f"synth view: {len(envs)} env folder(s), {len(runs)} run(s) on {url} (Ctrl-C stops)")
    if app.token:
        typer.echo("listening off loopback: open the URL above (with its token) once; the browser keeps the token "
                   "in a cookie. Anyone without it is refused.")
    serve_forever(app, host, port)
