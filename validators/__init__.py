"""Model-free quality gates run on an env folder (import name: synth_validators).

One module per gate, each `run(env_dir, env=None) -> GateResult(name, passed,
evidence, details)`; evidence lines name the task or tool at fault, and
details["tasks"] / details["tools"] map them to their problems so the check
loop can route repairs. No gate calls a model; gates that execute the env do
so through synth.runtime, whose sandbox runs the generated code.

An env is `verified` only if every gate passes (see `all_passed`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import GateResult
from synth.errors import SynthError

from . import (database, deterministic, discriminates, probes, regression, reward_cases, robust, rules, solvable,
               tool_contract)
from .common import read_folder

GATES = (database, tool_contract, rules, solvable, discriminates, probes, reward_cases, deterministic, robust,
         regression)
GATE_NAMES = tuple(g.NAME for g in GATES)
STATIC_GATES = frozenset({database.NAME, tool_contract.NAME})  # read files only, run no env code


def run_all(env_dir: Path | str, *, pool: Any = None, required_rate: float | None = None,
            settings: Any = None) -> list[GateResult]:
    """Every gate's result, in GATES order. Raises InputError only when env_dir is not an
    env folder; an env whose code cannot be loaded fails each executing gate with the reason.
    `settings` (synth.config.Settings) gives the probe threshold and margin."""
    threshold = settings.probe_threshold if settings is not None else probes.DEFAULT_THRESHOLD
    margin = settings.probe_margin if settings is not None else probes.DEFAULT_MARGIN
    folder = read_folder(env_dir)
    env, load_error = None, None
    try:
        from synth.runtime import Env

        env = Env.load(folder.root, pool=pool)
    except SynthError as exc:
        load_error = exc
    results = []
    # Envs are only as trustworthy as the sandbox that ran them: without its OS layer they are
    # not marked verified unless the operator said so (--allow-weak-sandbox).
    weak = getattr(env.backend, "unverifiable", lambda: None)() if env is not None else None
    if weak:
        results.append(GateResult(name="sandbox", passed=False, evidence=[weak], details={"tasks": {}, "tools": {}}))
    try:
        for gate in GATES:
            if gate.NAME not in STATIC_GATES and env is None:
                results.append(GateResult(name=gate.NAME, passed=False,
                                          evidence=[f"the env could not be loaded: {load_error}"],
                                          details={"tasks": {}, "tools": {}}))
            elif gate is regression and required_rate is not None:
                results.append(gate.run(folder.root, env, required_rate=required_rate))
            elif gate is probes:
                results.append(gate.run(folder.root, env, threshold=threshold, margin=margin))
            elif gate is reward_cases:
                results.append(gate.run(folder.root, env, threshold=threshold))
            else:
                results.append(gate.run(folder.root, env))
    finally:
        if env is not None:
            env.close()
    return results


def all_passed(results: list[GateResult]) -> bool:
    return bool(results) and all(r.passed for r in results)


__all__ = ["GATES", "GATE_NAMES", "all_passed", "run_all"]
