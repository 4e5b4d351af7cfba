"""Env folder writer, database helpers and the runtime, on the hand-written library env."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from envkit import GOLD_ANSWERS, library_draft, make_library_env, run_gold
from synth.artifacts import ToolParam
from synth.folder.database import (DatabaseError, build_database, db_sha256, diff, open_bytes, run_script,
                            split_statements, table_counts)
from synth.errors import InputError
from synth.folder.format import EnvFolderError, read_env_draft, render_tools_py, write_env
from synth.folder.toolschema import check_portable_schema, params_to_schema, schema_to_params
from synth.runtime import Env, SandboxPool


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2, call_timeout=5.0) as p:
        yield p


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return make_library_env(tmp_path_factory.mktemp("envs"))


@pytest.fixture(scope="module")
def env(library, pool):
    with Env.load(library, pool=pool) as e:
        yield e


def _variant(tmp_path: Path, name: str, **bodies: str) -> Path:
    """The library env with some tool bodies replaced (to make it misbehave)."""
    draft = library_draft()
    draft = draft.model_copy(update={"tool_bodies": {**draft.tool_bodies, **bodies}, "status": "built"})
    return write_env(draft, tmp_path / name)


# --------------------------------------------------------------------------- env folder


def test_folder_has_every_file_and_a_consistent_manifest(library):
    for rel in ("env.json", "scenario.md", "db/schema.sql", "db/data.sql", "db/initial.sqlite", "tools.py",
                "tools.json", "tasks.jsonl", "verifiers.py", "tests.jsonl", "report.json", "README.md"):
        assert (library / rel).is_file(), rel
    manifest = json.loads((library / "env.json").read_text())
    assert manifest["initial_db_sha256"] == db_sha256((library / "db/initial.sqlite").read_bytes())
    assert manifest["counts"] == {"tools": 6, "tasks": 4, "tests": 0, "tables": 4, "rows": 24}
    tasks = [json.loads(line) for line in (library / "tasks.jsonl").read_text().splitlines()]
    assert [t["verifier"] for t in tasks] == [f"verify_task_0{i}" for i in range(1, 5)]
    assert "| `loans` | 10 |" in (library / "README.md").read_text()
    assert not list(library.parent.glob(".city_library.*"))  # no temp or old folder left behind


def test_folder_round_trips_through_read_env_draft(library, tmp_path):
    draft = read_env_draft(library)
    assert draft == library_draft().model_copy(update={
        "tool_bodies": draft.tool_bodies, "verifier_bodies": draft.verifier_bodies, "tasks": draft.tasks})
    assert draft.tool_bodies["search_books"].startswith('if not query.strip():')
    copy = write_env(draft, tmp_path / "copy")
    for path in sorted(library.rglob("*")):
        if path.is_file():
            assert (copy / path.relative_to(library)).read_bytes() == path.read_bytes(), path.name


def test_repair_rewrites_one_body_and_replaces_the_folder(library, tmp_path):
    dest = write_env(read_env_draft(library), tmp_path / "lib")
    draft = read_env_draft(dest)
    draft.tool_bodies["get_member"] = "return {'email': email}"
    write_env(draft, dest)
    again = read_env_draft(dest)
    assert again.tool_bodies["get_member"] == "return {'email': email}"
    assert again.tool_bodies["return_book"] == draft.tool_bodies["return_book"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib"]


def test_a_failed_draft_is_written_without_a_database(tmp_path):
    draft = library_draft().model_copy(update={
        "status": "failed", "failure_reason": "schema does not build", "schema_sql": "CREATE TABLE (;"})
    path = write_env(draft, tmp_path / "failed")
    assert not (path / "db/initial.sqlite").exists()
    manifest = json.loads((path / "env.json").read_text())
    assert (manifest["status"], manifest["failure_reason"], manifest["initial_db_sha256"]) == (
        "failed", "schema does not build", "")
    assert read_env_draft(path).schema_sql == "CREATE TABLE (;\n"
    with pytest.raises(DatabaseError):  # a draft that claims to be fine must build
        write_env(draft.model_copy(update={"status": "built"}), tmp_path / "built")
    assert not (tmp_path / "built").exists()


def test_render_refuses_names_that_would_break_the_module():
    draft = library_draft()
    bad = draft.tools[0].model_copy(update={"name": "json"})
    with pytest.raises(EnvFolderError, match="'json' is not a usable"):
        render_tools_py("x", "X", [bad], {})
    with pytest.raises(EnvFolderError, match="unknown tool 'nope'"):
        render_tools_py("x", "X", draft.tools, {"nope": "return 1"})


def test_docstring_with_quotes_and_backslashes_renders_valid_python():
    tool = library_draft().tools[1].model_copy(update={"description": 'Say """hi""" \\ and end with "quote"'})
    source = render_tools_py("x", "X", [tool], {"get_member": "return 1"})
    namespace: dict = {}
    exec(compile(source, "tools.py", "exec"), namespace)  # noqa: S102 - our own rendered test code
    assert namespace["get_member"].__doc__ == tool.description


def test_portable_schema_helpers_round_trip_and_reject_the_rest():
    params = [ToolParam(name="q", type="string", description="query"),
              ToolParam(name="tags", type="array", items="string", enum=["a", "b"], required=False),
              ToolParam(name="n", type="integer", required=False, enum=[1, 2])]
    schema = params_to_schema(params)
    assert schema["additionalProperties"] is False and schema["required"] == ["q"]
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
    assert schema_to_params(schema) == params
    assert check_portable_schema(schema) == []
    nested = {"type": "object", "properties": {"o": {"type": "object"}}, "required": []}
    assert any("type must be one of" in p for p in check_portable_schema(nested))
    any_of = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}]}}, "required": ["y"]}
    problems = check_portable_schema(any_of)
    assert any("anyOf" in p for p in problems) and any("unknown property 'y'" in p for p in problems)
    assert check_portable_schema({"type": "object", "properties": {"db": {"type": "string"}}})


# --------------------------------------------------------------------------- database


def test_run_script_reports_each_failing_statement_and_keeps_going():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    errors = run_script(conn, """
        CREATE TABLE a (id INTEGER PRIMARY KEY, note TEXT);  -- fine
        CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER NOT NULL REFERENCES a(id));
        INSERT INTO a VALUES (1, 'semi;colon; inside');
        INSERT INTO b VALUES (1, 99);
        INSERT INTO nowhere VALUES (1);
        INSERT INTO a VALUES (2, 'last, no semicolon')
    """)
    assert [e.index for e in errors] == [3, 4]
    assert "FOREIGN KEY constraint failed" in errors[0].message
    assert "INSERT INTO b VALUES (1, 99)" in errors[0].statement
    assert "no such table: nowhere" in errors[1].message
    assert "INSERT INTO nowhere" in str(errors[1])
    notes = conn.execute("SELECT note FROM a ORDER BY id").fetchall()
    assert notes == [("semi;colon; inside",), ("last, no semicolon",)]


def test_split_keeps_trigger_bodies_whole():
    sql = ("CREATE TABLE t (x);\nCREATE TRIGGER tr AFTER INSERT ON t BEGIN UPDATE t SET x = x + 1; "
           "SELECT 1; END;\n-- just a comment\n")
    assert len(split_statements(sql)) == 2


def test_build_database_lists_statement_and_foreign_key_problems():
    schema = "CREATE TABLE p (id INTEGER PRIMARY KEY);\nCREATE TABLE c (id INTEGER PRIMARY KEY, " \
             "p_id INTEGER REFERENCES p(id) DEFERRABLE INITIALLY DEFERRED);\nCREATE TABLE oops (;"
    data = ("INSERT INTO p VALUES (1);\nINSERT INTO c VALUES (1, 1);\nINSERT INTO c VALUES (2, 42);\n"
            "INSERT INTO p VALUES (1);\nPRAGMA foreign_keys=OFF;\nINSERT INTO c VALUES (3, 7);")
    with pytest.raises(DatabaseError) as info:
        build_database(schema, data)
    problems = info.value.problems
    assert any(p.startswith("schema statement 3") and "CREATE TABLE oops" in p for p in problems)
    assert any("UNIQUE constraint failed: p.id" in p and "INSERT INTO p VALUES (1)" in p for p in problems)
    assert any("FOREIGN KEY constraint failed: INSERT INTO c VALUES (2, 42)" in p for p in problems)
    assert any("c row 3 references a missing row of p" in p for p in problems)  # found by foreign_key_check
    assert str(info.value).startswith("database build failed: ") and "\n" not in str(info.value)
    with pytest.raises(DatabaseError, match="creates no tables"):
        build_database("", "")


def test_open_bytes_diff_and_counts(library):
    data = (library / "db/initial.sqlite").read_bytes()
    a, b = open_bytes(data, readonly=True), open_bytes(data)
    assert table_counts(a) == {"books": 8, "loans": 10, "members": 5, "reservations": 1}
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        a.execute("DELETE FROM loans")
    with pytest.raises(sqlite3.OperationalError, match="too many attached"):
        b.execute("ATTACH DATABASE '/tmp/synth-never.db' AS x")
    assert diff(a, b) == {}
    b.execute("UPDATE books SET available_copies = 1 WHERE book_id = 1")
    b.execute("UPDATE loans SET created_at = 'now' WHERE loan_id = 2")
    b.execute("DELETE FROM reservations")
    b.execute("INSERT INTO members VALUES (6, 'New', 'n@example.com', 'standard', 3, '2024-06-01')")
    changes = diff(a, b, ignore_columns=["loans.created_at"])
    assert sorted(changes) == ["books", "members", "reservations"]
    assert changes["books"]["changed"][0]["key"] == {"book_id": 1}
    assert changes["books"]["changed"][0]["columns"] == ["available_copies"]
    assert changes["members"]["added"][0]["name"] == "New"
    assert changes["reservations"]["removed"][0]["reservation_id"] == 1
    assert "loans" in diff(a, b)


# --------------------------------------------------------------------------- runtime


def test_load_errors_say_what_to_do(tmp_path, library, pool):
    with pytest.raises(InputError, match="env folder not found"):
        Env.load(tmp_path / "nope", pool=pool)
    broken = write_env(read_env_draft(library), tmp_path / "broken")
    (broken / "tools.py").unlink()
    with pytest.raises(InputError, match=r"missing tools.py; .*build the env again"):
        Env.load(broken, pool=pool)
    edited = write_env(read_env_draft(library), tmp_path / "edited")
    conn = open_bytes((edited / "db/initial.sqlite").read_bytes())
    conn.execute("DELETE FROM reservations")
    conn.commit()
    (edited / "db/initial.sqlite").write_bytes(conn.serialize())
    with pytest.raises(InputError, match="does not match the sha256"):
        Env.load(edited, pool=pool)


def test_gold_solutions_pass_and_nothing_passes_before_acting(env):
    assert env.id == "city_library" and set(env.tasks) == {"task_01", "task_02", "task_03", "task_04"}
    for task_id in env.tasks:
        with env.episode(task_id) as ep:
            assert ep.tools[0] == {"type": "function", "function": {
                "name": "search_books", "description": env.tools[0].description,
                "parameters": env.tools[0].parameters}}
            before = ep.evaluate(GOLD_ANSWERS[task_id] if env.tasks[task_id].kind == "write" else None)
            assert not before.passed and before.error is None, task_id
            observations = run_gold(ep)
            assert all(o["ok"] for o in observations), observations
            reward = ep.evaluate(GOLD_ANSWERS[task_id])
            assert reward.passed and reward.reward == 1.0, (task_id, reward)
            assert [s.tool for s in ep.trajectory] == [c.tool for c in ep.task.gold]
            assert all(s.duration > 0 for s in ep.trajectory)
    assert env.bugs == []


def test_calls_return_results_and_state_shows_writes(env):
    with env.episode("task_02") as ep:
        found = ep.call("search_books", {"query": "le guin", "genre": "fantasy"})
        assert found == {"ok": True, "result": [{
            "book_id": 2, "title": "A Wizard of Earthsea", "author": "Ursula K. Le Guin", "genre": "fantasy",
            "published_year": 1968, "available_copies": 1, "total_copies": 2}]}
        loan = ep.call("checkout_book", '{"member_id": 2, "book_id": 3, "days": 7}')
        assert loan["ok"] and loan["result"]["loan_id"] == 11
        state = ep.state()
        assert state.execute("SELECT available_copies FROM books WHERE book_id = 3").fetchone()[0] == 2
        with pytest.raises(sqlite3.OperationalError):
            state.execute("DELETE FROM loans")
        assert open_bytes(ep.snapshot()).execute("SELECT count(*) FROM loans").fetchone()[0] == 11


@pytest.mark.parametrize("arguments, message", [
    ({}, "missing required argument(s) 'member_id', 'book_id'"),
    ({"member_id": 1, "book_id": 2, "colour": "red"}, "unknown argument(s) 'colour'"),
    ({"member_id": "1", "book_id": 2}, "'member_id' must be an integer, got string '1'"),
    ({"member_id": True, "book_id": 2}, "'member_id' must be an integer, got boolean"),
    ({"member_id": 1.5, "book_id": 2}, "'member_id' must be an integer, got number"),
    ({"member_id": 1, "book_id": None}, "missing required argument(s) 'book_id'"),
    ("[1, 2]", "must be a JSON object, got array"),
    ("{not json", "arguments are not valid JSON"),
])
def test_wrong_arguments_are_refused_before_the_call(env, arguments, message):
    with env.episode() as ep:
        obs = ep.call("checkout_book", arguments)
        assert obs["ok"] is False and message in obs["error"], obs
        assert ep.state().execute("SELECT count(*) FROM loans").fetchone()[0] == 10
        assert len(ep.trajectory) == 1 and ep.trajectory[0].observation == obs


def test_enum_and_coercions(env):
    with env.episode() as ep:
        bad = ep.call("list_loans", {"member_id": 3, "status": "overdue"})
        assert "'status' must be one of ['active', 'returned', 'all'], got 'overdue'" in bad["error"]
        ok = ep.call("list_loans", {"member_id": 3.0, "status": None})  # 3.0 is an integer, null = not given
        assert ok["ok"] and [r["loan_id"] for r in ok["result"]] == [1, 4]


def test_unknown_tool_and_tool_error(env):
    with env.episode() as ep:
        unknown = ep.call("delete_everything", {})
        assert unknown["ok"] is False
        assert "unknown tool 'delete_everything'; available tools: search_books" in unknown["error"]
        limit = ep.call("checkout_book", {"member_id": 5, "book_id": 3})
        assert limit == {"ok": False, "error": "member 5 already has 3 books out (limit 3)"}
        assert ep.call("return_book", {"loan_id": 9})["error"] == "loan 9 was already returned on 2024-04-12"
    assert env.bugs == []


def test_env_bugs_are_reported_not_raised(tmp_path, pool):
    path = _variant(tmp_path, "buggy",
                    get_member="row = db.execute('SELECT * FROM members WHERE email = ?', (email,)).fetchone()\n"
                               "return row['no_such_column']",
                    return_book="db.execute('UPDATE books SET available_copies = 0')\n"
                                "raise ToolError('changed my mind')",
                    list_loans="return {1, 2} if member_id == 1 else object()")
    with Env.load(path, pool=pool) as env, env.episode("task_03") as ep:
        obs = ep.call("get_member", {"email": "tom.becker@example.com"})
        assert obs["ok"] is False and "IndexError: No item with that key" in obs["error"]
        bug = ep.bugs[0]
        assert (bug.kind, bug.tool, bug.task_id) == ("exception", "get_member", "task_03")
        assert 'city_library/tools.py", line' in bug.traceback and "no_such_column" in bug.traceback
        assert env.bugs == ep.bugs
        # a ToolError rolls back whatever the call wrote, and is not a bug
        assert ep.call("return_book", {"loan_id": 1}) == {"ok": False, "error": "changed my mind"}
        assert ep.state().execute("SELECT sum(available_copies) FROM books").fetchone()[0] == 11
        assert ep.call("list_loans", {"member_id": 1}) == {"ok": True, "result": [1, 2]}
        bad = ep.call("list_loans", {"member_id": 2})
        assert "returned a value that is not JSON" in bad["error"] and ep.bugs[-1].kind == "bad_return"
        assert len(env.bugs) == 2
        assert ep.call("search_books", {"query": "dune"})["ok"]  # the episode goes on


def test_a_raising_verifier_gives_zero_reward_with_the_error(tmp_path, pool):
    draft = library_draft()
    draft.verifier_bodies["task_01"] = "return [check('x', final_db.execute('SELECT nope FROM books'))]"
    draft.verifier_bodies["task_02"] = "return {'passed': True}"
    path = write_env(draft, tmp_path / "badverifier")
    with Env.load(path, pool=pool) as env:
        with env.episode("task_01") as ep:
            reward = ep.evaluate("2")
            assert reward.reward == 0.0 and not reward.passed and "no such column: nope" in reward.error
            assert env.bugs[-1].tool == "verify_task_01"
        with env.episode("task_02") as ep:
            assert "must return a list of checks" in ep.evaluate(None).error
        with env.episode() as ep:
            assert ep.evaluate("x").error == "the episode has no task to evaluate"


def test_episodes_are_isolated_and_start_from_the_initial_bytes(env, library):
    one, two = env.episode(), env.episode()
    assert one.call("return_book", {"loan_id": 1})["ok"]
    assert two.call("return_book", {"loan_id": 1})["ok"]  # not returned in its own copy
    assert one.call("return_book", {"loan_id": 1})["error"].startswith("loan 1 was already returned")
    one.close()
    two.close()
    assert one.call("search_books", {"query": "x"}) == {"ok": False, "error": "the episode is closed"}
    with env.episode() as three:
        assert three.state().execute("SELECT returned_on FROM loans WHERE loan_id = 1").fetchone()[0] is None
        assert three.snapshot() == (library / "db/initial.sqlite").read_bytes()


def test_reset_never_rebuilds_from_sql(library, tmp_path, pool):
    copy = write_env(read_env_draft(library), tmp_path / "nosql")
    (copy / "db/schema.sql").unlink()
    (copy / "db/data.sql").unlink()
    with Env.load(copy, pool=pool) as env:
        for _ in range(3):
            with env.episode("task_04") as ep:
                run_gold(ep)
                assert ep.evaluate().passed


def test_trusted_mode_matches_the_sandbox(library, pool):
    with Env.load(library, pool=pool) as sandboxed, Env.load(library, trusted=True) as trusted:
        probes = [("checkout_book", {"member_id": 9, "book_id": 1}), ("search_books", {"query": ""}),
                  ("list_loans", {"member_id": 1, "status": "all"}), ("nope", {})]
        for task_id in sandboxed.tasks:
            results = []
            for env in (sandboxed, trusted):
                with env.episode(task_id) as ep:
                    observations = run_gold(ep) + [ep.call(t, a) for t, a in probes]
                    results.append((observations, ep.evaluate(GOLD_ANSWERS[task_id]), ep.snapshot()))
            assert results[0][0] == results[1][0]
            assert results[0][1] == results[1][1]
            assert diff(open_bytes(results[0][2]), open_bytes(results[1][2]),
                        ignore_columns=library_draft().volatile_columns) == {}


def test_many_episodes_from_many_threads(env):
    errors: list[str] = []

    def agent(member_id: int) -> None:
        try:
            with env.episode() as ep:
                for _ in range(15):
                    obs = ep.call("list_loans", {"member_id": member_id, "status": "all"})
                    assert obs["ok"], obs
                loans = obs["result"]
                for loan in loans:
                    if loan["returned_on"] is None:
                        assert ep.call("return_book", {"loan_id": loan["loan_id"]})["ok"]
                active = ep.call("list_loans", {"member_id": member_id})["result"]
                assert active == [], active
        except Exception as exc:  # collected: assertions in threads do not fail the test by themselves
            errors.append(repr(exc))

    threads = [threading.Thread(target=agent, args=(1 + i % 5,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and not any(t.is_alive() for t in threads)
