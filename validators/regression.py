"""Gate `regression`: tests.jsonl replays with the recorded verdicts.

Every test the check loop recorded is run again on a fresh episode, with no
model: its setup calls and then the call under test must reproduce the
recorded observation (success or the same error, the same database change with
volatile columns aside, no newly broken rule of rules.json, and for read-only
tools the same result), so the checking agent's verdict still holds. The
recorded verdicts themselves must reach the pass rate the check loop required,
and none may blame the tool ("fail"): a known tool bug never ships.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.artifacts import PASSING_VERDICTS, GateResult
from synth.config import Settings
from synth.use.replay import observation_mismatch, observe_call

from .common import EnvFolder, Findings, run_with_env

NAME = "regression"
DEFAULT_PASS_RATE = Settings.model_fields["check_pass_rate"].default


def pass_rate(verdicts: list[str | None]) -> float:
    """Share of tests whose verdict does not blame the tool (1.0 when there are none)."""
    return sum(v in PASSING_VERDICTS for v in verdicts) / len(verdicts) if verdicts else 1.0


def _check(folder: EnvFolder, env: Any, found: Findings, required_rate: float) -> None:
    for problem in folder.problems.get("tests.jsonl", []):
        found.env(problem)
    for test in folder.tests:
        spec = folder.tool(test.tool)
        if test.observed is None or test.verdict is None:  # the loop's bookkeeping, not a bug in the tool
            found.env(f"tool {test.tool}: test {test.test_id} was never "
                      f"{'run' if test.observed is None else 'judged'}")
            continue
        replayed = observe_call(env, test.tool, test.arguments, folder.volatile, setup=test.setup,
                                rules=folder.rules)
        mismatch = observation_mismatch(test.observed, replayed, compare_result=bool(spec and spec.read_only))
        if mismatch:
            found.tool(test.tool, f"test {test.test_id} no longer reproduces its recorded verdict "
                                  f"{test.verdict!r}: {mismatch}")
        if test.verdict == "fail":  # a tool blamed by its test never ships, whatever the rate
            found.env(f"tool {test.tool}: test {test.test_id} was judged a tool bug: {test.reason[:200]}")
    rate = pass_rate([t.verdict for t in folder.tests])
    found.details.update(tests=len(folder.tests), pass_rate=round(rate, 4))
    if rate < required_rate:
        failing = sorted({t.tool for t in folder.tests if t.verdict == "fail"})
        found.env(f"recorded test verdicts pass {rate:.0%} < {required_rate:.0%} (failing tools: "
                  f"{', '.join(failing)})")


def run(env_dir: Path | str, env: Any = None, *, required_rate: float = DEFAULT_PASS_RATE) -> GateResult:
    return run_with_env(NAME, env_dir, env, lambda f, e, fd: _check(f, e, fd, required_rate))
