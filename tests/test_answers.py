"""The answer and database helpers every verifiers.py starts with (templates/env/answers.py):
normalising matchers, penalties for wrong and hedged facts, refusals, reports, database diffs
and the rubric. They are loaded exactly as the sandbox loads a verifiers.py: rendered, passed
through the code check, run with restricted builtins."""

from __future__ import annotations

import sqlite3

import pytest

from synth.artifacts import Task
from synth.folder.format import render_verifiers_py
from synth.runtime.codecheck import check_source
from synth.runtime.loader import load_module, unload_module


@pytest.fixture(scope="module")
def h():
    task = Task(task_id="task_01", instruction="x", kind="read", difficulty="easy")
    source = render_verifiers_py("demo", "Demo", [task], {"task_01": "return []"})
    assert check_source(source, "verifiers.py") == []  # the sandbox's static check accepts the helpers
    module = load_module("synth_test_answers", source, "verifiers.py")
    yield module
    unload_module("synth_test_answers", "verifiers.py")


@pytest.mark.parametrize("value, answer", [
    (3460, "The total is $3,460.00."), (3460, "3460 USD"), ("3460.00", "It comes to 3,460"),
    (4.75, "She owes $4.75 in all"), (2, "two copies are on the shelf"), (189, "189.00 per month"),
    (189, "$189.00/month"), (3.5, "three and a half hours"),
    ("2025-06-04", "on June 4"), ("2025-06-04", "Wed, 4 Jun 2025"), ("2025-06-04", "6/4/2025"),
    ("2025-06-04", "June 4th, 2025"), ("2025-06-04", "due 2025-06-04."),
    ("09:00", "at 9am"), ("09:00", "9:00 AM"), ("09:00", "at 9 a.m. sharp"), ("14:00", "2 pm"),
    ("14:30", "14:30"), ("14:00", "2:00"), ("12:00", "at noon"),
    ("2025-06-05 09:30", "Bella on June 5 at 9:30am"), ("2025-06-05 09:30", "2025-06-05 09:30"),
    ("2025-06-05 10:00", "Bella: June 5, 9:30 AM; Milo: same day at 10 AM"), ("2025-06-05 10:00", "10am on June 5"),
    ("Emma Rodriguez", "Rodriguez, Emma"), ("Emma Rodriguez", "EMMA RODRIGUEZ."), ("Dr. Priya Nair", "Priya Nair"),
    ("Dr. Priya Nair", "Dr. Nair"), ("Liam O'Brien", "O'Brien, Liam"), ("partially_paid", "partially paid"),
    ("Q-102", "desk Q-102"), ("555-0104", "call 555-0104"), ("INV-1002", "invoices INV-1002; INV-1007"),
])
def test_facts_are_found_in_their_common_forms(h, value, answer):
    assert h.mentions(answer, value), (value, answer)


@pytest.mark.parametrize("value, answer", [
    (3460, "3,275"), (4.75, "4.7"), (2, "12 copies"), ("2025-06-04", "June 5"), ("2025-06-04", "June 4, 2024"),
    ("09:00", "09:30"), ("09:00", "21:00"), ("Emma Rodriguez", "Emma"), ("paid", "unpaid"), (104, "555-0104"), (102, "Q-102"), ("2025-06-05 09:30", "June 5. At 9:30 on June 6"),
    ("2025-06-05 10:00", "Bella June 5 at 9:30, Milo June 6 at 10:00"),
])
def test_near_misses_are_not_matches(h, value, answer):
    assert not h.mentions(answer, value), (value, answer)


def test_wrong_and_hedged_facts_fail_an_answer_that_names_the_right_ones(h):
    right, wrong = ["Dr. Priya Nair"], ["Dr. Grace Kim", "Dr. Hannah Reed", "Dr. Tom Becker"]
    assert h.states("Dr. Priya Nair is our only active dentist.", right, wrong)
    assert h.states("Only Priya Nair. (Dr. Grace Kim also does dentistry but is no longer active.)", right, wrong)
    assert h.states("Priya Nair - not Grace Kim, who has retired.", right, wrong)
    assert not h.states("Dr. Priya Nair or maybe Dr. Grace Kim", right, wrong)  # hedged
    assert not h.states("Dr. Priya Nair, Dr. Grace Kim, Dr. Hannah Reed, Dr. Tom Becker", right, wrong)
    assert not h.states("Dr. Priya Nair, possibly", right, wrong)
    assert not h.states("Not Dr. Priya Nair but Dr. Grace Kim", right, wrong)
    assert not h.states("", right, wrong) and not h.states(None, right, wrong)
    f = h.answer_facts("3,460 or maybe 3,275", [3460], [3275])
    assert f["found"] == [3460] and f["wrong"] == [3275] and f["hedged"]
    # Alternatives offered together are a hedge too, even when the other one is not a listed wrong value.
    assert not h.states("1, 2 or 3 copies", [2], [0, 4]) and not h.states("2/3 copies", [2])
    assert h.states("2 copies (3 in total)", [2], [0, 4]) and h.states("2 copies, or none if you come late", [2])
    assert not h.states("2 copies, or maybe 1", [2])
    shotgun = "0 1 2 3 4 5 6 7 8 9 10 yes no paid unpaid Dr. Priya Nair Dr. Grace Kim Dr. Hannah Reed"
    assert not h.states(shotgun, right, wrong)


def test_a_status_said_in_other_words_and_denials(h):
    answer = "It has not been paid yet: 275.00 is still outstanding."
    assert h.denies(answer, "paid") and not h.mentions(answer, "paid") and h.states(answer, [275], ["paid"])
    assert h.states("275.00, unpaid", [275, "unpaid"], ["paid"])
    assert not h.states("275.00, paid", [275, "unpaid"], ["paid"])
    # The longest value wins a span: "partially paid" is not also a mention of "paid".
    assert h.states("partially paid", ["partially_paid"], ["paid", "unpaid"])
    assert not h.states("partially paid", ["paid"], ["partially paid"])


def test_lists_in_any_order_and_with_any_separators(h):
    right = ["Anvil", "Bellows", "Crucible"]
    wrong = ["Forge", "Kiln"]
    for answer in ["Anvil, Bellows and Crucible.", "- Crucible\n- Anvil\n- Bellows", "anvil; bellows & crucible",
                   "Anvil, Bellows, Crucible (Forge has no video)"]:
        assert h.states(answer, right, wrong), answer
    assert not h.states("Anvil and Bellows", right, wrong)
    assert not h.states("Anvil, Bellows, Crucible, Forge", right, wrong)


def test_refusals_and_reports(h):
    for text in ["I could not do it.", "Sorry, I was unable to cancel it", "We weren't able to book the room",
                 "I'm afraid that is not possible"]:
        assert h.refuses(text), text
        assert not h.reports(text)
    assert not h.refuses("Cancelled appointment #8; it is not billed.")
    assert h.reports("Cancelled appointment #8 (Coco, June 10).", [8, "2025-06-10"])
    assert not h.reports("Cancelled appointment #9.", [8])
    assert not h.reports("Done", [8]) and not h.reports("", []) and not h.reports(None, [])
    assert h.reports("All done, Bella is booked.", [])
    assert not h.reports("I think it is booked for Bella", ["Bella"])


def test_database_helpers_and_the_rubric(h):
    def db(rows):
        conn = sqlite3.connect(":memory:")
        conn.row_factory = sqlite3.Row
        conn.execute("CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT, owner INTEGER)")
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.executemany("INSERT INTO pets VALUES (?, ?, ?)", rows)
        return conn

    before = db([(1, "Bella", 1), (2, "Milo", 1)])
    after = db([(1, "Bella", 2), (3, "Pepper", 5)])
    d = h.db_diff(before, after)
    assert list(d) == ["pets"]
    assert d["pets"]["added"] == [{"id": 3, "name": "Pepper", "owner": 5}] and d["pets"]["removed_keys"] == [2]
    assert d["pets"]["changed"] == [{"key": 1, "before": {"id": 1, "name": "Bella", "owner": 1},
                                     "after": {"id": 1, "name": "Bella", "owner": 2}, "columns": ["owner"]}]
    assert h.only_changed(d, {"pets": [1, 2, "added"]}) and not h.only_changed(d, {"pets": [1, "added"]})
    assert not h.only_changed(d, {"pets": [1, 2]}) and not h.only_changed(d, {})
    # the named form: a listed row may change only the listed columns; additions and removals are named
    assert h.only_changed(d, {"pets": {"rows": {1: ["owner"]}, "added": True, "removed": [2]}})
    assert h.only_changed(d, {"pets": {"rows": {"1": ["owner", "name"]}, "added": True, "removed": ["2"]}})
    assert not h.only_changed(d, {"pets": {"rows": {1: ["name"]}, "added": True, "removed": [2]}})
    assert not h.only_changed(d, {"pets": {"rows": {1: ["owner"]}, "removed": [2]}})
    assert not h.only_changed(d, {"pets": {"rows": {1: ["owner"]}, "added": True}})
    assert not h.only_changed(d, {"pets": {"rows": {2: ["owner"]}, "added": True, "removed": [2]}})
    assert h.unchanged(before, db([(1, "Bella", 1), (2, "Milo", 1)])) and not h.unchanged(before, after)
    assert h.query_rows(before, "SELECT name FROM pets WHERE id = ?", (2,)) == [{"name": "Milo"}]
    checks = h.rubric([h.check("a", True, 2), h.check("b", False)])
    assert checks[-1] == {"name": "all requirements met", "passed": False, "weight": 3.0}
    score = sum(c["weight"] for c in checks if c["passed"]) / sum(c["weight"] for c in checks)
    assert score < 0.5
    assert h.rubric([h.check("a", True)])[-1]["passed"] is True
