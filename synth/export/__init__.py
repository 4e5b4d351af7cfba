"""Exporters, one module per trainer format: sft (TRL-style messages + tools rows),
verl (parquet + agent loop), verifiers (an installable verifiers package) and awm
(Agent World Model dataset files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.errors import InputError

FORMATS = ("sft", "verl", "verifiers", "awm")


def export(fmt: str, src: Path | str, out: Path | str, *, include_failed: bool = False, arguments: str = "dict",
           server_url: str = "http://127.0.0.1:8000", name: str = "synth-envs", max_turns: int = 10,
           include_rejected: bool = False, **_: Any) -> str:
    """Run one exporter; returns a one-line report of what was written."""
    if fmt == "sft":
        from synth.export.sft import export_sft

        return export_sft(src, out, include_failed=include_failed, arguments=arguments)  # type: ignore[arg-type]
    if fmt == "verl":
        from synth.export.verl import export_verl

        return export_verl(src, out, server_url=server_url, max_turns=max_turns, include_rejected=include_rejected)
    if fmt == "verifiers":
        from synth.export.prime_verifiers import export_verifiers

        return export_verifiers(src, out, name=name, server_url=server_url, include_rejected=include_rejected)
    if fmt == "awm":
        from synth.export.awm import export_awm

        return export_awm(src, out, include_rejected=include_rejected)
    raise InputError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
