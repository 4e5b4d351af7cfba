"""Env fixtures for the export and MCP tests: the library env with the env.json fields
of newer pipelines (`today`, `acting_user`) and a tests.jsonl of observed tool calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envkit import make_library_env
from synth.artifacts import Expectation, ToolTest
from synth.use.replay import observe_call

TODAY = "2025-06-02"
ACTING_USER = {"table": "members", "id": 2, "name": "Maya Patel", "role": "member"}

# (tool, arguments) the check loop could have run: one read, one additive write, one update
OBSERVED_CALLS = [
    ("search_books", {"query": "Dune"}),
    ("reserve_book", {"member_id": 1, "book_id": 4}),
    ("return_book", {"loan_id": 1}),
]


def add_agent_context(env_dir: Path, today: str | None = TODAY, acting_user: dict | None = ACTING_USER) -> None:
    """Write env.json's `today` and `acting_user` (the contract of newer pipelines)."""
    path = env_dir / "env.json"
    data = json.loads(path.read_text())
    data.update(today=today, acting_user=acting_user)
    path.write_text(json.dumps(data, indent=2))


def record_tool_tests(env_dir: Path, calls: list[tuple[str, dict[str, Any]]] = OBSERVED_CALLS) -> None:
    """tests.jsonl with each call's real observation (run in the sandbox), all judged pass."""
    from synth.runtime import Env

    with Env.load(env_dir) as env:
        volatile = env.manifest.volatile_columns
        records = []
        for i, (tool, arguments) in enumerate(calls, 1):
            observed = observe_call(env, tool, arguments, volatile)
            change = "none" if not observed.diff else "some"
            records.append(ToolTest(test_id=f"{tool}.{i}", tool=tool, arguments=arguments, purpose="fixture",
                                    expectation=Expectation(outcome="success", change=change), observed=observed,
                                    verdict="pass"))
    (env_dir / "tests.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in records))


def make_context_library(root: Path) -> Path:
    """The library env under root/envs with today, acting_user and observed tool tests."""
    env_dir = make_library_env(root / "envs")
    add_agent_context(env_dir)
    record_tool_tests(env_dir)
    return env_dir
