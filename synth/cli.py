"""The `synth` command line: parse flags, call one function, print the result.

Every command body is a few lines; the work lives in the modules it calls.
Errors that users can fix (subclasses of SynthError) are printed as one line
starting with `error:` and exit with status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

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


def settings_from(**flags: Any):
    """Resolve Settings with CLI flags on top (None = flag not given)."""
    from synth.config import load_settings

    return load_settings(flags)


# Commands register themselves on `app` when their module is imported. Keeping
# each group in its own module keeps this file thin.
from synth import cli_settings  # noqa: E402,F401  (config; settings as flags)
from synth import cli_model  # noqa: E402,F401  (model: ping, cache)
from synth import cli_scenarios  # noqa: E402,F401
from synth import cli_expand  # noqa: E402,F401  (scenarios)
from synth import cli_build  # noqa: E402,F401  (build)
from synth import cli_verify  # noqa: E402,F401  (verify, check)
from synth import cli_use  # noqa: E402,F401  (serve, rollout, export)
from synth import cli_run  # noqa: E402,F401  (run, show, stats)
from synth import cli_view  # noqa: E402,F401  (view)


def main() -> None:
    try:
        app()
    except SynthError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted; rerun the same command to resume", err=True)
        sys.exit(130)
