"""Every quality gate against a deliberately broken copy of the library env: each
break is caught by the gate meant for it, with evidence naming the task or tool.
The intact env passes every gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from envkit import TOOL_BODIES, VERIFIER_BODIES
from verifykit import copy_env, edit_jsonl, make_verified_library, set_tool_body, set_verifier_body

import synth_validators
from synth.errors import InputError
from synth_validators import database, deterministic, discriminates, regression, robust, solvable, tool_contract


@pytest.fixture(scope="module")
def verified(tmp_path_factory) -> Path:
    return make_verified_library(tmp_path_factory.mktemp("lib"))


@pytest.fixture
def env(verified: Path, tmp_path: Path) -> Path:
    return copy_env(verified, tmp_path / "city_library")


def _fails(result, *names: str) -> None:
    assert not result.passed, result
    text = " | ".join(result.evidence)
    for name in names:
        assert name in text, f"{name!r} not named in evidence: {text}"


def test_intact_env_passes_every_gate(env: Path) -> None:
    results = synth_validators.run_all(env)
    assert [r.name for r in results] == list(synth_validators.GATE_NAMES)
    assert all(r.passed for r in results), [(r.name, r.evidence) for r in results if not r.passed]
    assert synth_validators.all_passed(results)


def test_database_gate_catches_data_that_no_longer_rebuilds_the_database(env: Path) -> None:
    data = env / "db" / "data.sql"
    data.write_text(data.read_text() + "INSERT INTO members VALUES (6, 'Ivy Chen', 'ivy@example.com', "
                                       "'standard', 3, '2024-01-01');\n")
    _fails(database.run(env), "do not rebuild to db/initial.sqlite")
    (env / "db" / "data.sql").write_text("INSERT INTO loans VALUES (99, 1, 42, 'a', 'b', NULL, 'c');\n")
    _fails(database.run(env), "rebuilding from db/schema.sql + db/data.sql")


def test_tool_contract_catches_a_parameter_missing_from_tools_py(env: Path) -> None:
    tools = json.loads((env / "tools.json").read_text())
    search = next(t for t in tools if t["name"] == "search_books")
    search["parameters"]["properties"]["branch"] = {"type": "string", "description": "Library branch"}
    (env / "tools.json").write_text(json.dumps(tools))
    result = tool_contract.run(env)
    _fails(result, "tool search_books", "'branch' is in tools.json but missing from tools.py")
    assert list(result.details["tools"]) == ["search_books"]


def test_tool_contract_catches_required_mismatch_and_untested_tools(env: Path) -> None:
    tools = json.loads((env / "tools.json").read_text())
    loans = next(t for t in tools if t["name"] == "list_loans")
    loans["parameters"]["required"].append("status")
    (env / "tools.json").write_text(json.dumps(tools))
    edit_jsonl(env / "tests.jsonl", lambda t: t if t["tool"] != "reserve_book" else {**t, "tool": "get_member"})
    result = tool_contract.run(env)
    _fails(result, "tool list_loans: parameter 'status' is required in tools.json but optional in tools.py",
           "tool reserve_book: no test in tests.jsonl exercises it")


def test_solvable_catches_a_task_whose_gold_solution_fails(env: Path) -> None:
    def break_gold(task: dict) -> dict:
        if task["task_id"] == "task_02":  # The Hound of the Baskervilles has no copy on the shelf
            task["gold"][-1]["arguments"]["book_id"] = 4
        return task

    edit_jsonl(env / "tasks.jsonl", break_gold)
    result = solvable.run(env)
    _fails(result, "task task_02", "checkout_book", "no copy of")
    assert list(result.details["tasks"]) == ["task_02"]


def test_discriminates_catches_a_verifier_that_always_passes(env: Path) -> None:
    set_verifier_body(env, "task_03", 'return [check("looks_fine", True)]')
    result = discriminates.run(env)
    _fails(result, "task task_03", "passes on the untouched initial state")
    assert solvable.run(env).passed  # the gold replay still "passes": only this gate can tell


def test_discriminates_catches_a_task_already_satisfied_by_the_initial_data(env: Path) -> None:
    # "Make sure Maya is on the waiting list for A Brief History of Time": she already is.
    task = {"task_id": "task_05", "instruction": "Make sure Maya Patel (maya.patel@example.com) is on the "
            "waiting list for A Brief History of Time.", "kind": "write", "difficulty": "easy", "split": "train",
            "gold": [{"tool": "get_member", "arguments": {"email": "maya.patel@example.com"}}],
            "expected_answer": None, "verifier": "verify_task_05"}
    with (env / "tasks.jsonl").open("a") as fh:
        fh.write(json.dumps(task) + "\n")
    from synth.folder.format import read_env_draft, write_env

    draft = read_env_draft(env)
    draft.verifier_bodies["task_05"] = (
        "row = final_db.execute(\"SELECT 1 FROM reservations WHERE member_id = 2 AND book_id = 6 "
        "AND status = 'active'\").fetchone()\nreturn [check('maya_on_waiting_list', row is not None)]")
    write_env(draft, env)
    result = discriminates.run(env)
    _fails(result, "task task_05", "passes on the untouched initial state")
    assert "task_05" in result.details["tasks"] and len(result.details["tasks"]) == 1


def test_discriminates_catches_a_verifier_that_ignores_the_last_change(env: Path) -> None:
    # task_03 returns two loans; this verifier only looks at the first one.
    set_verifier_body(env, "task_03", 'row = final_db.execute("SELECT returned_on FROM loans WHERE loan_id = 1")'
                                      '.fetchone()\nreturn [check("loan_1_returned", row is not None and '
                                      'row["returned_on"] is not None)]')
    _fails(discriminates.run(env), "task task_03", "last state-changing call (return_book) is left out")


def test_robust_catches_a_verifier_that_raises(env: Path) -> None:
    set_verifier_body(env, "task_01", 'return [check("answer_says_two", "2" in answer.lower())]')
    assert solvable.run(env).passed  # with the expected answer it works...
    result = robust.run(env)
    _fails(result, "task task_01", "AttributeError")  # ...but answer=None raises


def test_robust_catches_a_verifier_that_raises_only_on_states_random_calls_reach(env: Path) -> None:
    # The author assumed no loan is returned during this task: true for the gold solution
    # and the initial state, false once the seeded random calls return a book.
    body = ('returned = "SELECT count(*) FROM loans WHERE returned_on IS NOT NULL"\n'
            'assert final_db.execute(returned).fetchone()[0] == initial_db.execute(returned).fetchone()[0]\n'
            + VERIFIER_BODIES["task_04"])
    set_verifier_body(env, "task_04", body)
    assert solvable.run(env).passed and discriminates.run(env).passed
    result = robust.run(env)
    _fails(result, "task task_04", "AssertionError", "random calls")
    assert list(result.details["tasks"]) == ["task_04"]


def test_deterministic_catches_a_verifier_that_uses_random(env: Path) -> None:
    set_verifier_body(env, "task_01", 'import random\ntext = (answer or "").lower()\n'
                                      'return [check("answer_says_two", "2" in text, 1.0 + random.random())]')
    result = deterministic.run(env)
    _fails(result, "task task_01", "scored differently")


def test_regression_catches_a_write_tool_that_does_nothing(env: Path) -> None:
    set_tool_body(env, "return_book", 'return {"loan_id": loan_id, "returned_on": "2025-06-02"}')
    result = regression.run(env)
    _fails(result, "tool return_book", "test return_book.1 no longer reproduces")
    assert list(result.details["tools"]) == ["return_book"]


def test_regression_requires_the_recorded_pass_rate(env: Path) -> None:
    edit_jsonl(env / "tests.jsonl", lambda t: {**t, "verdict": "fail"} if t["tool"] == "get_member" else t)
    _fails(regression.run(env), "pass 83% < 95%", "get_member")


def test_a_tool_that_crashes_fails_the_env_through_the_gates(env: Path) -> None:
    set_tool_body(env, "list_loans", TOOL_BODIES["list_loans"].replace("status = status or", "status = 1 / 0 or"))
    results = {r.name: r for r in synth_validators.run_all(env)}
    _fails(results["regression"], "tool list_loans")


def test_broken_code_fails_executing_gates_with_the_reason(env: Path) -> None:
    (env / "tools.py").write_text((env / "tools.py").read_text() + "\nimport os\n")
    results = {r.name: r for r in synth_validators.run_all(env)}
    assert results["database"].passed
    for name in ("solvable", "discriminates", "deterministic", "robust", "regression"):
        _fails(results[name], "could not be loaded", "import of 'os' is not allowed")


def test_run_all_rejects_a_folder_that_is_not_an_env(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="env folder not found"):
        synth_validators.run_all(tmp_path / "missing")
    with pytest.raises(InputError, match="no env.json"):
        synth_validators.run_all(tmp_path)
