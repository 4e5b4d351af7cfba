"""Exporters, one module per trainer format: sft (TRL-style messages + tools rows, from
trajectories or from gold solutions), verl (parquet + agent loop), verifiers (an
installable verifiers package) and awm (Agent World Model dataset files)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.errors import InputError

FORMATS = ("sft", "verl", "verifiers", "awm")
SFT_SOURCES = ("trajectories", "gold")


def export(fmt: str, src: Path | str, out: Path | str, *, include_failed: bool = False, arguments: str = "dict",
           server_url: str = "http://127.0.0.1:8000", name: str = "synth-envs", max_turns: int = 10,
           source: str = "trajectories", include_rejected: bool = False, tokenizer: str | None = None,
           max_prompt_length: int | None = None, max_response_length: int | None = None, reward: str = "rubric",
           pass_rate: tuple[float, float] | None = None, **_: Any) -> str:
    """Run one exporter; returns a report of what was written (warnings on lines of their own).
    `reward` (rubric | state | both) is the reward the exported rows are scored with; `pass_rate` (LO, HI)
    keeps only the tasks whose calibrated pass rate (calibration.json) lies in the band."""
    if reward not in ("rubric", "state", "both"):
        raise InputError(f"--reward must be rubric, state or both, not {reward!r}")
    if reward != "rubric" and (fmt == "awm" or (fmt == "sft" and source != "gold")):
        raise InputError(f"--reward {reward} applies to verl, verifiers and sft --from gold; {fmt} exports "
                         "use the verifiers' rubric (AWM's files) or the rewards the trajectories recorded")
    if pass_rate is not None and fmt == "sft" and source != "gold":
        raise InputError("--pass-rate filters the tasks of env folders: use it with verl, verifiers, awm or "
                         "sft --from gold (trajectories already passed or failed)")
    if fmt == "sft":
        if source not in SFT_SOURCES:
            raise InputError(f"--from must be one of {', '.join(SFT_SOURCES)}")
        if source == "gold":
            from synth.use.export.sft_gold import export_sft_gold

            return export_sft_gold(src, out, arguments=arguments, include_rejected=include_rejected,  # type: ignore[arg-type]
                                   reward=reward, tokenizer=tokenizer, pass_rate=pass_rate)
        from synth.use.export.sft import export_sft

        return export_sft(src, out, include_failed=include_failed, arguments=arguments,  # type: ignore[arg-type]
                          tokenizer=tokenizer)
    if fmt == "verl":
        from synth.use.export.verl import DEFAULT_RESPONSE_LENGTH, export_verl

        return export_verl(src, out, server_url=server_url, max_turns=max_turns, tokenizer=tokenizer,
                           max_prompt_length=max_prompt_length,
                           max_response_length=max_response_length or DEFAULT_RESPONSE_LENGTH,
                           include_rejected=include_rejected, reward=reward, pass_rate=pass_rate)
    if fmt == "verifiers":
        from synth.use.export.prime_verifiers import export_verifiers

        return export_verifiers(src, out, name=name, server_url=server_url, include_rejected=include_rejected,
                                reward=reward, pass_rate=pass_rate)
    if fmt == "awm":
        from synth.use.export.awm import export_awm

        return export_awm(src, out, include_rejected=include_rejected, pass_rate=pass_rate)
    raise InputError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
