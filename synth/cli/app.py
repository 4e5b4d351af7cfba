"""The Typer app every command module registers on, and `main()` around it.

Errors that users can fix (subclasses of SynthError, and OS errors such as an
output folder that cannot be written) are printed as one line starting with
`error:` and exit with status 2. This module imports no command
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


INTERRUPTED = "interrupted; rerun the same command to resume (work already done is kept)"


def os_error_line(exc: OSError) -> str:
    """One line for a file-system error: the path and what the system said, never a traceback."""
    what = exc.strerror or type(exc).__name__
    where = f" {exc.filename}" if exc.filename else ""
    if exc.filename2:
        where += f" -> {exc.filename2}"
    return f"cannot use{where}: {what}"


def main() -> None:
    try:
        app()
    except SynthError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:  # a folder that cannot be written, a file where a folder should be, a full disk
        typer.echo(f"error: {os_error_line(exc)}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo(INTERRUPTED, err=True)
        sys.exit(130)
    except SystemExit as exc:
        if exc.code == 130:  # Typer turns Ctrl-C into a silent exit 130: say what it means
            typer.echo(INTERRUPTED, err=True)
        raise
