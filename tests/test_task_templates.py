"""`synth tasks` on the hand-written library env, its templates written by the fake model server:
instances are made and checked with no model, a verifier wrong on some rows keeps only the rows where
it holds, a verifier that pays an exploit probe gets one repair (kept when it is fixed, dropped whole
when it is not), train and test are split by template, `--more` adds rows with no model, and every
instance kept passes `synth check`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from verifykit import make_verified_library

from synth.cli import app
from synth.config import Settings
from synth.folder.format import read_env_draft
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.artifacts.templates import HARD_CALLS
from synth.pipeline.tasks.instances import SlotError, Seen, fill, fill_calls, instantiate, slot_names
from synth.pipeline.tasks.step import add_tasks
from synth.pipeline.verify import check_env
from synth.view.app import create_app
from synth.view.sources import resolve

ENV = "city_library"
AVAILABLE = ("SELECT book_id, title, genre, available_copies AS free, total_copies AS total FROM books "
             "WHERE available_copies > 0 ORDER BY book_id")
CHECKOUT_ROWS = ("SELECT m.member_id, m.name, m.email, b.book_id, b.title FROM members m CROSS JOIN books b WHERE "
                 "b.available_copies > 0 AND (SELECT count(*) FROM loans l WHERE l.member_id = m.member_id AND "
                 "l.returned_on IS NULL) < m.max_loans AND NOT EXISTS (SELECT 1 FROM loans l WHERE l.member_id = "
                 "m.member_id AND l.book_id = b.book_id AND l.returned_on IS NULL) ORDER BY m.member_id, b.book_id")
RESERVE_ROWS = ("SELECT m.member_id, m.name, m.email, b.book_id, b.title FROM members m CROSS JOIN books b WHERE "
                "b.available_copies = 0 AND NOT EXISTS (SELECT 1 FROM reservations r WHERE r.member_id = m.member_id "
                "AND r.book_id = b.book_id AND r.status = 'active') ORDER BY m.member_id, b.book_id")

COUNT_CHECK = '''\
book = query_rows(initial_db, "SELECT available_copies, total_copies, genre FROM books WHERE book_id = ?",
                  (params["book_id"],))
row = book[0] if book else {}
free = {PICK}
others = sorted(set(range(6)) - {free})
return rubric([
    check("says how many copies, and no other count", bool(book) and states(answer, [free], others), 2.0),
    check("database unchanged", unchanged(initial_db, final_db), 0.5),
])
'''
LOAN_CHECK = '''\
changes = db_diff(initial_db, final_db)
new = changes.get("loans", {}).get("added", [])
loan = new[0] if len(new) == 1 else {}
shelf = query_rows(final_db, "SELECT available_copies FROM books WHERE book_id = ?", (params["book_id"],))
before = query_rows(initial_db, "SELECT available_copies FROM books WHERE book_id = ?", (params["book_id"],))
return rubric([
    check("one new loan of that book for that member", loan.get("member_id") == params["member_id"]
          and loan.get("book_id") == params["book_id"] and loan.get("returned_on") is None, 2.0),
    check("one copy fewer on the shelf", bool(shelf) and bool(before)
          and shelf[0]["available_copies"] == before[0]["available_copies"] - 1),{SCOPE}
    check("the answer reports the loan", reports(answer, [params["title"]])),
])
'''
SCOPE = ('\n    check("nothing else changed", only_changed(changes, {"loans": {"added": True}, "books": {"rows": '
         '{params["book_id"]: ["available_copies"]}}})),')
HOLD_CHECK = '''\
changes = db_diff(initial_db, final_db)
new = changes.get("reservations", {}).get("added", [])
hold = next((h for h in new if h["member_id"] == params["member_id"] and h["book_id"] == params["book_id"]), {})
return rubric([
    check("one new active reservation of that book for that member", hold.get("member_id") == params["member_id"]
          and hold.get("book_id") == params["book_id"] and hold.get("status") == "active", 2.0),
    check("the answer reports the reservation", reports(answer, [params["title"]])),
])
'''


def read_template(name: str, pick: str, instruction: str, fact: str) -> dict:
    return {"name": name, "kind": "read", "difficulty": "easy", "instruction": instruction, "query": AVAILABLE,
            "actions": [{"tool": "search_books", "arguments": {"query": "{title}"}}],
            "expected_answer": f"{{{fact}}} copies of {{title}}.", "facts": [{"value": f"{{{fact}}}", "kind": "count"}],
            "free_columns": None, "verifier_body": COUNT_CHECK.replace("{PICK}", pick)}


def checkout_template(scoped: bool) -> dict:
    return {"name": "check_out_for_member", "kind": "write", "difficulty": "medium",
            "instruction": "I'm {name} ({email}). Please check out {title} for me.", "query": CHECKOUT_ROWS,
            "actions": [{"tool": "get_member", "arguments": {"email": "{email}"}},
                        {"tool": "checkout_book", "arguments": {"member_id": "{member_id}", "book_id": "{book_id}"}}],
            "expected_answer": "{title} is checked out to {name}.", "facts": None, "free_columns": [],
            "verifier_body": LOAN_CHECK.replace("{SCOPE}", SCOPE if scoped else "")}


def reserve_template() -> dict:
    return {"name": "reserve_for_member", "kind": "write", "difficulty": "medium",
            "instruction": "I'm {name} ({email}); put me on the waiting list for {title}.", "query": RESERVE_ROWS,
            "actions": [{"tool": "get_member", "arguments": {"email": "{email}"}},
                        {"tool": "reserve_book", "arguments": {"member_id": "{member_id}", "book_id": "{book_id}"}}],
            "expected_answer": "{name} is on the waiting list for {title}.", "facts": None, "free_columns": [],
            "verifier_body": HOLD_CHECK}


# Wrong for the mystery books only: the rows where it holds stay. Wrong for almost every row: repaired, and
# still wrong after its repair, it is dropped whole.
MOSTLY_RIGHT = read_template("copies_on_shelf", 'row["total_copies"] if row["genre"] == "mystery" else '
                             'row["available_copies"]', "How many copies of {title} can I borrow right now?", "free")
MOSTLY_WRONG = read_template("copies_owned", 'row["available_copies"]',
                             "How many copies of {title} does the library own in all?", "total")


def settings(fake_model, tmp_path: Path, **extra) -> Settings:
    return Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                    retry_base_delay=0.01, templates=4, template_sample=0, **extra)


def script_templates(fake_model, repairs: dict[str, dict]) -> None:
    fake_model.script.add("templates", f"{ENV}/read", Reply(json={"templates": [MOSTLY_RIGHT, MOSTLY_WRONG]}))
    fake_model.script.add("templates", f"{ENV}/write", Reply(json={"templates": [checkout_template(False),
                                                                                 reserve_template()]}))
    for name, answer in repairs.items():
        fake_model.script.add("templates", f"{ENV}/{name}", Reply(json={**answer, "diagnosis": "fixed, I hope"}))


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return make_verified_library(tmp_path)


def run_step(env_dir: Path, s: Settings, **options):
    return asyncio.run(add_tasks(env_dir, Gateway(s), s, **options))


def instances_of(env_dir: Path) -> dict[str, list]:
    out: dict[str, list] = {}
    for task in read_env_draft(env_dir).tasks:
        if task.template_id:
            out.setdefault(task.template_id, []).append(task)
    return out


def test_slots_fill_text_and_typed_arguments_and_refuse_attribute_access():
    row = {"member_id": 3, "title": "Dune", "price": 4.5, "when": "2025-06-05"}
    assert fill("Check out {title} for {price:.2f} on {when}", row) == "Check out Dune for 4.50 on 2025-06-05"
    assert fill("{price} dollars", row) == "4.5 dollars"
    assert fill("{hours:g} hours, {price:,.2f}", {"hours": 6.0, "price": 1240.0}) == "6 hours, 1,240.00"
    assert slot_names("{a} and {b:.2f}") == ["a", "b"]
    for bad in ("{title.__class__}", "{title[0]}"):  # no attribute or index access
        with pytest.raises(SlotError):
            slot_names(bad)
    for bad in ("{title!r}", "{price:>999999}", "{nowhere}"):  # no conversion, no unbounded width, no unknown slot
        with pytest.raises(SlotError):
            fill(bad, row)
    from synth.artifacts import ToolCall, ToolSpec
    tool = ToolSpec(name="lend", description="-", read_only=False, parameters={
        "type": "object", "properties": {"member_id": {"type": "integer"}, "note": {"type": "string"}},
        "required": ["member_id"]})
    calls = fill_calls([ToolCall(tool="lend", arguments={"member_id": "{member_id}", "note": "{title} x{member_id}"})],
                       row, {"lend": tool})
    assert calls[0].arguments == {"member_id": 3, "note": "Dune x3"}  # a whole slot keeps its type


def test_two_slots_with_the_same_value_in_a_row_make_one_fact_of_an_instance(library: Path):
    """A real-model trial: a summary template's first row had two counts of 1, and the repair turn called
    fact '1' "listed twice", a rule about one row the model cannot see when it writes a template."""
    from synth.artifacts import Fact, TaskTemplate, ToolCall
    from synth.pipeline.tasks.instances import instance
    template = TaskTemplate(template_id="boat_summary", kind="read", difficulty="easy",
                            instruction="How many sessions and boats did {name} have?", query="SELECT 1",
                            actions=[ToolCall(tool="search_books", arguments={"query": "{name}"})],
                            expected_answer="{sessions} sessions on {boats} boats",
                            facts=[Fact(value="{sessions}", kind="count"), Fact(value="{boats}", kind="count")],
                            verifier_body="return rubric([])")
    tools = {t.name: t for t in read_env_draft(library).tools}
    same = instance(template, {"name": "Dune", "sessions": 1, "boats": 1}, 1, tools)
    assert [(f.value, f.kind) for f in same.facts] == [("1", "count")]
    other = instance(template, {"name": "Dune", "sessions": 3, "boats": 2}, 2, tools)
    assert [f.value for f in other.facts] == ["3", "2"]


def test_instances_continue_after_the_rows_used_and_skip_tasks_the_env_has(library: Path):
    from synth.pipeline.tasks.ask import to_template
    from synth.artifacts import TemplateDraft

    draft = read_env_draft(library)
    tools = {t.name: t for t in draft.tools}
    db = (library / "db" / "initial.sqlite").read_bytes()
    template = to_template(TemplateDraft.model_validate(MOSTLY_RIGHT))
    first = instantiate(template, db, tools, Seen.of(draft.tasks, tools), 2)
    # Row 1 asks what task_01 asks, in the same words: passed over; the ids keep their row numbers.
    assert first.skipped == {1: "the same task as task_01"}
    assert [t.task_id for t in first.tasks] == ["copies_on_shelf_002", "copies_on_shelf_003"] and first.rows_used == 3
    assert first.tasks[0].bindings == {"book_id": 2, "title": "A Wizard of Earthsea", "genre": "fantasy",
                                       "free": 1, "total": 2}
    assert first.tasks[0].gold[0].arguments == {"query": "A Wizard of Earthsea"}
    assert first.tasks[0].facts[0].value == "1"
    assert first.tasks[0].expected_answer == "1 copies of A Wizard of Earthsea."
    more = instantiate(template.model_copy(update={"rows_used": 3}), db, tools, Seen.of(draft.tasks, tools), 10)
    assert [t.task_id for t in more.tasks] == [f"copies_on_shelf_00{n}" for n in range(4, 7)] and more.rows_used == 6
    # The same request in other words (same calls, same facts) is the same task: passed over, except the row
    # the first template passed over itself.
    twin = template.model_copy(update={"template_id": "copies_free", "instruction": "Can I borrow {title}? How many?"})
    seen = Seen.of(draft.tasks + first.tasks + more.tasks, tools)
    again = instantiate(twin, db, tools, seen, 10)
    assert [t.task_id for t in again.tasks] == ["copies_free_001"]
    assert again.skipped == {n: f"the same task as copies_on_shelf_00{n}" for n in range(2, 7)}


def test_wrong_verifiers_keep_only_the_rows_where_they_hold_or_are_dropped_and_probe_payers_are_repaired(
        fake_model, library: Path, tmp_path: Path):
    script_templates(fake_model, {"copies_owned": MOSTLY_WRONG, "check_out_for_member": checkout_template(True),
                                  "reserve_for_member": reserve_template()})
    result = run_step(library, settings(fake_model, tmp_path))
    outcomes = {o.template_id: o for o in result.templates}
    # Wrong on the one mystery row: that row is dropped, the rest kept, no repair needed.
    right = outcomes["copies_on_shelf"]
    assert right.status == "kept" and right.candidates == 5 and right.kept == 4 and not right.repairs
    assert list(right.dropped) == ["copies_on_shelf_006"]  # Murder on the Orient Express, a mystery
    assert "the verifier scored" in right.dropped["copies_on_shelf_006"]
    # Wrong on most rows: one repair with the concrete evidence, still wrong, dropped whole.
    wrong = outcomes["copies_owned"]
    assert wrong.status == "dropped" and wrong.kept == 0 and len(wrong.repairs) == 1
    assert any("instance copies_owned_00" in p and "row {" in p for p in wrong.repairs[0]["problems"])
    repair = next(r for r in fake_model.requests if r.stage == "templates" and r.subject.endswith("/copies_owned"))
    assert "search_books(" in json.dumps(repair.body)  # what the gold calls returned on a failing row
    # Paid the collateral probe on every instance: repaired with the evidence, and kept once it is fixed.
    loan = outcomes["check_out_for_member"]
    assert loan.status == "kept" and loan.kept == loan.candidates > 3 and len(loan.repairs) == 1
    assert all("probe 'collateral'" in p for p in loan.repairs[0]["problems"])
    # Its repair pays the probe still: dropped whole, never shipped.
    hold = outcomes["reserve_for_member"]
    assert hold.status == "dropped" and hold.reason.startswith("after its repair,") and "probe" in hold.reason

    draft = read_env_draft(library)
    assert {t.template_id for t in draft.templates} == {"copies_on_shelf", "check_out_for_member"}
    by_template = instances_of(library)
    assert set(by_template) == {"copies_on_shelf", "check_out_for_member"}
    assert result.added == sum(len(v) for v in by_template.values()) == 4 + loan.kept
    verifiers = (library / "verifiers.py").read_text()
    assert "def template_check_out_for_member(initial_db" in verifiers and "template_copies_owned" not in verifiers
    assert "return template_copies_on_shelf(initial_db, final_db, answer, {'book_id': 2" in verifiers
    report = json.loads((library / "report.json").read_text())
    assert report["templates"]["copies_owned"]["status"] == "dropped"
    assert report["tasks_step"]["added"] == result.added and "copies_on_shelf_002" in report["probes"]
    # Every instance kept passes every gate, as `synth check` replays them.
    checked = check_env(library)
    assert checked.verified, checked.reasons
    # `synth view` lists the templates, and an instance's page shows its line and its template's function.
    with TestClient(create_app(resolve([library])), base_url="http://127.0.0.1") as client:
        page = client.get(f"/envs/{ENV}").text
        task = client.get(f"/envs/{ENV}/tasks/copies_on_shelf_002").text
    assert 'id="template-table"' in page and "check_out_for_member" in page and "copies_owned" not in page
    assert "return template_copies_on_shelf(initial_db" in task and "def template_copies_on_shelf(" in task
    # An export that takes one function per task gets an instance's template body with its row as params.
    awm = CliRunner().invoke(app, ["export", "awm", str(library), "--out", str(tmp_path / "awm")])
    assert awm.exit_code == 0, awm.output
    rows = {r["task_id"]: r for r in map(json.loads, (tmp_path / "awm" / "gen_verifier.pure_code.jsonl").read_text()
                                         .splitlines())}
    code = rows["copies_on_shelf_002"]["verification"]["code"]
    compile(code, "verifier.py", "exec")
    assert "params = {'book_id': 2," in code and "template_copies_on_shelf" not in code


def test_train_and_test_are_split_by_template_and_more_adds_rows_with_no_model(fake_model, library: Path,
                                                                              tmp_path: Path):
    script_templates(fake_model, {"copies_owned": read_template("copies_owned", 'row["total_copies"]',
                                                                "How many copies of {title} does the library own "
                                                                "in all?", "total"),
                                  "check_out_for_member": checkout_template(True),
                                  "reserve_for_member": {**reserve_template(), "verifier_body": HOLD_CHECK.replace(
                                      '    check("the answer', '    check("that reservation and nothing else", '
                                      'len(new) == 1 and only_changed(changes, {"reservations": {"added": True}})),'
                                      '\n    check("the answer')}})
    first = run_step(library, settings(fake_model, tmp_path, per_template=3))
    assert len(first.kept_templates()) == 4 and first.added == 12
    # the rules the answer is checked on are told before it is given (players of trial 2: a hard template's
    # call count was told only by a refusal, and "20 or more rows" could not be met on a table of 9)
    asked = next(r for r in fake_model.requests if r.stage == "templates" and r.subject == f"{ENV}/read")
    text = asked.body["messages"][-1]["content"]
    assert f"at least {HARD_CALLS} calls" in text and "where the data has that many valid cases" in text
    assert "6 or more" not in text  # the answer schema's difficulty says the same (trial 3 players: it said 6)
    draft = read_env_draft(library)
    splits = {t.template_id: t.split for t in draft.templates}
    assert sorted(splits.values()) == ["test", "train", "train", "train"]
    for template_id, tasks in instances_of(library).items():
        assert {t.split for t in tasks} == {splits[template_id]}  # no template on both sides
    used = {t.template_id: t.rows_used for t in draft.templates}
    assert used["copies_on_shelf"] == 4  # rows 2-4 (row 1 is task_01)

    calls = len(fake_model.requests)
    more = CliRunner().invoke(app, ["tasks", str(library), "--more", "--per-template", "40"])
    assert more.exit_code == 0, more.output
    assert len(fake_model.requests) == calls  # no model
    after = instances_of(library)
    assert len(after["copies_on_shelf"]) == 4  # rows 5 and 6 too, the mystery one dropped again
    assert {t.split for tasks in after.values() for t in tasks if t.template_id == "copies_owned"} == \
        {splits["copies_owned"]}
    assert "+" in more.output and "task(s) from" in more.output
    again = CliRunner().invoke(app, ["tasks", str(library), "--more"])
    assert again.exit_code == 0 and "+0 task(s)" in again.output and "with no rows left" in again.output
    assert check_env(library).verified


def test_tasks_needs_a_verified_env_and_more_needs_templates(library: Path, tmp_path: Path):
    runner = CliRunner()
    none = runner.invoke(app, ["tasks", str(library), "--more"])
    assert none.exit_code == 1 and "has no task_templates.jsonl" in none.output
    env = json.loads((library / "env.json").read_text())
    (library / "env.json").write_text(json.dumps({**env, "status": "built"}))
    built = runner.invoke(app, ["tasks", str(library), "--more"])
    assert built.exit_code == 1 and "tasks are added to verified envs only" in built.output


def test_the_run_step_is_recorded_in_the_run_store_and_not_repeated(fake_model, library: Path, tmp_path: Path):
    from synth.pipeline.store import RunStore
    from synth.pipeline.tasks.in_run import STORE_STAGE, run_step

    script_templates(fake_model, {"copies_owned": MOSTLY_WRONG, "check_out_for_member": checkout_template(True),
                                  "reserve_for_member": reserve_template()})
    s = settings(fake_model, tmp_path)
    store = RunStore.open(tmp_path / "out", "run-x")
    try:
        first = asyncio.run(run_step(library, Gateway(s), s, store=store))
        assert first is not None and first.added > 0
        assert store.get(STORE_STAGE, ENV)["output"]["added"] == first.added
        calls = len(fake_model.requests)
        assert asyncio.run(run_step(library, Gateway(s), s, store=store)) is None  # a rerun of the run skips it
        assert len(fake_model.requests) == calls
    finally:
        store.close()


def test_a_run_resumed_after_its_env_was_recorded_verified_still_does_the_tasks_step(fake_model, tmp_path: Path):
    """A real-model trial was killed while the tasks step of four verified envs waited on the model; the
    env items were already done, so the next run reported them verified and never asked for templates."""
    import shutil

    from synth.artifacts import Scenario
    from synth.pipeline.runner import ENV_STAGE, build_and_verify
    from synth.pipeline.store import RunStore
    from synth.pipeline.tasks.in_run import STORE_STAGE

    out = tmp_path / "out"
    env = out / "envs" / ENV
    shutil.copytree(make_verified_library(tmp_path / "lib"), env)
    script_templates(fake_model, {"copies_owned": MOSTLY_WRONG, "check_out_for_member": checkout_template(True),
                                  "reserve_for_member": reserve_template()})
    s = settings(fake_model, tmp_path)
    store = RunStore.open(out, "run-x")
    try:
        store.start(ENV_STAGE, ENV)
        store.finish(ENV_STAGE, ENV, {"env_id": ENV, "status": "verified", "stage": "verify", "path": str(env),
                                      "reason": None, "lost": []})
        store.start(STORE_STAGE, ENV)  # the kill came here
        from synth.pipeline.executor import LocalExecutor
        gateway = Gateway(s)
        local = LocalExecutor(s, gateway=gateway, out=out, store=store, pool=None)  # what `synth run` passes
        outcome = asyncio.run(build_and_verify(Scenario(name="City Library", description="-", category="library"),
                                               gateway, s, out, store=store, executor=local))
        assert outcome.status == "verified" and outcome.resumed
        assert store.is_done(STORE_STAGE, ENV) and store.get(STORE_STAGE, ENV)["output"]["added"] > 0
        assert any(r.stage == "templates" for r in fake_model.requests)
    finally:
        store.close()
