"""Helpers for the verification tests: the library env of envkit.py with a full,
hand-checked tests.jsonl (so it passes every gate), the same tests as a
testing agent would answer them, a scripted checking agent, and small editors
that break one thing in an env folder.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from envkit import TOOL_BODIES, make_library_env

from synth.artifacts import Expectation, ToolTest
from synth.folder.format import read_env_draft, write_env
from synth.llm.script import Reply, RequestInfo
from synth.use.replay import observe_call

# (tool, arguments, expect, expected_error, expected_change, changed_tables)
LIBRARY_CASES: list[tuple[str, dict[str, Any], str, str, str, list[str]]] = [
    ("search_books", {"query": "Le Guin"}, "success", "", "none", []),
    ("search_books", {"query": "  "}, "error", "query must not be empty", "none", []),
    ("get_member", {"email": "maya.patel@example.com"}, "success", "", "none", []),
    ("get_member", {"email": "nobody@example.com"}, "error", "no member", "none", []),
    ("list_loans", {"member_id": 3}, "success", "", "none", []),
    ("list_loans", {"member_id": 99}, "error", "no member", "none", []),
    ("checkout_book", {"member_id": 2, "book_id": 3}, "success", "",
     "a new loan for member 2 and book 3; one fewer available copy of book 3", ["loans", "books"]),
    ("checkout_book", {"member_id": 2, "book_id": 4}, "error", "no copy available", "none", []),
    ("return_book", {"loan_id": 1}, "success", "", "loan 1 gets a return date; book 1 gets a copy back",
     ["loans", "books"]),
    ("return_book", {"loan_id": 9}, "error", "already returned", "none", []),
    ("reserve_book", {"member_id": 1, "book_id": 4}, "success", "", "a new active reservation", ["reservations"]),
    ("reserve_book", {"member_id": 1, "book_id": 3}, "error", "copies available", "none", []),
]

# return_book with a seeded bug: the loan is closed but the copy never goes back on the shelf.
BUGGY_RETURN_BOOK = TOOL_BODIES["return_book"].replace(
    'db.execute("UPDATE books SET available_copies = available_copies + 1 WHERE book_id = ?", (loan["book_id"],))\n',
    "")
assert BUGGY_RETURN_BOOK != TOOL_BODIES["return_book"]


def tool_tests(tool: str) -> list[dict[str, Any]]:
    """The testing agent's tests (ToolTestDraft JSON) for one library tool."""
    return [
        {"purpose": f"{expect} case of {name}", "arguments": args, "expect": expect, "expected_error": error,
         "expected_change": change, "changed_tables": tables}
        for name, args, expect, error, change, tables in LIBRARY_CASES if name == tool
    ]


def proposed_tests(tools: str) -> dict[str, Any]:
    """The testing agent's answer (ToolTestBatch JSON) for library tools "a+b+c" (a subject's tail)."""
    return {"tools": [{"tool": name, "tests": tool_tests(name)} for name in tools.split("+")]}


def record_tests(env_dir: Path) -> Path:
    """Run LIBRARY_CASES against the env in the sandbox and write them to tests.jsonl, judged pass."""
    from synth.runtime import Env

    draft = read_env_draft(env_dir)
    env = Env.load(env_dir)
    tests = []
    try:
        counters: dict[str, int] = {}
        for name, args, expect, error, change, tables in LIBRARY_CASES:
            counters[name] = counters.get(name, 0) + 1
            observed = observe_call(env, name, args, draft.volatile_columns)
            tests.append(ToolTest(
                test_id=f"{name}.{counters[name]}", tool=name, arguments=args, purpose=f"{expect} case",
                expectation=Expectation(outcome=expect, error=error, change=change, tables=tables),
                observed=observed, verdict="pass", reason="hand-checked").model_dump(mode="json"))
    finally:
        env.close()
    draft.tests = tests
    draft.status = "verified"
    return write_env(draft, env_dir)


def make_verified_library(tmp_path: Path) -> Path:
    return record_tests(make_library_env(tmp_path))


def copy_env(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def set_tool_body(env_dir: Path, tool: str, body: str) -> None:
    """Re-render tools.py with a new body for one tool (tools.json and everything else unchanged)."""
    draft = read_env_draft(env_dir)
    draft.tool_bodies[tool] = body
    write_env(draft, env_dir)


def set_verifier_body(env_dir: Path, task_id: str, body: str) -> None:
    draft = read_env_draft(env_dir)
    draft.verifier_bodies[task_id] = body
    write_env(draft, env_dir)


def edit_jsonl(path: Path, edit) -> None:
    """Apply `edit(record) -> record` to every line of a JSONL file."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(edit(r)) + "\n" for r in lines))


def judge_library(info: RequestInfo) -> Reply:
    """A scripted checking agent: pass every test, except a successful return_book call whose
    database change leaves the books table alone (the copy never went back on the shelf)."""
    prompt = info.messages[-1]["content"]
    verdicts = []
    for block in re.split(r"\n### ", prompt)[1:]:
        test_id = block.split("\n", 1)[0].strip()
        change = block.split("Database change", 1)[1] if "Database change" in block else ""
        observed = block.split("Observed:", 1)[1].split("\n", 1)[0].strip()
        ok = not (test_id.startswith("return_book") and observed.startswith("returned ")
                  and "\nbooks changed:" not in change)
        verdicts.append({"test_id": test_id, "verdict": "pass" if ok else "fail",
                         "reason": "correct" if ok else "the returned copy is not put back: books unchanged"})
    return Reply(json={"verdicts": verdicts})
