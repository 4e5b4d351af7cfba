"""`synth export awm`: the files AWM's commands read, used the way AWM uses them.

A loader script (run in a child process: generated code never runs in the test runner)
follows AWM's own steps: it builds the database from gen_db + gen_sample as `awm env
reset_db` does, opens gen_envs' db_path relative to the working folder, serves the
FastAPI app, picks a verifier's function the way `awm verify` does (the first `def
verify_` line) and calls it signature-aware: sql mode (gen_verifier.jsonl) with the two
database paths, code mode (gen_verifier.pure_code.jsonl) with the final answer too.
"""

from __future__ import annotations

import inspect
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envkit import DATA_SQL, TASKS, TOOLS, library_draft
from exportkit import make_context_library
from synth.folder.format import write_env
from synth.use.export import export
from synth.use.export.awm import check_names, sample_data

GOLD = {t.task_id: t for t in TASKS}

AWM_LOADER = textwrap.dedent('''
    """Use synth's AWM export the way AWM's commands do and play one task; cwd = the export's parent."""
    import inspect, json, re, sqlite3, shutil, sys
    from pathlib import Path
    from fastapi.testclient import TestClient

    data, work = Path(sys.argv[1]), Path(sys.argv[2])
    task_id, answer = sys.argv[3], (sys.argv[4] or None)
    calls = json.loads(sys.argv[5])
    def jsonl(name):
        return [json.loads(l) for l in (data / name).read_text().splitlines() if l.strip()]
    scenario = jsonl("gen_scenario.jsonl")[0]["name"]
    index = lambda name: {e["scenario"]: e for e in jsonl(name)}
    tasks = index("gen_tasks.jsonl")[scenario]
    task_idx = tasks["task_ids"].index(task_id)
    schema, sample = index("gen_db.jsonl")[scenario]["db_schema"], index("gen_sample.jsonl")[scenario]["sample_data"]
    spec, env = index("gen_spec.jsonl")[scenario]["api_spec"], index("gen_envs.jsonl")[scenario]

    def verifier(name):
        entry = {(v["scenario"], v["task_idx"]): v for v in jsonl(name)}[(scenario, task_idx)]
        assert entry["task"] == tasks["tasks"][task_idx]
        code = entry["verification"]["code"]
        func = next(l.strip().split("(")[0][4:] for l in code.splitlines() if l.strip().startswith("def verify_"))
        ns = {"sqlite3": sqlite3, "json": json}
        exec(code, ns)
        return ns[func]

    def call_verifier(fn, initial, final, final_answer=None):  # awm.core.verify._call_verifier_func
        params = inspect.signature(fn).parameters
        kwargs = {k: v for k, v in (("initial_db_path", str(initial)), ("final_db_path", str(final)),
                                    ("final_answer", final_answer or "")) if k in params}
        return fn(**kwargs)

    initial = work / "initial.db"
    conn = sqlite3.connect(initial)
    for table in schema["tables"]:  # awm.core.db.create_sqlite_database
        conn.execute(table["ddl"])
        for ddl in table["indexes"]:
            conn.execute(ddl)
    conn.commit()
    conn.execute("PRAGMA foreign_keys = ON;")
    for table in sample["tables"]:  # awm.core.sample.execute_sample_data
        for stmt in table["insert_statements"]:
            conn.execute(stmt)
    conn.commit()
    conn.close()
    final = work / "final.db"
    shutil.copyfile(env["db_path"], final)  # awm.core.server: --db_path is the env's database

    def dump(path):
        c = sqlite3.connect(path)
        tables = [r[0] for r in c.execute("select name from sqlite_master where type='table' order by name")]
        return {t: sorted(map(list, c.execute(f'select * from "{t}"'))) for t in tables}

    namespace = {"DATABASE_PATH": f"sqlite:///{final}"}
    code = re.sub(r'if\\s+__name__\\s*==\\s*["\\']__main__["\\'].*', "", env["full_code"], flags=re.DOTALL)
    exec(code, namespace)
    client = TestClient(namespace["app"])
    endpoints = {e["operation_id"]: e for g in spec["api_groups"] for e in g["endpoints"]}
    statuses = []
    for name, arguments in calls:
        ep = endpoints[name]
        assert all(p["param_type"] == "body" for p in ep["request_params"].values())
        statuses.append(client.request(ep["method"], ep["path"], json=arguments).status_code)
    code_fn, sql_fn = verifier("gen_verifier.pure_code.jsonl"), verifier("gen_verifier.jsonl")
    print(json.dumps({
        "statuses": statuses, "same_db": dump(initial) == dump(env["db_path"]),
        "code_signature": [code_fn.__name__, *inspect.signature(code_fn).parameters],
        "sql_signature": [sql_fn.__name__, *inspect.signature(sql_fn).parameters],
        "code": call_verifier(code_fn, initial, final, answer), "sql": call_verifier(sql_fn, initial, final),
        "schemas": client.get("/openapi.json").json()["components"]["schemas"]}))
''')


def play(out: Path, work: Path, task_id: str, answer: str | None, calls: list) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    script = work / "loader.py"
    script.write_text(AWM_LOADER)
    done = subprocess.run([sys.executable, str(script), out.name, str(work), task_id, answer or "",
                           json.dumps(calls)], capture_output=True, text=True, timeout=120, cwd=out.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("awm")
    make_context_library(root)
    out = root / "outputs"
    assert "4 task(s)" in export("awm", root / "envs", out)
    return out


def test_awm_files(exported: Path):
    names = sorted(p.name for p in exported.iterdir())
    assert names == ["databases", "gen_db.jsonl", "gen_envs.jsonl", "gen_sample.jsonl", "gen_scenario.jsonl",
                     "gen_spec.jsonl", "gen_tasks.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl"]
    (scenario,) = read_jsonl(exported / "gen_scenario.jsonl")
    assert scenario["categories"] == ["public services"]  # a list, as AWM writes it
    assert "Today is 2025-06-02" in scenario["system_prompt"] and "Maya Patel" in scenario["system_prompt"]
    (db,) = read_jsonl(exported / "gen_db.jsonl")
    assert [t["name"] for t in db["db_schema"]["tables"]] == ["members", "books", "loans", "reservations"]
    assert db["db_schema"]["tables"][2]["indexes"] == ["CREATE INDEX idx_loans_member ON loans(member_id);"]
    (env,) = read_jsonl(exported / "gen_envs.jsonl")
    assert env["db_path"] == "./outputs/databases/city_library.db"  # relative, like AWM's ./outputs/databases
    # AWM's launcher rewrites the one `uvicorn.run(app` line of the __main__ block to mount FastApiMCP
    run_lines = [line for line in env["full_code"].splitlines() if "uvicorn.run(app" in line]
    assert len(run_lines) == 1 and run_lines[0].startswith("    uvicorn.run(app")
    assert "create_engine(" not in env["full_code"] and 'os.environ.get("DATABASE_PATH")' in env["full_code"]

    (spec,) = read_jsonl(exported / "gen_spec.jsonl")
    endpoint = {e["operation_id"]: e for g in spec["api_spec"]["api_groups"] for e in g["endpoints"]}
    assert endpoint["search_books"]["request_params"]["query"] == {
        "type": "string", "param_type": "body", "required": True, "description": "Part of a title or an author's name",
        "example": "Left Hand of Darkness"}  # from the gold action that really made this call
    assert endpoint["checkout_book"]["request_params"]["member_id"]["example"] == 2
    search = endpoint["search_books"]
    assert search["response"]["type"] == "array" and search["response"]["items"]["title"] == {
        "type": "string", "example": "Dune"}  # from the result a passing test observed
    assert search["response_example"][0]["title"] == "Dune"
    reserve = endpoint["reserve_book"]["response"]
    assert reserve["queue_position"] == {"type": "integer", "example": 1}


def test_verifier_files_hold_sql_facts_and_pure_code_verdicts(exported: Path, tmp_path: Path):
    sql, code = read_jsonl(exported / "gen_verifier.jsonl"), read_jsonl(exported / "gen_verifier.pure_code.jsonl")
    assert [(v["task_idx"], v["task_id"]) for v in sql] == [(v["task_idx"], v["task_id"]) for v in code] == [
        (0, "task_01"), (1, "task_02"), (2, "task_03"), (3, "task_04")]
    assert {v["verification"]["function_name"] for v in sql} == {"verify_task"}
    assert {v["verification"]["function_name"] for v in code} == {"verify_task_completion"}

    gold = [[c.tool, dict(c.arguments)] for c in GOLD["task_02"].gold]
    played = play(exported, tmp_path / "w1", "task_02", "Dune is yours.", gold)
    assert played["statuses"] == [200, 200, 200] and played["same_db"]
    assert played["sql_signature"] == ["verify_task", "initial_db_path", "final_db_path"]
    assert played["code_signature"] == ["verify_task_completion", "initial_db_path", "final_db_path", "final_answer"]
    assert played["code"]["result"] == "complete" and played["code"]["reward"] == 1.0
    assert [c["key"] for c in played["code"]["checks"]] == [f"check_{i}" for i in range(7)]
    assert played["code"]["checks"][1]["description"] == "loan_is_maya_dune"
    facts = played["sql"]
    assert "result" not in facts and "reward" not in facts  # facts for AWM's judge, no verdict
    assert facts["task_kind"] == "write" and facts["tables_changed"] == ["books", "loans"]
    (new_loan,) = facts["database_changes"]["loans"]["added_rows"]
    assert (new_loan["member_id"], new_loan["book_id"]) == (2, 3)
    assert facts["database_changes"]["books"]["changed_rows"] == [
        {"key": [3], "before": {"available_copies": 3}, "after": {"available_copies": 2}}]
    assert facts["criteria_of_a_correct_solution"] == ["exactly_one_new_loan", "loan_is_maya_dune",
                                                       "loan_period_14_days", "only_dune_copies_changed",
                                                       "nothing_else_changed", "answer_reports_the_loan"]

    # a read task: the database is unchanged and the facts carry the expected answer, not "others"
    read = play(exported, tmp_path / "w2", "task_01", "There are 2 copies.", [["search_books", {"query": "Left"}]])
    assert read["code"]["result"] == "complete"
    assert read["sql"]["database_changes"] == {} and read["sql"]["expected_answer"] == 2
    assert read["sql"]["task_kind"] == "read" and "expected_answer" in read["sql"]["guidance"]
    refused = play(exported, tmp_path / "w3", "task_04", None, [["checkout_book", {"member_id": 1, "book_id": 4}]])
    assert refused["statuses"] == [400] and refused["code"]["result"] == "others"
    assert refused["sql"]["database_changes"] == {}


def test_server_request_models_describe_every_parameter_without_any_of(exported: Path, tmp_path: Path):
    played = play(exported, tmp_path / "w", "task_03", None,
                  [["list_loans", {"member_id": 3, "status": None}], ["list_loans", {"member_id": 3}]])
    assert played["statuses"] == [200, 200]  # an explicit null still means "not given"
    models = {k: v for k, v in played["schemas"].items() if k.endswith("Request")}
    described = {(t.name, name): prop["description"] for t in TOOLS
                 for name, prop in t.parameters["properties"].items() if prop.get("description")}
    model_of = {t.name: "".join(w.capitalize() for w in t.name.split("_")) + "Request" for t in TOOLS}
    assert {(tool, name): models[model_of[tool]]["properties"][name].get("description")
            for tool, name in described} == described  # every description reaches the schema AWM's MCP lists
    properties = [p for m in models.values() for p in m["properties"].values()]
    assert len(properties) == 12 and not any("anyOf" in p for p in properties)
    status = models["ListLoansRequest"]["properties"]["status"]
    assert status["enum"] == ["active", "returned", "all"] and status["type"] == "string"
    assert models["ListLoansRequest"]["required"] == ["member_id"]


def test_sample_data_keeps_statement_order(tmp_path: Path):
    # an UPDATE between two INSERTs on the same table: regrouping by table would change the data
    data_sql = DATA_SQL + textwrap.dedent("""\
        UPDATE members SET tier = 'premium', max_loans = 8 WHERE tier = 'standard';
        INSERT INTO members (member_id, name, email, tier, max_loans, joined_on) VALUES
          (6, 'Sam Lee', 'sam.lee@example.com', 'standard', 3, '2024-01-01');
        UPDATE books SET available_copies = available_copies + 1 WHERE book_id = 6;
        INSERT INTO loans (loan_id, book_id, member_id, loaned_on, due_on, returned_on, created_at) VALUES
          (11, 5, 6, '2024-05-30', '2024-06-13', NULL, '2024-05-30T09:00:00');
    """)
    draft = library_draft().model_copy(update={"data_sql": data_sql})
    write_env(draft, tmp_path / "envs" / "city_library")
    tables = [t["table_name"] for t in sample_data(data_sql)["tables"]]
    assert tables == ["members", "books", "loans", "reservations", "members", "books", "loans"]
    out = tmp_path / "outputs"
    export("awm", tmp_path / "envs", out)
    played = play(out, tmp_path / "w", "task_01", None, [])
    assert played["same_db"]  # AWM's rebuild equals the env's initial database
    conn = sqlite3.connect(out / "databases" / "city_library.db")
    assert conn.execute("select tier from members where member_id = 6").fetchone() == ("standard",)


def test_check_names_are_read_from_the_code_not_run():
    body = 'x = 1\nreturn [check("a", True), check(f"b{x}", False), check("c", x == 1, 2.0)]\n'
    assert check_names(body) == ["a", "c"]
    assert check_names("return [") == []
    assert inspect.isfunction(check_names)
