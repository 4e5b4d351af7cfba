"""rules.json: invariants and status transitions written by the schema stage, held on the initial
data (violations fed back to the data stage), and checked after every state-changing call in the
rules and robust gates and in the check loop, where a call that breaks one is a tool bug."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import buildkit as bk
from envkit import TOOL_BODIES, make_library_env
from synth.artifacts import Invariant, Rules, SchemaAnswer, Task, ToolCall, ToolSpecAnswer
from synth.config import Settings
from synth.errors import InputError
from synth.folder.database import build_database, open_bytes
from synth.folder.format import EnvDraft, read_env_draft, read_rules, write_env
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.folder.rules import (InvariantError, check_invariants, illegal_transitions, run_query, status_columns,
                         transition_problems)
from synth.pipeline.stages.build.data import generate_data
from synth.pipeline.stages.repair import StageReport
from synth.pipeline.stages.build.schema import answer_problems, empty_database, generate_schema, to_rules
from synth.pipeline.stages.build.tool_spec import to_tool_specs
from synth.pipeline.verify import verify_env
from synth.runtime import Env
from synth.runtime.sandbox import SandboxPool
from verifykit import BUGGY_RETURN_BOOK, make_verified_library, proposed_tests

VET_RULES = to_rules(SchemaAnswer.model_validate(bk.schema_answer()))


@pytest.fixture
def pool():
    with SandboxPool(workers=1, call_timeout=5) as p:
        yield p


def settings_for(fake_model, tmp_path: Path, **extra) -> Settings:
    return Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                    retry_base_delay=0.01, **extra)


# --------------------------------------------------------------------------- invariants and transitions


def test_invariant_sql_only_reads_and_is_bounded():
    db = build_database(bk.SCHEMA_SQL, bk.DATA_SQL)
    conn = open_bytes(db, readonly=True)
    try:
        assert run_query(conn, "SELECT id FROM invoices WHERE status = 'paid'")[1] == [(1,), (3,)]
        for sql, why in [("ATTACH DATABASE 'x.db' AS x", "only reading queries"),
                         ("PRAGMA table_info(owners)", "only reading queries"),
                         ("DELETE FROM owners", "only reading queries"),
                         ("SELECT 1; SELECT 2", "exactly one SELECT"),
                         ("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
                          "ran too long")]:
            with pytest.raises(InvariantError, match=why):
                run_query(conn, sql)
        assert [c[:2] for c in status_columns(conn)] == [("appointments", "status"), ("invoices", "status")]
    finally:
        conn.close()
    assert check_invariants(db, VET_RULES.invariants) == []
    wrong = bk.DATA_SQL.replace("(2, 2, 275.0, 'unpaid'", "(2, 2, 270.0, 'unpaid'")
    [violation] = check_invariants(build_database(bk.SCHEMA_SQL, wrong), VET_RULES.invariants)
    assert violation.name == "invoice_total_matches_treatments" and violation.rows == [{"id": 2, "total": 270.0}]


def test_illegal_status_changes_are_named_with_their_allowed_ones():
    before = build_database(bk.SCHEMA_SQL, bk.DATA_SQL)
    after = build_database(bk.SCHEMA_SQL, bk.DATA_SQL.replace("(2, 3, 3, '2025-05-20 14:00', 'Dental cleaning', "
                                                              "'completed')", "(2, 3, 3, '2025-05-20 14:00', "
                                                              "'Dental cleaning', 'cancelled')"))
    [found] = illegal_transitions(before, after, VET_RULES.transitions)
    assert "appointments.status of the row with id=2 changed from 'completed' to 'cancelled'" in found
    assert "nothing, it is final" in found


def test_schema_rules_must_fit_the_schema():
    answer = SchemaAnswer.model_validate(bk.schema_answer())
    assert answer_problems(answer) == []
    broken = SchemaAnswer.model_validate({
        **bk.schema_answer(), "acting_user_table": "clerks",
        "transitions": [{"table": "invoices", "column": "status",
                         "allowed": [{"state": "unpaid", "next": ["refunded"]}]}],
        "invariants": [*bk.INVARIANTS, {"name": "bad", "description": "x", "sql": "SELECT nope FROM pets"}]})
    problems = " | ".join(answer_problems(broken))
    assert "acting_user_table 'clerks' is not a table" in problems
    assert "['refunded'] are not values its CHECK constraint allows" in problems
    assert "status column appointments.status (scheduled, completed, cancelled) has no transitions" in problems
    assert "invariant bad: no such column: nope" in problems
    conn = empty_database()
    conn.executescript(bk.SCHEMA_SQL)
    assert transition_problems(conn, VET_RULES.transitions) == []


def test_the_schema_stage_repairs_missing_transitions(fake_model, tmp_path):
    missing = {**bk.schema_answer(), "transitions": bk.TRANSITIONS[1:]}
    fake_model.script.add("schema", bk.ENV_ID, Reply(json=missing), Reply(json=bk.schema_answer()))
    settings = settings_for(fake_model, tmp_path)
    report = StageReport()
    result = asyncio.run(generate_schema(bk.SCENARIO, [], Gateway(settings), rounds=1, report=report,
                                         today="2025-06-02"))
    assert result.rules == VET_RULES and result.acting_table == "veterinarians"
    assert report.repairs == 1
    assert "appointments.status (scheduled, completed, cancelled) has no transitions" in \
        fake_model.requests[1].body["messages"][-1]["content"]


def test_data_that_breaks_an_invariant_is_fixed_by_the_data_stage(fake_model, tmp_path):
    wrong = bk.DATA_SQL.replace("(2, 2, 275.0, 'unpaid'", "(2, 2, 270.0, 'unpaid'")
    invoices = bk.DATA_SQL[bk.DATA_SQL.index("INSERT INTO invoices"):]
    fake_model.script.add("data", bk.ENV_ID, Reply(json=bk.data_answer(wrong)))
    fake_model.script.add("data_fix", bk.ENV_ID, Reply(json={
        "diagnosis": "invoice 2's total left out the blood panel", "tables": [{"table": "invoices",
                                                                                "inserts": invoices}]}))
    settings = settings_for(fake_model, tmp_path)
    report = StageReport()
    result = asyncio.run(generate_data(bk.SCENARIO, [], bk.SCHEMA_SQL, Gateway(settings), rounds=2, report=report,
                                       rules=VET_RULES, today="2025-06-02", acting_table="veterinarians",
                                       acting_role="veterinarian"))
    assert check_invariants(result.db_bytes, VET_RULES.invariants) == []
    assert "(2, 2, 275.0, 'unpaid'" in result.data_sql and "270.0" not in result.data_sql
    assert result.acting_user.name == "Dr. Hannah Reed" and result.acting_user.table == "veterinarians"
    fix = [r for r in fake_model.requests if r.stage == "data_fix"]
    assert len(fix) == 1 and "invoice_total_matches_treatments" in fix[0].body["messages"][-1]["content"]
    assert "id=2, total=270.0" in fix[0].body["messages"][-1]["content"]


def test_rules_json_is_written_read_back_and_optional(tmp_path):
    env = make_library_env(tmp_path)
    assert not (env / "rules.json").exists() and read_rules(env) is None
    draft = read_env_draft(env)
    draft.rules = Rules(invariants=[Invariant(name="x", description="y", sql="SELECT 1 WHERE 0")])
    write_env(draft, env)
    assert json.loads((env / "rules.json").read_text())["invariants"][0]["name"] == "x"
    assert read_env_draft(env).rules == draft.rules
    (env / "rules.json").write_text("{not json")
    with pytest.raises(InputError, match="not a valid rules file"):
        read_rules(env)


# --------------------------------------------------------------------------- the gates


def vet_env(tmp_path: Path, bodies: dict[str, str], tasks: list[Task] | None = None) -> Path:
    tools = to_tool_specs(ToolSpecAnswer.model_validate(bk.tool_spec_answer()))
    draft = EnvDraft(env_id=bk.ENV_ID, title=bk.SCENARIO.name, scenario=bk.SCENARIO, schema_sql=bk.SCHEMA_SQL,
                     data_sql=bk.DATA_SQL, tools=tools, tool_bodies=bodies, tasks=tasks or [], rules=VET_RULES)
    return write_env(draft, tmp_path / bk.ENV_ID)


# add_treatment on a completed (invoiced) visit: the invoice no longer matches its treatments.
ADD_TREATMENT_ANYWHERE = bk.TOOL_BODIES["add_treatment"].replace(
    'if db.execute("SELECT 1 FROM invoices WHERE appointment_id = ?", (appointment_id,)).fetchone() is not None:\n'
    '    raise ToolError(f"appointment {appointment_id} is already invoiced")\n', "")
# cancel_appointment that cancels completed visits too.
CANCEL_ANYTHING = bk.TOOL_BODIES["cancel_appointment"].replace('if appointment["status"] != "scheduled":',
                                                                'if appointment["status"] == "cancelled":')


def test_the_rules_gate_tries_disallowed_transitions_on_seeded_rows(tmp_path, pool):
    from synth_validators import rules as gate

    good = vet_env(tmp_path / "good", bk.TOOL_BODIES)
    with Env.load(good, pool=pool) as env:
        result = gate.run(good, env)
    assert result.passed, result.evidence
    coverage = result.details["transitions"]["appointments.status"]
    assert "completed -> cancelled" in coverage["attempted"]  # tried, and refused
    assert "cancelled -> scheduled" in coverage["no_tool_can_make"]

    assert ADD_TREATMENT_ANYWHERE != bk.TOOL_BODIES["add_treatment"] != CANCEL_ANYTHING
    bad = vet_env(tmp_path / "bad", {**bk.TOOL_BODIES, "add_treatment": ADD_TREATMENT_ANYWHERE,
                                     "cancel_appointment": CANCEL_ANYTHING})
    with Env.load(bad, pool=pool) as env:
        result = gate.run(bad, env)
    assert not result.passed
    tools = result.details["tools"]
    assert set(tools) == {"add_treatment", "cancel_appointment"}
    assert any("changed from 'completed' to 'cancelled'" in p for p in tools["cancel_appointment"])
    assert any("invoice_total_matches_treatments" in p for p in tools["add_treatment"])


def test_the_rules_gate_checks_the_initial_data_and_passes_folders_without_rules(tmp_path, pool):
    from synth_validators import rules as gate

    env = make_library_env(tmp_path)
    result = gate.run(env)
    assert result.passed and "no rules.json" in result.details["note"]
    draft = read_env_draft(env)
    draft.rules = Rules(invariants=[Invariant(name="no_premium", description="nobody is premium",
                                              sql="SELECT member_id FROM members WHERE tier = 'premium'")])
    write_env(draft, env)
    result = gate.run(env)
    assert not result.passed and "initial data: invariant no_premium" in result.evidence[0]


def test_the_robust_gate_checks_the_rules_after_every_state_changing_call(tmp_path, pool):
    from synth_validators import robust

    task = Task(task_id="task_01", instruction="Add a blood panel to Rocky's dental cleaning of 2025-05-20",
                kind="write", difficulty="easy", verifier="verify_task_01",
                gold=[ToolCall(tool="add_treatment", arguments={"appointment_id": 2, "treatment_code": "LAB-BLD"})])
    env_dir = vet_env(tmp_path, {**bk.TOOL_BODIES, "add_treatment": ADD_TREATMENT_ANYWHERE}, [task])
    draft = read_env_draft(env_dir)
    draft.verifier_bodies = {"task_01": 'return [check("two_panels", final_db.execute("SELECT count(*) FROM '
                                        'appointment_treatments WHERE appointment_id = 2").fetchone()[0] == 3)]'}
    write_env(draft, env_dir)
    with Env.load(env_dir, pool=pool) as env:
        result = robust.run(env_dir, env)
    assert not result.passed
    [problem] = result.details["tools"]["add_treatment"]
    assert "replaying task_01's gold solution" in problem and "invoice_total_matches_treatments" in problem


# --------------------------------------------------------------------------- the check loop

COPIES_MATCH_LOANS = Invariant(
    name="available_copies_match_loans", description="A book's available copies are its copies minus those on loan",
    sql="SELECT b.book_id FROM books b WHERE b.available_copies != b.total_copies - (SELECT count(*) FROM loans l "
        "WHERE l.book_id = b.book_id AND l.returned_on IS NULL)")


def test_a_call_that_breaks_an_invariant_is_a_tool_bug_even_for_a_lenient_judge(fake_model, tmp_path):
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    draft.status, draft.tests, draft.report = "built", [], {}
    draft.tool_bodies["return_book"] = BUGGY_RETURN_BOOK
    draft.rules = Rules(invariants=[COPIES_MATCH_LOANS])
    write_env(draft, env)
    script = fake_model.script
    script.add("check_tests", "city_library/*", handler=lambda i: Reply(json=proposed_tests(i.subject.split("/")[1])))

    def lenient(info):  # passes everything it is shown
        ids = [line[4:].strip() for line in info.messages[-1]["content"].splitlines() if line.startswith("### ")]
        return Reply(json={"verdicts": [{"test_id": i, "verdict": "pass", "reason": "looks right"} for i in ids]})

    script.add("check_judge", "city_library/*", handler=lenient)
    script.add("check_repair", "city_library/return_book",
               Reply(json={"diagnosis": "the copy never went back on the shelf", "body": TOOL_BODIES["return_book"]}))
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    repaired_at = next(r.time for r in fake_model.requests if r.stage == "check_repair")
    judged = " ".join(r.body["messages"][-1]["content"] for r in fake_model.requests
                      if r.stage == "check_judge" and r.time < repaired_at)
    assert "### return_book.1\n" not in judged  # decided without the judge
    report = json.loads((env / "report.json").read_text())
    [repair] = report["check_loop"]["rounds"][0]["repairs"]
    assert repair["kind"] == "tool" and repair["name"] == "return_book"
    assert repair["diagnosis"] == "the copy never went back on the shelf"
    assert "available_copies + 1" not in repair["before"] and "available_copies + 1" in repair["after"]
    assert repair["before"].startswith("def return_book(") and repair["tests"][0]["test_id"] == "return_book.1"
    assert "available_copies_match_loans" in repair["tests"][0]["reason"]
    assert repair["tests"][0]["observed"]["broken"]
