"""The Typer app every command module registers on, and `main()` around it.

Errors that users can fix (subclasses of SynthError) are printed as one line
starting with `error:` and exit with status 2. This module imports no command
module, so they can all import `app` from here without a cycle.
"""

from __future__ import annotations

import sys

import typer

from synth import __version__
from synth.errors import SynthError

app = typer.Typer(
    help="Synthesize verified tool-use environments for training LLM agents with RL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"synth {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """synth command line."""


def main() -> None:
    try:
        app()
    except SynthError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun the same command to resume", err=True)
        sys.exit(130)
