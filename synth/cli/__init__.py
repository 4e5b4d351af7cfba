"""The `synth` command line: parse flags, call one function, print the result.

One module per command group; each registers its commands on `synth.cli.app.app`
when imported. Every command body is a few lines; the work lives in the modules
it calls (synth.pipeline, synth.folder, synth.use, synth.view).
"""

from __future__ import annotations

from synth.cli import options  # noqa: F401  (config; settings as flags)
from synth.cli import model  # noqa: F401  (ping, cache)
from synth.cli import scenarios  # noqa: F401  (scenarios, dedup)
from synth.cli import expand  # noqa: F401  (expand)
from synth.cli import build  # noqa: F401  (build)
from synth.cli import verify  # noqa: F401  (verify, check)
from synth.cli import use  # noqa: F401  (serve, rollout, export)
from synth.cli import run  # noqa: F401  (run, show, stats)
from synth.cli import runs  # noqa: F401  (runs, rebuild-db)
from synth.cli import view  # noqa: F401  (view)
from synth.cli import tasks  # noqa: F401  (tasks, calibrate)
from synth.cli.app import app, main

__all__ = ["app", "main"]
