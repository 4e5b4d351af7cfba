"""The build stages and `synth build` against the fake model server (fixture: tests/buildkit.py)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

import buildkit as bk
from synth.artifacts import TaskBatch, ToolSpecAnswer
from synth.config import Settings
from synth.errors import InputError
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.build import build_all, build_env, load_scenarios
from synth.pipeline.layout import built_path, env_path, failed_path
from synth.pipeline.stages.build.data import data_problems
from synth.pipeline.stages.build.schema import empty_database, foreign_key_problems, schema_problems
from synth.pipeline.stages.build.tasks import task_problems, to_tasks
from synth.pipeline.stages.build.tool_code import tool_draft
from synth.pipeline.stages.build.tool_probe import body_problems, plausible_arguments, probe_tools
from synth.pipeline.stages.build.tool_spec import spec_problems, to_tool_specs
from synth.pipeline.store import RunStore
from synth.runtime import Env
from synth.runtime.sandbox import SandboxPool


def make_settings(fake_model, tmp_path: Path, **overrides) -> Settings:
    values = dict(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                  retry_base_delay=0.01, timeout=10, out=tmp_path / "out", tool_timeout=5)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def pool():
    with SandboxPool(workers=1, call_timeout=5) as p:
        yield p


def build_one(fake_model, tmp_path, pool, scenario=bk.SCENARIO, store=None, **overrides):
    settings = make_settings(fake_model, tmp_path, **overrides)
    gateway = Gateway(settings)
    return asyncio.run(build_env(scenario, gateway, settings, settings.out, store=store, pool=pool))


def requests_of(fake_model, stage: str, subject: str = bk.ENV_ID) -> list[str]:
    """The prompt text (every message) of each request made for stage/subject (a glob), in order."""
    from fnmatch import fnmatchcase

    found = []
    for r in fake_model.requests:
        if r.stage == stage and fnmatchcase(r.subject, subject) and r.status == 200:
            found.append("\n".join(str(m.get("content")) for m in r.body["messages"]))
    return found


# --------------------------------------------------------------------------- the whole build


def test_scenario_becomes_a_complete_env_whose_tools_work(fake_model, tmp_path, pool):
    bk.script_build(fake_model.script)
    store = RunStore(tmp_path / "run")
    result = build_one(fake_model, tmp_path, pool, store=store)

    assert result.status == "built", result.reason
    folder = built_path(tmp_path / "out", bk.ENV_ID)  # built, not verified: not in envs/
    assert result.path == folder
    for name in ("env.json", "scenario.md", "db/schema.sql", "db/data.sql", "db/initial.sqlite", "tools.py",
                 "tools.json", "tasks.jsonl", "verifiers.py", "tests.jsonl", "report.json", "README.md"):
        assert (folder / name).is_file(), name
    manifest = json.loads((folder / "env.json").read_text())
    assert manifest["status"] == "built"
    assert manifest["counts"] == {"tools": 15, "tasks": 10, "tests": 0, "tables": 7, "rows": 52}
    assert manifest["report"]["tool_code"] is True and manifest["report"]["schema"] is True
    report = json.loads((folder / "report.json").read_text())
    assert [report[s]["rounds"] for s in ("tasks", "schema", "data", "tool_spec", "tool_code")] == [1] * 5
    assert report["tool_code"]["details"]["probes"]["cancel_appointment"]["outcome"] == "ok"
    tasks = [json.loads(line) for line in (folder / "tasks.jsonl").read_text().splitlines()]
    assert [t["task_id"] for t in tasks][:2] == ["task_01", "task_02"]
    assert sum(t["split"] == "test" for t in tasks) == 2
    assert store.get("build", bk.ENV_ID)["status"] == "done"
    assert {r.stage for r in fake_model.requests} == {"tasks", "schema", "data", "tool_spec", "tool_code"}

    env = Env.load(folder, pool=pool)
    try:
        with env.episode("task_03") as episode:
            pets = episode.call("find_pets", {"name": "coco"})
            assert pets["ok"] and pets["result"][0]["owner_name"] == "Aiko Tanaka"
            assert episode.call("cancel_appointment", {"appointment_id": 8})["ok"]
            again = episode.call("cancel_appointment", {"appointment_id": 8})
            assert not again["ok"] and "cannot be cancelled" in again["error"]
            state = episode.state()
            assert state.execute("SELECT status FROM appointments WHERE id = 8").fetchone()[0] == "cancelled"
            state.close()
            assert episode.bugs == []
    finally:
        env.close()


def test_ddl_error_is_repaired_from_sqlites_message(fake_model, tmp_path, pool):
    bk.script_build(fake_model.script, schema=[bk.BAD_DDL, bk.SCHEMA_SQL])
    result = build_one(fake_model, tmp_path, pool)

    assert result.status == "built", result.reason
    prompts = requests_of(fake_model, "schema")
    assert len(prompts) == 2
    assert "no such table: main.treatment" not in prompts[0]
    assert "no such table: main.treatment" in prompts[1]
    assert "idx_treatment_category" in prompts[1]  # the failing statement is shown
    assert result.report["schema"]["rounds"] == 2 and result.report["schema"]["repairs"] == 1
    assert "no such table" in result.report["schema"]["errors"][0]


def test_insert_foreign_key_error_is_repaired_naming_the_row(fake_model, tmp_path, pool):
    bk.script_build(fake_model.script, data=[bk.DATA_WITH_FK_ERROR, bk.DATA_SQL])
    result = build_one(fake_model, tmp_path, pool)

    assert result.status == "built", result.reason
    prompts = requests_of(fake_model, "data")
    assert len(prompts) == 2
    assert "FOREIGN KEY constraint failed" in prompts[1]
    assert "pets row 9 (owner_id=7) references owners(id)" in prompts[1]
    assert result.report["data"]["repairs"] == 1


def test_tool_that_raises_is_repaired_and_only_it_is_asked_for(fake_model, tmp_path, pool):
    fixed = bk.tool_code_answer(bk.TOOL_BODIES, names=["list_treatments"])
    bk.script_build(fake_model.script, tool_code=[bk.tool_code_answer(bk.BUGGY_BODIES), fixed])
    result = build_one(fake_model, tmp_path, pool)

    assert result.status == "built", result.reason
    prompts = requests_of(fake_model, "tool_code", f"{bk.ENV_ID}*")
    assert len(prompts) == 2
    assert requests_of(fake_model, "tool_code", f"{bk.ENV_ID}/list_treatments") == prompts[1:]
    assert "no such column: cost" in prompts[1] and "OperationalError" in prompts[1]
    assert "### list_treatments" in prompts[1] and "### find_pets" not in prompts[1]
    tools_py = (result.path / "tools.py").read_text()
    assert "ORDER BY price, code" in tools_py and "ORDER BY cost" not in tools_py
    assert result.report["tool_code"]["repairs"] == 1


def test_env_whose_repairs_run_out_is_failed_and_the_next_one_builds(fake_model, tmp_path, pool):
    broken = bk.scenario_named("Broken Paws Clinic")
    bk.script_build(fake_model.script, subject=broken.env_id, schema=[bk.BAD_DDL])  # wrong every time
    bk.script_build(fake_model.script)
    settings = make_settings(fake_model, tmp_path, build_repair_rounds=1)
    seen = []
    results = asyncio.run(build_all([broken, bk.SCENARIO], Gateway(settings), settings, settings.out, pool=pool,
                                    parallel=1, on_result=seen.append))

    assert [r.status for r in results] == ["failed", "built"]
    assert {r.env_id for r in seen} == {broken.env_id, bk.ENV_ID}
    failed = results[0]
    assert failed.path == failed_path(settings.out, broken.env_id)
    assert not built_path(settings.out, broken.env_id).exists() and not env_path(settings.out, broken.env_id).exists()
    assert "schema" in failed.reason and "no such table: main.treatment" in failed.reason
    manifest = json.loads((failed.path / "env.json").read_text())
    assert manifest["status"] == "failed" and manifest["failure_reason"] == failed.reason
    report = json.loads((failed.path / "report.json").read_text())
    assert report["failed_stage"] == "schema"
    assert report["schema"]["rounds"] == 2 and report["schema"]["passed"] is False
    assert (failed.path / "tasks.jsonl").read_text().count("\n") == 10  # what was made is kept
    assert len(requests_of(fake_model, "schema", broken.env_id)) == 2
    assert (built_path(settings.out, bk.ENV_ID) / "db/initial.sqlite").is_file()


def test_tool_that_stays_broken_fails_the_env_with_the_tool_named(fake_model, tmp_path, pool):
    bk.script_build(fake_model.script, tool_code=[bk.tool_code_answer(bk.BUGGY_BODIES)])
    result = build_one(fake_model, tmp_path, pool, build_repair_rounds=1)

    assert result.status == "failed"
    assert result.reason.startswith("tool_code: still failing after 1 repair round(s): list_treatments: ")
    assert "no such column: cost" in result.reason
    assert "ORDER BY cost" in (result.path / "tools.py").read_text()  # kept for inspection
    assert json.loads((result.path / "env.json").read_text())["counts"]["rows"] == 52
    assert len(requests_of(fake_model, "tool_code", f"{bk.ENV_ID}*")) == 2


def test_unusable_tasks_and_model_errors_fail_the_env_with_the_stage_named(fake_model, tmp_path, pool):
    few = {"tasks": bk.TASKS[:4]}
    fake_model.script.add("tasks", bk.ENV_ID, Reply(json=few))  # never enough tasks
    result = build_one(fake_model, tmp_path / "a", pool)
    assert result.status == "failed" and result.reason.startswith("tasks: ")
    assert "at least 10" in result.reason and result.report["retry_fresh"] is True

    other = bk.scenario_named("Refused Clinic")
    fake_model.script.add("schema", other.env_id, Reply(fault="400"))  # first matching rule wins
    bk.script_build(fake_model.script, subject=other.env_id)
    result = build_one(fake_model, tmp_path / "b", pool, scenario=other)
    assert result.status == "failed" and result.reason.startswith("schema: ")
    assert result.report["retry_fresh"] is False  # a rerun may reuse the cached answers


def test_rerun_skips_built_envs_and_retries_a_failure_with_fresh_answers(fake_model, tmp_path, pool):
    other = bk.scenario_named("Harbor Paws Clinic")
    bk.script_build(fake_model.script)
    bk.script_build(fake_model.script, subject=other.env_id, schema=[bk.BAD_DDL, bk.SCHEMA_SQL])
    settings = make_settings(fake_model, tmp_path, build_repair_rounds=0)
    store = RunStore(tmp_path / "run")

    first = asyncio.run(build_all([bk.SCENARIO, other], Gateway(settings), settings, settings.out, store=store,
                                  pool=pool))
    assert [r.status for r in first] == ["built", "failed"]
    made = len(fake_model.requests)

    second = asyncio.run(build_all([bk.SCENARIO, other], Gateway(settings), settings, settings.out, store=store,
                                   pool=pool))
    assert [r.status for r in second] == ["built", "built"]
    assert second[0].resumed and not second[1].resumed
    assert not failed_path(settings.out, other.env_id).exists()
    new = fake_model.requests[made:]
    assert {r.subject for r in new} == {other.env_id}  # the built env cost nothing
    assert any(r.stage == "tasks" for r in new)  # sample 1: the cached answers were not reused
    assert store.get("build", other.env_id)["attempts"] == 2

    third = asyncio.run(build_all([bk.SCENARIO, other], Gateway(settings), settings, settings.out, store=store,
                                  pool=pool))
    assert all(r.resumed for r in third)


def test_spent_budget_stops_new_builds_cleanly(fake_model, tmp_path, pool):
    bk.script_build(fake_model.script)
    settings = make_settings(fake_model, tmp_path, max_cost=0.0)
    results = asyncio.run(build_all([bk.SCENARIO, bk.scenario_named("Second Clinic")], Gateway(settings), settings,
                                    settings.out, pool=pool))
    assert [r.status for r in results] == ["stopped", "stopped"]
    assert "budget" in results[0].reason
    assert fake_model.requests == []
    assert not any((settings.out / d).exists() for d in ("envs", "built", "failed"))


# --------------------------------------------------------------------------- stage checks


def test_tasks_with_login_and_too_few_are_sent_back(fake_model, tmp_path, pool):
    bad = {"tasks": [{"instruction": "Log in to my account with my password please", "kind": "write",
                      "difficulty": "easy"}] + bk.TASKS[:5]}
    fake_model.script.add("tasks", bk.ENV_ID, Reply(json=bad), Reply(json=bk.tasks_answer()))
    bk.script_build(fake_model.script)
    result = build_one(fake_model, tmp_path, pool)

    assert result.status == "built", result.reason
    prompts = requests_of(fake_model, "tasks")
    assert len(prompts) == 2
    assert "already signed in" in prompts[1] and "at least 10" in prompts[1]
    assert result.report["tasks"]["rounds"] == 2


def test_task_problems_need_mix_and_every_difficulty():
    only_easy_reads = TaskBatch.model_validate({"tasks": [
        {"instruction": f"How many appointments does pet number {i} have this month?", "kind": "read",
         "difficulty": "easy"} for i in range(12)]})
    problems = " | ".join(task_problems(only_easy_reads))
    assert "state-changing" in problems and "'medium'" in problems and "'hard'" in problems
    assert task_problems(TaskBatch.model_validate(bk.tasks_answer())) == []
    signup = TaskBatch.model_validate({"tasks": [{**t, "instruction": "Please sign up a new user account for me "
                                                  "and set the password"} if i == 0 else t
                                                 for i, t in enumerate(bk.TASKS)]})
    assert any("account plumbing" in p for p in task_problems(signup))


def test_schema_problems_catch_bad_foreign_keys_and_non_ddl():
    conn = empty_database()
    conn.executescript("""
        CREATE TABLE a (id INTEGER PRIMARY KEY, code TEXT);
        CREATE TABLE b (id INTEGER PRIMARY KEY, a_code TEXT REFERENCES a(code), x INTEGER REFERENCES nope(id));
    """)
    problems = foreign_key_problems(conn)
    assert any("nope" in p and "does not exist" in p for p in problems)
    assert any("a.code is neither the PRIMARY KEY nor UNIQUE" in p for p in problems)
    assert any("only CREATE TABLE and CREATE INDEX" in p
               for p in schema_problems(bk.SCHEMA_SQL + "\nINSERT INTO owners VALUES (1, 'a', 'b', 'c', 'd');"))
    assert schema_problems("CREATE TABLE t (id INTEGER PRIMARY KEY);")[0].startswith("the schema creates 1 table")


def test_data_problems_refuse_non_inserts_and_check_constraints():
    problems, db = data_problems(bk.SCHEMA_SQL, "DELETE FROM owners;")
    assert db is None and "only INSERT statements" in problems[0]
    bad_species = bk.DATA_SQL.replace("'Kiwi', 'bird'", "'Kiwi', 'parrot'")
    problems, db = data_problems(bk.SCHEMA_SQL, bad_species)
    assert db is None and any("CHECK constraint failed" in p for p in problems)


def test_tool_spec_problems():
    spec = bk.tool_spec_answer()
    bad = json.loads(json.dumps(spec))
    bad["tools"][0]["read_only"] = False  # find_owners
    bad["tools"][7]["read_only"] = True  # add_pet
    bad["tools"][1]["params"][0]["name"] = "json"
    bad["tools"][2]["name"] = "user_login"
    bad["tools"][3]["name"] = bad["tools"][4]["name"]
    problems = " | ".join(spec_problems(ToolSpecAnswer.model_validate(bad)))
    assert "'find' tool should not change state" in problems
    assert "'add' tool changes state" in problems
    assert "would shadow" in problems
    assert "'user_login' looks like account plumbing" in problems
    assert "listed twice" in problems
    assert spec_problems(ToolSpecAnswer.model_validate(spec)) == []
    few = {"tools": spec["tools"][:3]}
    assert "there are 3 tools" in spec_problems(ToolSpecAnswer.model_validate(few))[0]


def test_body_problems_report_lines_inside_the_body():
    assert body_problems("f", "x = 1\nreturn open('/etc/passwd').read()") == ["body line 2: use of 'open' is not allowed"]
    assert "syntax error" in body_problems("f", "return (")[0]
    assert body_problems("f", "def f(db):\n    return 1")[0].startswith("write only the function body")
    assert body_problems("f", bk.TOOL_BODIES["find_owners"]) == []


def test_probe_catches_a_read_only_tool_that_writes_and_a_static_failure(pool):
    tools = to_tool_specs(ToolSpecAnswer.model_validate(bk.tool_spec_answer()))
    tasks = to_tasks(TaskBatch.model_validate(bk.tasks_answer()))
    _, db_bytes = data_problems(bk.SCHEMA_SQL, bk.DATA_SQL)
    bodies = {**bk.TOOL_BODIES,
              "search_vets": "db.execute(\"UPDATE veterinarians SET active = 0\")\nreturn []",
              "get_invoice": "import os\nreturn os.listdir('/')"}
    draft = tool_draft(bk.SCENARIO, tasks, bk.SCHEMA_SQL, bk.DATA_SQL, tools).model_copy(
        update={"tool_bodies": bodies})
    failures, probes = probe_tools(draft, db_bytes, pool)
    assert set(failures) == {"search_vets", "get_invoice"}
    assert "changed table(s) veterinarians, but the tool is read-only" in failures["search_vets"]
    assert "'os' is not allowed" in failures["get_invoice"]
    assert probes["find_pets"]["outcome"] == "ok"  # the others were still probed


def test_plausible_arguments_come_from_the_data():
    from synth.folder.database import open_bytes

    tools = {t.name: t for t in to_tool_specs(ToolSpecAnswer.model_validate(bk.tool_spec_answer()))}
    _, db_bytes = data_problems(bk.SCHEMA_SQL, bk.DATA_SQL)
    conn = open_bytes(db_bytes, readonly=True)
    try:
        assert plausible_arguments(conn, tools["find_pets"]) == {"name": "Bella"}
        assert plausible_arguments(conn, tools["add_treatment"]) == {"appointment_id": 1,
                                                                     "treatment_code": "EXAM-STD"}
        assert plausible_arguments(conn, tools["cancel_appointment"], 1) == {"appointment_id": 11}
        args = plausible_arguments(conn, tools["reschedule_appointment"])
        assert args["new_start_time"] == "2025-05-12 09:00"  # new_start_time -> appointments.start_time
        assert plausible_arguments(conn, tools["pay_invoice"])["method"] == "cash"
    finally:
        conn.close()


# --------------------------------------------------------------------------- scenarios file and CLI


def test_load_scenarios_names_the_bad_line(tmp_path):
    path = tmp_path / "scenarios.jsonl"
    good = bk.SCENARIO.model_dump_json()
    path.write_text(good + "\n{not json\n")
    with pytest.raises(InputError, match=r"scenarios.jsonl:2: not valid JSON"):
        load_scenarios(path)
    path.write_text(good + "\n\n" + json.dumps({"name": "X"}) + "\n")
    with pytest.raises(InputError, match=r"scenarios.jsonl:3: description: Field required"):
        load_scenarios(path)
    path.write_text(json.dumps({**json.loads(good), "crud_able": True}) + "\n")
    assert load_scenarios(path) == [bk.SCENARIO]  # keys from earlier stages are ignored
    with pytest.raises(InputError, match="not found"):
        load_scenarios(tmp_path / "missing.jsonl")


def run_cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    from synth.cli import main

    monkeypatch.setattr(sys, "argv", ["synth", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_build_prints_a_line_per_env_and_a_summary(fake_model, tmp_path, monkeypatch, capsys):
    bk.script_build(fake_model.script)
    path = tmp_path / "scenarios.jsonl"
    path.write_text(bk.SCENARIO.model_dump_json() + "\n")
    monkeypatch.chdir(tmp_path)
    args = ["build", str(path), "--model", "openai/test-model", "--base-url", fake_model.openai_base_url,
            "--out", str(tmp_path / "gen"), "--cache-dir", str(tmp_path / "cache"), "--concurrency", "2"]
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    lines = out.strip().splitlines()
    assert lines[0].startswith(f"built    {bk.ENV_ID}") and "tools=15 tasks=10" in lines[0]
    assert lines[-1].startswith("1 scenario(s): 1 built;")
    assert (tmp_path / "gen/built" / bk.ENV_ID / "env.json").is_file() and not (tmp_path / "gen/envs").exists()
    assert list((tmp_path / "gen/runs").iterdir())  # the run store

    code, out, _ = run_cli(monkeypatch, capsys, *args)  # rerun: resumes, no model call
    assert code == 0 and "(earlier run)" in out and "0 model call(s)" in out


def test_cli_build_malformed_jsonl_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    path = tmp_path / "scenarios.jsonl"
    path.write_text(bk.SCENARIO.model_dump_json() + "\n[1, 2]\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(monkeypatch, capsys, "build", str(path), "--model", "openai/test-model")
    assert code == 2
    assert err.strip().startswith("error: ") and ":2: expected a JSON object" in err
    assert len(err.strip().splitlines()) == 1
