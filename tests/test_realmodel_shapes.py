"""What a real model did to synth, replayed on the fake model server with answers of the same shape
(docs/real-model-trials.md; the 2026-11-25 trial's requests and answers are in
../shared/realmodel/transcripts/). Each test is named after the failure it guards against:

1. a tool list designed in parts grew past the whole's limit with no repair turn;
2. red-team findings came in the check loop's last round, with no round left to repair them;
3. gold had to state a fact from a row its prompt never showed;
4. repair feedback was cut mid-value;
5. an invariant between tables filled in different parts broke, and later parts never saw the rows
   they had to agree with;
7. tools refused on rules their descriptions never stated; records dated after today;
8. history columns treated as status machines; a sixth test refused.
(6, only_changed's ambiguous arguments: tests/test_answers.py and tests/test_verifier_lint.py.)
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from pathlib import Path

import pytest
from agentkit import judge, red_team, script_agents
from envkit import GOLD_ANSWERS, TASKS, VERIFIER_BODIES
from verifykit import make_verified_library, proposed_tests, set_verifier_body

from fake_server import FakeModelServer
from synth.artifacts import (Expectation, Invariant, Observation, Rules, Scenario, Task, ToolParam, ToolSpec,
                             ToolTest, ToolTestSet, ToolTestDraft)
from synth.config import Settings
from synth.folder.database import build_database, open_bytes
from synth.folder.format import EnvDraft, read_env_draft, write_env
from synth.folder.rules import status_columns
from synth.folder.toolschema import params_to_schema
from synth.llm import Gateway, StructuredOutputError
from synth.llm.script import Reply, Script
from synth.pipeline.stages.check.check_repair import failing_test_text
from synth.pipeline.stages.check.tests import TestingAgent
from synth.pipeline.stages.build.data import future_records, generate_data
from synth.pipeline.stages.envcontext import EnvContext
from synth.pipeline.stages.check.gold import generate_gold
from synth.pipeline.stages.check.gold_scope import gold_messages
from synth.pipeline.stages.repair import StageReport
from synth.pipeline.stages.build.tool_code import generate_tool_code, tool_draft
from synth.pipeline.stages.build.tool_spec import MAX_TOOLS, generate_tool_spec, tool_budget
from synth.pipeline.verify import verify_env
from synth.runtime.sandbox import SandboxPool

SCENARIO = Scenario(name="Harbor Works", description="A marina's office: slips, boats, owners, work orders.",
                    category="services")
GOLD = {t.task_id: t for t in TASKS}
TASK_01_FACTS = [{"value": "2", "kind": "count"}]  # a read task names the facts its answer must state


def gateway_for(server: FakeModelServer, tmp_path: Path, **overrides) -> Gateway:
    values = dict(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "cache",
                  retry_base_delay=0.01, timeout=20)
    values.update(overrides)
    return Gateway(Settings(**values))


def prompts(server: FakeModelServer, stage: str) -> list[tuple[str, str]]:
    """(subject, last user message) of each answered request of `stage`, in order."""
    return [(r.subject, [m for m in r.body["messages"] if m["role"] == "user"][-1]["content"])
            for r in server.requests if r.stage == stage and r.status == 200]


def wide_schema(tables: int) -> str:
    return "\n".join(f"CREATE TABLE t{i:02d} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, note TEXT);"
                     for i in range(1, tables + 1))


def tools_for(tables: list[str], per_table: int, *, read_only: bool | None = None) -> list[dict]:
    out = []
    for table in tables:
        for k in range(per_table):
            writes = (k % 2 == 1) if read_only is None else not read_only
            verb = "update" if writes else "get"
            out.append({"name": f"{verb}_{table}_{k}", "read_only": not writes, "description":
                        f"{'Change' if writes else 'Look up'} one record of {table} by id; fails if it does not "
                        "exist; returns the record.",
                        "params": [{"name": "record_id", "type": "integer", "description": "id"}]})
    return out


# --------------------------------------------------------------------------- 1. a tool list in parts



def batch_entry(task_id: str, verifier: str | None = None, diagnosis: str | None = None) -> dict:
    """One task's answer in a gold batch: its gold calls and answer, the given verifier or its own."""
    task = GOLD[task_id]
    out = {"task_id": task_id, "actions": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold],
           "expected_answer": str(GOLD_ANSWERS[task_id]), "verifier_body": verifier or VERIFIER_BODIES[task_id]}
    if diagnosis:
        out["diagnosis"] = diagnosis
    if task.kind == "read":
        out["facts"] = TASK_01_FACTS
    return out

def test_seventy_tools_over_three_parts_each_part_told_and_held_to_its_budget(tmp_path):
    """Three parts of eight tables each once answered 23-24 tools apiece (70 in all, against a limit of
    60) and nothing could be repaired. Now each part's prompt states its share of the budget, an
    answer over it gets a repair turn naming the problem, and the shares add up to the whole."""
    tables = [f"t{i:02d}" for i in range(1, 25)]
    asked: dict[str, int] = {}

    def handler(info):
        part = info.subject.split("/", 1)[1].split("+")
        asked[info.subject] = asked.get(info.subject, 0) + 1
        first = next(m["content"] for m in info.messages if m["role"] == "user")
        budget = int(re.search(r"budget of at most (\d+) tools", first).group(1))
        per_table = 3 if asked[info.subject] == 1 else 2  # the first answer: 3 a table, like the real model
        tools = tools_for(part, per_table)
        return Reply(json={"tools": tools if asked[info.subject] == 1 else tools[:budget]})

    with FakeModelServer(Script().add("tool_spec", "harbor_works/*", handler=handler)) as server:
        gateway = gateway_for(server, tmp_path, max_tokens=6400)  # eight tables a part
        report = StageReport()
        context = EnvContext(scenario=SCENARIO, schema_sql=wide_schema(24))
        tools = asyncio.run(generate_tool_spec(context, [], gateway, report=report, order=tables))
        asks = prompts(server, "tool_spec")
    parts = sorted({s for s, _ in asks})
    assert len(parts) == 3
    budgets = {}
    for subject, text in asks:  # a part's first request states its budget
        if subject not in budgets:
            budgets[subject] = int(re.search(r"budget of at most (\d+) tools", text).group(1))
    total = tool_budget(24)
    assert sum(budgets.values()) == total <= MAX_TOOLS
    repairs = [text for _, text in asks if "over its budget" in text]
    assert len(repairs) == len(parts)  # every part's first answer went back with its count and budget
    assert len(tools) <= total and report.passed


def test_a_merged_list_only_wrong_as_a_whole_gets_a_consolidation_turn(tmp_path):
    """Each part alone is fine, but merged, no tool changes anything: a consolidation turn over the whole
    list sees the problem and fixes it; the stage would fail only after that turn."""
    tables = [f"t{i:02d}" for i in range(1, 13)]

    def part(info):
        return Reply(json={"tools": tools_for(info.subject.split("/", 1)[1].split("+"), 2, read_only=True)})

    fix = {"drop": ["get_t01_1"], "replace": [], "add": tools_for(["t01"], 1, read_only=False)}
    fix["add"][0]["name"] = "update_t01_record"
    script = Script().add("tool_spec", "harbor_works/consolidate", Reply(json=fix)) \
        .add("tool_spec", "harbor_works/*", handler=part)
    with FakeModelServer(script) as server:
        tools = asyncio.run(generate_tool_spec(EnvContext(scenario=SCENARIO, schema_sql=wide_schema(12)), [],
                                               gateway_for(server, tmp_path, max_tokens=2000), order=tables))
        asks = prompts(server, "tool_spec")
    consolidation = [text for s, text in asks if s == "harbor_works/consolidate"]
    assert len(consolidation) == 1 and "every tool is read_only" in consolidation[0]
    assert "get_t01_0(record_id) [read-only]" in consolidation[0]  # the merged list, whole
    names = [t.name for t in tools]
    assert "update_t01_record" in names and "get_t01_1" not in names


def test_a_consolidation_that_does_not_fix_the_list_fails_the_stage_after_seeing_the_problem(tmp_path):
    tables = [f"t{i:02d}" for i in range(1, 13)]
    script = Script().add("tool_spec", "harbor_works/consolidate", Reply(json={"drop": [], "replace": [], "add": []})) \
        .add("tool_spec", "harbor_works/*", handler=lambda info: Reply(json={"tools": tools_for(
            info.subject.split("/", 1)[1].split("+"), 2, read_only=True)}))
    with FakeModelServer(script) as server:
        with pytest.raises(StructuredOutputError, match="still invalid after 2 turn.*every tool is read_only"):
            asyncio.run(generate_tool_spec(EnvContext(scenario=SCENARIO, schema_sql=wide_schema(12)), [],
                                           gateway_for(server, tmp_path, max_tokens=2000, repair_turns=1),
                                           order=tables))
        consolidation = [text for s, text in prompts(server, "tool_spec") if s == "harbor_works/consolidate"]
    assert len(consolidation) == 2 and "every tool is read_only" in consolidation[1]  # the repair turn saw it


# --------------------------------------------------------------------------- 3. gold sees the rows it needs


def test_gold_is_shown_the_row_a_task_names_even_far_past_the_first_rows():
    """task_08 needed row 40 of a 72-row table; the prompt showed the first 12 and the model (rightly)
    would not invent the value. Rows a task names are found by query and shown first."""
    schema = ("CREATE TABLE owners (id INTEGER PRIMARY KEY, name TEXT NOT NULL, phone TEXT);\n"
              "CREATE TABLE boats (id INTEGER PRIMARY KEY, owner_id INTEGER NOT NULL REFERENCES owners(id), "
              "name TEXT NOT NULL, length_ft REAL);")
    data = "\n".join(f"INSERT INTO owners VALUES ({i}, 'Owner Number{i:03d}', '555-{i:04d}');" for i in range(1, 73))
    data += "\n" + "\n".join(f"INSERT INTO boats VALUES ({i}, {i}, 'Boat {i}', {20 + i});" for i in range(1, 73))
    task = Task(task_id="task_08", instruction="What is the phone number of Owner Number040, and how long is "
                "their boat?", kind="read", difficulty="easy")
    draft = EnvDraft(env_id="harbor_works", title="Harbor Works", scenario=SCENARIO, schema_sql=schema,
                     data_sql=data, tools=[], tasks=[task])
    text = gold_messages(EnvContext.of(draft), draft, build_database(schema, data), [task])[-1]["content"]
    assert "40 | Owner Number040 | 555-0040" in text
    assert "40 | 40 | Boat 40 | 60.0" in text  # the row linked to it by its foreign key
    assert re.search(r"\.\.\. \d+ more rows not shown", text)  # a cut says what it left out


def test_a_failing_gold_repair_sees_what_each_gold_call_returned(tmp_path):
    """The repair turn shows every gold call's result, whole (cut by items), so the expected answer can
    be taken from what the tools return instead of guessed."""
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    task = GOLD["task_01"]
    wrong = {"actions": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold],
             "expected_answer": "7 copies", "verifier_body": 'return rubric([check("says 7", states(answer, [7]))])'}
    wrong["facts"] = [{"value": "7", "kind": "count"}]
    right = {"actions": wrong["actions"], "expected_answer": str(GOLD_ANSWERS["task_01"]), "facts": TASK_01_FACTS,
             "verifier_body": VERIFIER_BODIES["task_01"]}
    script = Script().add("gold", "city_library/task_01", Reply(json=wrong), Reply(json=right))
    with FakeModelServer(script) as server, SandboxPool(workers=1, call_timeout=5) as pool:
        settings = Settings(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "c",
                            retry_base_delay=0.01)
        _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=["task_01"],
                                              feedback={"task_01": ["the verifier must be redone"]}, pool=pool))
        asks = prompts(server, "gold")
    assert report.tasks["task_01"].passed and len(asks) == 2
    repair = asks[1][1]
    assert "What your actions returned, call by call" in repair
    assert '"available_copies": 2' in repair and '"title": "The Left Hand of Darkness"' in repair


# --------------------------------------------------------------------------- 4. feedback never cut mid-value


def test_a_failing_test_is_shown_whole_with_long_results_cut_by_items():
    from synth.use.replay import preview

    rows = [{"slip_id": i, "boat": f"Boat {i}", "owner": f"Owner Number{i:03d}", "note": "x" * 60}
            for i in range(1, 80)]
    test = ToolTest(test_id="list_slips.1", tool="list_slips", arguments={}, purpose="list every slip",
                    expectation=Expectation(outcome="success", change="none"),
                    observed=Observation(ok=True, kind="ok", result=preview(rows), diff={}), verdict="fail",
                    reason="slip 12 is missing")
    text = failing_test_text(test)
    assert re.search(r"\.\.\. \d+ more items not shown \(of 79\)", text)
    shown = json.loads(text.split("got returned ", 1)[1].split("; database change:", 1)[0])
    assert all(isinstance(r, dict) and set(r) == {"slip_id", "boat", "owner", "note"} for r in shown[:-1])


# --------------------------------------------------------------------------- 5. data in parts


def test_a_later_part_sees_the_rows_it_must_agree_with_and_repairs_a_broken_invariant(tmp_path):
    """Promotions were written in one part and their sign-offs in a later one, which never saw them:
    the invariant failed until the end. Now the later part is shown the promotions and gets a turn
    for the invariant its rows break."""
    schema = ("CREATE TABLE promotions (id INTEGER PRIMARY KEY, apprentice TEXT NOT NULL, level INTEGER NOT NULL, "
              "status TEXT NOT NULL CHECK (status IN ('pending','approved')), decided_on TEXT);\n"
              "CREATE TABLE signoffs (id INTEGER PRIMARY KEY, promotion_ref INTEGER NOT NULL, signer TEXT NOT NULL, "
              "signed_on TEXT NOT NULL);")
    rules = Rules(invariants=[Invariant(name="approved_promotions_are_signed_off",
                                        description="every approved promotion has a sign-off",
                                        sql="SELECT p.id FROM promotions p WHERE p.status = 'approved' AND NOT "
                                            "EXISTS (SELECT 1 FROM signoffs s WHERE s.promotion_ref = p.id)")])
    promotions = ("INSERT INTO promotions VALUES (1, 'Dana Whitfield', 2, 'approved', '2025-05-20');\n"
                  "INSERT INTO promotions VALUES (2, 'Luis Ortega', 1, 'pending', NULL);\n"
                  "INSERT INTO promotions VALUES (3, 'Mia Chen', 3, 'approved', '2025-05-28');")
    signoffs_missing = "INSERT INTO signoffs VALUES (1, 1, 'Angela Morris', '2025-05-21');"
    signoffs_all = signoffs_missing + "\nINSERT INTO signoffs VALUES (2, 3, 'Angela Morris', '2025-05-29');"
    script = Script().add("data", "harbor_works/promotions", Reply(json={"inserts": promotions})) \
        .add("data", "harbor_works/signoffs", Reply(json={"inserts": signoffs_missing}),
             Reply(json={"inserts": signoffs_all}))
    with FakeModelServer(script) as server:
        result = asyncio.run(generate_data(SCENARIO, [], schema, gateway_for(server, tmp_path, max_tokens=380),
                                           rounds=2, report=StageReport(), rules=rules, today="2025-06-02"))
        asks = prompts(server, "data")
    later = [text for s, text in asks if s == "harbor_works/signoffs"]
    assert len(later) == 2
    assert "Mia Chen" in later[0]  # the promotions it must agree with, though no foreign key links them
    assert "approved_promotions_are_signed_off" in later[1] and "fix it in the rows of signoffs" in later[1]
    assert not [t for s, t in asks if s == "harbor_works"]  # no data_fix needed at the end
    conn = open_bytes(result.db_bytes, readonly=True)
    assert conn.execute("SELECT count(*) FROM signoffs").fetchone()[0] == 2


# --------------------------------------------------------------------------- 7. tools as they behave; dates


def test_records_of_what_happened_are_not_dated_after_today():
    schema = ("CREATE TABLE bookings (id INTEGER PRIMARY KEY, performance_date TEXT, booked_at TEXT, "
              "paid_on TEXT);")
    data = ("INSERT INTO bookings VALUES (1, '2025-06-20', '2025-05-30 10:00', '2025-05-30');\n"
            "INSERT INTO bookings VALUES (2, '2025-06-21', '2025-06-04 09:00', NULL);")
    problems = future_records(build_database(schema, data), "2025-06-02")
    assert len(problems) == 1 and "booked_at = '2025-06-04 09:00' is after today (2025-06-02)" in problems[0]


def test_a_refusal_the_description_does_not_state_is_added_to_the_description(fake_model, tmp_path):
    """A tool refused on a rule its description never mentioned, and the tests that hit it were marked
    test_wrong with nothing fixed: an agent could not know the rule before calling. Now the checking
    agent's sentence for the rule is added to the tool's description, and recorded as a repair."""
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    draft.status, draft.report, draft.tests = "built", {}, []
    write_env(draft, env)
    rule = "Refuses a member who already has as many active loans as their tier allows."

    def judge_tests(info):
        prompt = info.messages[-1]["content"]
        verdicts = []
        for block in re.split(r"\n### ", prompt)[1:]:
            test_id = block.split("\n", 1)[0].strip()
            verdicts.append({"test_id": test_id, "verdict": "pass", "reason": "right",
                             "description_fix": rule if test_id.startswith("checkout_book") else ""})
        return Reply(json={"verdicts": verdicts})

    fake_model.script.add("check_tests", "city_library/*",
                          handler=lambda info: Reply(json=proposed_tests(info.subject.split("/")[1])))
    fake_model.script.add("check_judge", "city_library/*", handler=judge_tests)
    script_agents(fake_model.script)
    settings = Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "c",
                        retry_base_delay=0.01)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert result.status == "verified", result.reasons
    tools = {t["name"]: t for t in json.loads((env / "tools.json").read_text())}
    assert tools["checkout_book"]["description"].endswith(rule)
    assert tools["return_book"]["description"].count("tier allows") == 0
    repairs = [rep for r in json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
               for rep in r["repairs"]]
    assert [(r["kind"], r["name"]) for r in repairs] == [("description", "checkout_book")]
    assert rule in (env / "tools.py").read_text()  # the docstring an agent reads


# --------------------------------------------------------------------------- 2. a finding in the last round


def test_a_red_team_finding_in_the_last_round_still_gets_its_repair_and_recheck(fake_model, tmp_path):
    """With one check round, the red team's exploit came with no round left: the env failed on a
    correct finding nobody could repair. Now a verifier finding on clean tools buys a repair round."""
    env = make_verified_library(tmp_path)
    loose = ('return rubric([check("answer_says_two", states(answer, [2], [1]), 2.0), '
             'check("database_unchanged", unchanged(initial_db, final_db))])')
    set_verifier_body(env, "task_01", loose)
    draft = read_env_draft(env)
    draft.status, draft.report = "built", {}
    write_env(draft, env)
    exploit = {"idea": "a second count as a correction", "calls": [],
               "answer": "There are 2 copies. Correction: 3 copies."}
    script_agents(fake_model.script, attack=red_team({"task_01": [exploit]}),
                  verdicts=judge(lambda q, block: ("wrong", "two counts") if "Correction: 3" in block
                                 else ("correct", "states 2")))
    fixed = {"diagnosis": "a second count is a hedge", "actions": [
        {"tool": c.tool, "arguments": dict(c.arguments)} for c in GOLD["task_01"].gold],
        "expected_answer": str(GOLD_ANSWERS["task_01"]), "facts": TASK_01_FACTS,
        "verifier_body": VERIFIER_BODIES["task_01"]}
    fake_model.script.add("gold", "city_library/task_01", Reply(json=fixed))
    settings = Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "c",
                        retry_base_delay=0.01, check_rounds=1)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert result.status == "verified", result.reasons
    rounds = json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
    assert len(rounds) == 2 and rounds[0]["repairs"][0]["name"] == "task_01"
    assert rounds[1]["agents"]["task_01"]["red_team"] == {"attempts": 1, "exploits": 0}


# --------------------------------------------------------------------------- 8. other


def test_history_columns_are_not_status_machines():
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.executescript(
        "CREATE TABLE passes (id INTEGER PRIMARY KEY, status TEXT CHECK (status IN ('active','expired')));"
        "CREATE TABLE pass_history (id INTEGER PRIMARY KEY, old_status TEXT CHECK (old_status IN ('active',"
        "'expired')), new_status TEXT CHECK (new_status IN ('active','expired')));")
    assert [(t, c) for t, c, _ in status_columns(conn)] == [("passes", "status")]


def test_a_sixth_test_for_a_tool_is_kept_not_refused():
    tool = ToolSpec(name="get_slip", description="Look up a slip by id; fails if there is none.", read_only=True,
                    parameters=params_to_schema([ToolParam(name="slip_id", type="integer")]))
    agent = TestingAgent.__new__(TestingAgent)
    agent.draft = EnvDraft(env_id="harbor_works", title="Harbor Works", scenario=SCENARIO, schema_sql="",
                           data_sql="", tools=[tool], tasks=[])
    agent.tables = []
    tests = ToolTestSet(tool="get_slip", tests=[ToolTestDraft(purpose=f"slip {i}", arguments={"slip_id": i},
                                                              expect="success" if i < 6 else "error",
                                                              expected_change="none")
                                                for i in range(1, 7)])
    assert agent._set_problems(tests, tool) == []


def test_independent_tool_code_batches_are_in_flight_together(tmp_path):
    """The bodies of a large tool list come in several batches; they no longer wait for each other."""
    tools = [ToolSpec(name=f"get_item_{i:02d}", description=f"Look up item {i} by id; fails if there is none.",
                      read_only=True, parameters=params_to_schema([ToolParam(name="item_id", type="integer")]))
             for i in range(1, 25)]
    lock, state = threading.Lock(), {"now": 0, "most": 0}
    body = ('row = db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()\n'
            'if row is None:\n    raise ToolError("no such item")\nreturn dict(row)\n') + "# padding\n" * 40

    def handler(info):
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.4)
        with lock:
            state["now"] -= 1
        names = info.subject.split("/", 1)[1].split("+") if "/" in info.subject else [t.name for t in tools]
        return Reply(json={"functions": [{"name": n, "body": body} for n in names]})

    schema = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT);"
    data = "INSERT INTO items VALUES (1, 'anchor');"
    draft = tool_draft(SCENARIO, [], schema, data, tools, today="2025-06-02")
    with FakeModelServer(Script().add("tool_code", "harbor_works*", handler=handler)) as server, \
            SandboxPool(workers=1, call_timeout=5) as pool:
        asyncio.run(generate_tool_code(draft, build_database(schema, data),
                                       gateway_for(server, tmp_path, max_tokens=3000, concurrency=4), pool=pool,
                                       rounds=1, report=StageReport()))
        batches = [s for s, _ in prompts(server, "tool_code")]
    assert len(batches) >= 3 and state["most"] >= 2


def test_a_busy_sandbox_is_never_fed_back_to_the_model_as_a_fault_of_its_answer(tmp_path):
    """In a trial, every sandbox worker was held by other envs' open episodes, and "all 6 sandbox workers
    hold live episodes" went to the model as a problem of its gold answer, 30 times. A busy pool is the
    program's state, not the answer's: the task records the error, and no repair turn is asked."""
    from envkit import make_library_env

    from synth.runtime import Env

    env = make_verified_library(tmp_path / "a")
    other = make_library_env(tmp_path / "b")
    draft = read_env_draft(env)
    task = GOLD["task_01"]
    answer = {"actions": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold],
              "expected_answer": str(GOLD_ANSWERS["task_01"]), "facts": TASK_01_FACTS,
              "verifier_body": VERIFIER_BODIES["task_01"]}
    script = Script().add("gold", "city_library/task_01", Reply(json=answer))
    with FakeModelServer(script) as server, SandboxPool(workers=1, call_timeout=5, wait_timeout=0.5) as pool:
        holder = Env.load(other, pool=pool)
        episode = holder.episode("task_01")  # the only worker now holds a live episode of another env
        try:
            settings = Settings(model="openai/test-model", base_url=server.openai_base_url,
                                cache_dir=tmp_path / "c", retry_base_delay=0.01)
            _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=["task_01"],
                                                  feedback={"task_01": ["redo it"]}, pool=pool))
        finally:
            episode.close()
            holder.close()
        asks = prompts(server, "gold")
    assert len(asks) == 1 and "sandbox workers" not in asks[0][1]
    assert "sandbox workers hold live episodes" in (report.tasks["task_01"].error or "")


def test_an_env_keeps_to_its_share_of_sandbox_workers_in_a_pipeline_pool(tmp_path):
    """A trial deadlocked: one env's many open episodes (the solver's) had spread over every worker, the
    other envs' gold trials waited for one, and their waiting filled every thread the episodes' own calls
    needed. A pipeline pool keeps an env's episodes on its share of workers, and sandbox work runs on
    threads enough for every worker's callers."""
    from envkit import make_library_env

    from synth.pipeline.runner import SANDBOX_THREADS, pipeline_pool, pipeline_threads
    from synth.runtime import Env

    settings = Settings(parallel_envs=1, tool_timeout=5)
    with pipeline_pool(settings) as pool:
        env = Env.load(make_library_env(tmp_path / "a"), pool=pool)
        episodes = [env.episode("task_01") for _ in range(4)]
        try:
            other = Env.load(make_library_env(tmp_path / "b"), pool=pool)  # a worker is still free for it
            other.close()
        finally:
            for ep in episodes:
                ep.close()
            env.close()
    assert pipeline_threads()._max_workers == SANDBOX_THREADS


def test_per_env_usage_counts_what_cached_answers_cost_and_the_time_in_flight(tmp_path):
    """A trial resumes from the cache; its figures per env (docs/real-model-trials.md) must still say what
    every answer the env used cost when it was first asked, and how long the env had a call in flight."""
    from pydantic import BaseModel

    from synth.pipeline.store import RunStore

    class Pong(BaseModel):
        word: str

    ask = [{"role": "user", "content": "Say a word."}]
    script = Script().add("tasks", "*", handler=lambda info: (time.sleep(0.3), Reply(json={"word": "pong"}))[1])
    with FakeModelServer(script) as server:
        first = RunStore(tmp_path / "run1")
        gateway = Gateway(Settings(model="openai/test-model", base_url=server.openai_base_url,
                                   cache_dir=tmp_path / "cache", retry_base_delay=0.01), recorder=first)

        async def both():
            await asyncio.gather(gateway.structured(Pong, ask, stage="tasks", subject="harbor_works"),
                                 gateway.structured(Pong, ask, stage="tasks", subject="harbor_works", sample=1))
        asyncio.run(both())
        again = RunStore(tmp_path / "run2")  # the same requests again: both from the cache
        gateway2 = Gateway(Settings(model="openai/test-model", base_url=server.openai_base_url,
                                    cache_dir=tmp_path / "cache", retry_base_delay=0.01), recorder=again)
        asyncio.run(gateway2.structured(Pong, ask, stage="tasks", subject="harbor_works"))
    fresh = first.usage_by_env()["harbor_works"]
    assert fresh["calls"] == 2 and fresh["cached"] == 0 and fresh["prompt_tokens"] > 0
    assert fresh["busy_seconds"] >= 0.3 - 0.05  # at least one call's time (they may overlap)
    reused = again.usage_by_env()["harbor_works"]
    assert reused["cached"] == 1 and reused["prompt_tokens"] == 0
    assert reused["reused_tokens"] == (fresh["prompt_tokens"] + fresh["completion_tokens"]) // 2


def test_an_envs_busy_time_is_the_union_of_its_calls_in_flight(tmp_path):
    from synth.pipeline.store import RunStore

    store = RunStore(tmp_path / "run")
    for subject, end, latency in (("harbor_works/a", 110.0, 10.0), ("harbor_works/b", 105.0, 10.0),  # overlap
                                  ("harbor_works", 200.0, 5.0), ("other_env/x", 300.0, 50.0)):
        store.record_call({"stage": "gold", "subject": subject, "provider": "openai", "model": "m", "cached": False,
                           "prompt_tokens": 100, "completion_tokens": 10, "cost": 0.0, "latency": latency,
                           "status": "ok", "error": None, "time": end})
    store.record_call({"stage": "expand", "subject": "seed", "provider": "openai", "model": "m", "cached": False,
                       "prompt_tokens": 999, "completion_tokens": 9, "cost": 0.0, "latency": 1.0, "status": "ok",
                       "error": None, "time": 1.0})
    usage = store.usage_by_env()
    assert set(usage) == {"harbor_works", "other_env"}  # the run's own stages are nobody's env
    assert usage["harbor_works"]["busy_seconds"] == 15.0 + 5.0 and usage["harbor_works"]["calls"] == 3
    assert usage["other_env"]["busy_seconds"] == 50.0
    store.start("verify", "harbor_works")
    store.finish("verify", "harbor_works")
    store.record_call({"stage": "templates", "subject": "harbor_works/read", "provider": "openai", "model": "m",
                       "cached": False, "prompt_tokens": 5000, "completion_tokens": 10, "cost": 0.0, "latency": 1.0,
                       "status": "ok", "error": None, "time": time.time() + 60})  # the tasks step, after verify
    assert store.usage_by_env()["harbor_works"]["calls"] == 4
    until = store.usage_by_env(until="verify")
    assert until["harbor_works"]["calls"] == 3 and until["harbor_works"]["prompt_tokens"] == 300
    assert until["other_env"]["calls"] == 1  # no verify item: every call counts


def test_failing_answers_of_a_gold_batch_are_repaired_together_in_one_turn(tmp_path):
    """In a trial nearly every task of a gold batch came back for a repair, each in a conversation of its
    own carrying the whole prompt again (33 gold calls an env). The failing answers of a batch now go
    back in one repair turn of the batch's conversation, naming each task's problems."""
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    for task_id in ("task_01", "task_02", "task_03"):
        draft.tasks = [t.model_copy(update={"gold": [], "verifier": ""}) if t.task_id == task_id else t
                       for t in draft.tasks]
        draft.verifier_bodies.pop(task_id)

    def entry(task_id, verifier=None):
        return batch_entry(task_id, verifier=verifier)

    loose = 'return rubric([check("looks fine", True)])'
    first = {"tasks": [entry("task_01", loose), entry("task_02", loose), entry("task_03")]}
    fixed = {"tasks": [entry("task_01"), entry("task_02"), entry("task_03")]}  # all again: the extra is dropped
    script = Script().add("gold", "city_library/task_01+task_02+task_03", Reply(json=first), Reply(json=fixed))
    with FakeModelServer(script) as server, SandboxPool(workers=2, call_timeout=5) as pool:
        settings = Settings(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "c",
                            retry_base_delay=0.01)
        _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, pool=pool))
        asks = prompts(server, "gold")
    assert [s for s, _ in asks] == ["city_library/task_01+task_02+task_03"] * 2  # one repair turn for both
    repair = asks[1][1]
    assert "## task_01" in repair and "## task_02" in repair and "## task_03" not in repair
    assert "passes on the untouched initial state" in repair
    assert all(o.passed for o in report.tasks.values())
    assert report.tasks["task_01"].repairs == 1 and report.tasks["task_03"].repairs == 0


def test_an_env_keeps_to_its_share_of_verifier_workers_in_a_pipeline_pool(tmp_path):
    """Verdicts run in the pool's verifier workers; in a pipeline pool an env's evaluations wait for
    its own verifier worker rather than take a clean one another env would then have to restart."""
    from envkit import make_library_env

    from synth.pipeline.runner import pipeline_pool
    from synth.runtime import Env

    with pipeline_pool(Settings(parallel_envs=1, tool_timeout=5)) as pool:
        env = Env.load(make_library_env(tmp_path / "a"), pool=pool)
        episodes = [env.episode("task_01") for _ in range(2)]
        verifiers = pool.verifiers
        assert len(verifiers.stats()) == 2
        held = next(s for s in verifiers._slots if s.env is not None)
        with held.lock:  # its verifier worker is busy: both evaluations must wait for it
            threads = [threading.Thread(target=ep.evaluate, args=("x",)) for ep in episodes]
            for thread in threads:
                thread.start()
            deadline = time.monotonic() + 10
            while held.pending < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert held.pending == 2 and [s["env"] for s in verifiers.stats()].count(None) == 1
        for thread in threads:
            thread.join()
        for ep in episodes:
            ep.close()
        env.close()


def test_tasks_the_check_loop_sends_back_are_repaired_in_one_batch_turn(tmp_path):
    """The check loop's findings sent each task into a gold conversation of its own, with up to three
    repairs: 7 calls a task, 20k tokens each. Tasks sent back together now share one turn that starts
    from their current answers and the findings; the loop checks them again and asks again if need be."""
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)

    def entry(task_id):
        return batch_entry(task_id, diagnosis="as the findings say")

    script = Script().add("gold", "city_library/task_01+task_02", Reply(json={"tasks": [entry("task_01"),
                                                                                      entry("task_02")]}))
    with FakeModelServer(script) as server, SandboxPool(workers=2, call_timeout=5) as pool:
        settings = Settings(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "c",
                            retry_base_delay=0.01)
        findings = {"task_01": ["the red team's attempt earned 1.00"], "task_02": ["a paraphrase scored 0.40"]}
        _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=list(findings),
                                              feedback=findings, pool=pool))
        asks = [r for r in server.requests if r.stage == "gold" and r.status == 200]
    assert len(asks) == 1 and asks[0].subject == "city_library/task_01+task_02"
    roles = [m["role"] for m in asks[0].body["messages"]]
    assert roles == ["system", "user", "assistant", "user"]  # their current answers, then the findings
    last = asks[0].body["messages"][-1]["content"]
    assert "## task_01" in last and "the red team's attempt earned 1.00" in last and "## task_02" in last
    assert all(o.passed for o in report.tasks.values())


def test_a_batch_repair_cut_off_at_the_output_cap_is_asked_again_in_halves(tmp_path):
    """A real-model trial: the check loop sent four tasks back together, their verifiers had grown to
    hundreds of lines, and the one repair answer was cut off at the output cap four rounds running, until
    the tasks were dropped. A cut-off repair of several tasks is now asked again in halves."""
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)

    def entry(task_id):
        return batch_entry(task_id, diagnosis="as the findings say")

    script = (Script().add("gold", "city_library/task_01+task_02", Reply(text='{"tasks": [{"task_id": "task_01", "di',
                                                                          truncated=True))
              .add("gold", "city_library/task_01", Reply(json={"tasks": [entry("task_01")]}))
              .add("gold", "city_library/task_02", Reply(json={"tasks": [entry("task_02")]})))
    with FakeModelServer(script) as server, SandboxPool(workers=2, call_timeout=5) as pool:
        settings = Settings(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "c",
                            retry_base_delay=0.01)
        findings = {"task_01": ["the red team's attempt earned 1.00"], "task_02": ["a paraphrase scored 0.40"]}
        _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=list(findings),
                                              feedback=findings, pool=pool))
        asks = [r.subject for r in server.requests if r.stage == "gold" and r.status == 200]
    assert asks == ["city_library/task_01+task_02", "city_library/task_01", "city_library/task_02"]
    assert all(o.passed for o in report.tasks.values()), report.tasks


def test_a_first_batch_answer_cut_off_is_asked_in_halves_and_a_single_task_cut_off_fails_with_the_reason(tmp_path):
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    cut = Reply(text='{"tasks": [{"task_id": "task_01", "di', truncated=True)
    script = (Script().add("gold", "city_library/task_01+task_02", cut)
              .add("gold", "city_library/task_01", Reply(json={
                  "actions": [{"tool": "search_books", "arguments": {"query": "Left Hand of Darkness"}}],
                  "expected_answer": GOLD_ANSWERS["task_01"], "facts": TASK_01_FACTS,
                  "verifier_body": VERIFIER_BODIES["task_01"]}))
              .add("gold", "city_library/task_02", cut))
    with FakeModelServer(script) as server, SandboxPool(workers=2, call_timeout=5) as pool:
        settings = Settings(model="openai/test-model", base_url=server.openai_base_url, cache_dir=tmp_path / "c",
                            retry_base_delay=0.01)
        _, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=["task_01", "task_02"],
                                              pool=pool))
        asks = [r.subject for r in server.requests if r.stage == "gold" and r.status == 200]
    # task_02 alone is asked again at the model's whole cap (settings.max_tokens), then given up
    assert asks == ["city_library/task_01+task_02", "city_library/task_01", "city_library/task_02",
                    "city_library/task_02"]
    assert report.tasks["task_01"].passed and not report.tasks["task_02"].passed
    assert "cut off at the output cap" in (report.tasks["task_02"].error or ""), report.tasks["task_02"]


def test_answers_taken_from_the_cache_are_counted_at_their_first_cost(tmp_path, capsys):
    """Trial 3 replayed most answers from the cache of earlier trials: the run's summary said 245k tokens per
    verified env, the fresh ones only. Its usage and summary now give what the cached answers first cost."""
    from synth.cli.run import print_summary
    from synth.pipeline.store import RunStore

    store = RunStore(tmp_path / "run")
    for cached, fresh, reused in ((False, 1000, 0), (True, 0, 4000)):
        store.record_call({"stage": "gold", "subject": "harbor_works/task_01", "provider": "openai", "model": "m",
                           "cached": cached, "prompt_tokens": fresh, "completion_tokens": 0, "cost": 0.0,
                           "latency": 1.0, "status": "ok", "error": None, "time": 1.0,
                           "reused_prompt_tokens": reused, "reused_completion_tokens": 0})
    usage = store.usage()
    assert usage["total"]["reused_tokens"] == 4000 and usage["stages"]["gold"]["reused_tokens"] == 4000
    summary = {"run_id": "r", "model": "m", "funnel": {"verified": 1}, "failures": {}, "usage": usage,
               "per_verified_env": {"tokens": 1000, "tokens_with_reused": 5000, "cost": 0.0}, "paths": {}}
    print_summary(summary)
    printed = " ".join(capsys.readouterr().out.split())
    assert "tokens 1,000 (+ 4,000 in cached answers, at their first cost)" in printed
    assert "per verified env: 1,000 tokens (5,000 with the cached answers)" in printed
