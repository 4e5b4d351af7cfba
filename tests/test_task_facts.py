"""What decides a task's state reward (synth/use/taskfacts.py): the gold stage asks for a read task's
facts and a write task's free columns, checks them and feeds problems back through its repair turns;
the paraphrase agent is held to a concise reply; folders made before them fall back to computed rules."""

from __future__ import annotations

import asyncio

from envkit import library_draft
from verifykit import make_verified_library

from synth.artifacts import Fact, GoldAnswer, ParaphraseAnswer, Task, ToolCall, ToolSpec
from synth.config import Settings
from synth.folder.database import build_database
from synth.folder.format import read_env_draft
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.stages.check.paraphrase import ParaphraseAgent
from synth.pipeline.stages.check.gold import answer_problems, apply_answer, generate_gold
from synth.use.datafacts import DataIndex
from synth.use.replay import state_diff
from synth.use.reward import helpers
from synth.use.taskfacts import default_free_columns, fact_problems

EXPECTED = "2 copies can be borrowed right now (the library has 3)."


def test_a_read_tasks_facts_are_checked_against_their_kind_and_the_expected_answer():
    h = helpers()
    assert fact_problems([Fact(value="2", kind="count")], EXPECTED, h) == []
    assert fact_problems([], "None are overdue.", h) == []  # an answer that states no value
    assert "list in facts" in fact_problems(None, EXPECTED, h)[0]
    assert "a count is written as a whole number" in fact_problems([Fact(value="two", kind="count")], EXPECTED, h)[0]
    assert "does not state it" in fact_problems([Fact(value="4", kind="count")], EXPECTED, h)[0]
    assert "a date is written as YYYY-MM-DD" in fact_problems([Fact(value="June 5", kind="date")], "June 5", h)[0]
    assert "must not be a bare number" in fact_problems([Fact(value="2", kind="name")], EXPECTED, h)[0]
    assert "listed twice" in fact_problems([Fact(value="2", kind="count")] * 2, EXPECTED, h)[-1]
    # Forms the data uses pass in the answer's own words.
    assert fact_problems([Fact(value="4.75", kind="money"), Fact(value="2025-06-05 09:30", kind="datetime"),
                          Fact(value="555-0104", kind="id"), Fact(value="Dr. Priya Nair", kind="name")],
                         "Call 555-0104: Dr. Nair sees Bella on June 5 at 9:30 AM; $4.75 is due.", h) == []


def test_the_gold_stage_asks_for_facts_and_free_columns_and_applies_them(tmp_path):
    draft = read_env_draft(make_verified_library(tmp_path))
    read = next(t for t in draft.tasks if t.task_id == "task_01")
    write = next(t for t in draft.tasks if t.task_id == "task_04")
    body = 'return rubric([check("two", states(answer, [2], [1, 3]))])'
    gold = [{"tool": c.tool, "arguments": c.arguments} for c in read.gold]
    bare = GoldAnswer(actions=gold, expected_answer=EXPECTED, verifier_body=body)
    assert any("list in facts" in p for p in answer_problems(bare, read, draft))
    given = bare.model_copy(update={"facts": [Fact(value="2", kind="count")]})
    assert answer_problems(given, read, draft) == []
    assert apply_answer(read, given).facts == [Fact(value="2", kind="count")]
    report = 'return rubric([check("said", reports(answer, ["The Hound of the Baskervilles"]))])'
    held = GoldAnswer(actions=[{"tool": c.tool, "arguments": c.arguments} for c in write.gold],
                      expected_answer="Ana is on the list.", verifier_body=report,
                      free_columns=["reservations.note"], facts=[Fact(value="2", kind="count")])
    assert answer_problems(held, write, draft) == ["free_columns: 'reservations.note' is not a 'table.column' of "
                                                   "the schema"]
    fixed = apply_answer(write, held.model_copy(update={"free_columns": ["reservations.reserved_on"]}))
    assert fixed.free_columns == ["reservations.reserved_on"] and fixed.facts is None  # facts are for read tasks


def test_a_missing_fact_goes_back_to_the_model_through_a_repair_turn(fake_model, tmp_path):
    draft = library_draft()
    task = next(t for t in draft.tasks if t.task_id == "task_01")
    body = ('counts = sorted({r["available_copies"] for r in query_rows(initial_db, "SELECT available_copies FROM '
            'books")} - {2})\nreturn rubric([check("two", states(answer, [2], counts), 2), '
            'check("unchanged", unchanged(initial_db, final_db))])')
    answer = {"actions": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold],
              "expected_answer": "2 copies are available.", "verifier_body": body}
    fake_model.script.add("gold", "city_library/task_01", Reply(json=answer),
                          Reply(json={**answer, "facts": [{"value": "2", "kind": "count"}]}))
    settings = Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                        retry_base_delay=0.01)
    updated, report = asyncio.run(generate_gold(draft, Gateway(settings), settings, task_ids=["task_01"]))
    assert report.passed, report
    assert next(t for t in updated.tasks if t.task_id == "task_01").facts == [Fact(value="2", kind="count")]
    asked = [r for r in fake_model.requests if r.stage == "gold" and r.status == 200]
    assert len(asked) == 2 and "list in facts" in asked[1].body["messages"][-1]["content"]


def test_the_paraphrase_agent_is_held_to_a_concise_reply():
    task = Task(task_id="task_01", instruction="How many?", kind="read", difficulty="easy",
                expected_answer=EXPECTED, facts=[Fact(value="2", kind="count")])
    wordy = [f"There are 2 copies available right now, and the library has 3 in all ({n})." for n in range(10)]
    answer = ParaphraseAnswer.model_validate({"tasks": [{"task_id": "task_01", "paraphrases": wordy}]})
    assert ParaphraseAgent.problems(answer, ["task_01"], [task]) == [
        "task_01: include a concise reply that gives only the facts (2) in a few words, leaving out the context"]
    answer.tasks[0].paraphrases[0] = "Two copies."
    assert ParaphraseAgent.problems(answer, ["task_01"], [task]) == []
    old = task.model_copy(update={"facts": None})  # a task made before facts: no such demand
    answer.tasks[0].paraphrases[0] = wordy[0]
    assert ParaphraseAgent.problems(answer, ["task_01"], [old]) == []


SCHEMA = "CREATE TABLE waivers (id INTEGER PRIMARY KEY, fine_id INTEGER NOT NULL, reason TEXT, status TEXT);"
WAIVE = ToolSpec(name="waive_fine", description="Waive a fine.", read_only=False, parameters={
    "type": "object", "properties": {"fine_id": {"type": "integer"}, "reason": {"type": "string"},
                                     "status": {"type": "string", "enum": ["waived", "void"]}},
    "required": ["fine_id", "reason"]})


def test_without_free_columns_a_text_argument_the_gold_made_up_is_free():
    initial = build_database(SCHEMA, "INSERT INTO waivers VALUES (1, 7, 'lost card', 'waived');")
    index = DataIndex.of(initial)

    def free(instruction: str, reason: str) -> list[str]:
        gold = build_database(SCHEMA, "INSERT INTO waivers VALUES (1, 7, 'lost card', 'waived'), "
                                      f"(2, 8, '{reason}', 'waived');")
        task = Task(task_id="t", instruction=instruction, kind="write", difficulty="easy", gold=[ToolCall(
            tool="waive_fine", arguments={"fine_id": 8, "reason": reason, "status": "waived"})])
        return default_free_columns(task, [WAIVE], index, state_diff(initial, gold), helpers())

    assert free("Please waive fine 8.", "member asked") == ["waivers.reason"]  # not given: any reason will do
    assert free("Waive fine 8, the member asked for it.", "member asked") == []  # the user gave it: fixed
    assert free("Please waive fine 8.", "lost card") == []  # a value the column already holds: fixed
    assert free("Please waive fine 8.", "2025-06-02") == []  # a date is never free text
    # The status came from an enum argument and is a value the data holds: never free.
