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


@pytest.mark.parametrize("answer", [
    "Daniel Okafor's phone number on file is 555-0104. Or maybe: 666-1215.",  # in no table
    "555-0104 or 666-1215", "555-0104, possibly 555-0105.", "Somewhere between 555-0104 and 555-0199.",
    "Dr. Priya Nair. Or maybe: Es. Qsjzb Objs.", "Dr. Priya Nair, possibly Dr. Evof Ozbs.",
    "Sofia owes $4.75 in unpaid fines. Or maybe: $5.86 in unpaid fines.", "between 2 and 9 copies", "2, possibly 7",
])
def test_a_hedge_fails_whatever_the_alternative_is(h, answer):
    right = [v for v in ("555-0104", "Dr. Priya Nair", 4.75, 2) if h.mentions(answer, v)]
    assert right and h.answer_facts(answer, right)["hedged"] and not h.states(answer, right), answer


def test_values_joined_that_are_all_asked_for_are_not_a_hedge(h):
    assert h.states("The desk is open between 9:00 and 17:00.", ["09:00", "17:00"])
    assert h.states("You can pay by card or cash.", ["card", "cash"])
    assert h.states("4.75 in total (between 0.75 and 4.00 per fine).", [4.75])  # neither of those is asked
    assert h.states("Booked June 5 at 9:30. Or, if you prefer, I can move it.", ["2025-06-05 09:30"])
    assert h.states("Booked June 5 at 9:30. Maybe I can also send a reminder.", ["2025-06-05 09:30"])


def test_a_wrong_value_given_with_its_form_counts_only_when_written_so(h):
    money = [{"value": 2.0, "kind": "money"}]
    assert h.states("She has 2 unpaid fines adding up to $4.75.", [4.75], money)  # a count, not an amount
    assert not h.states("She owes $4.75, or rather $2.00.", [4.75], money)
    assert not h.states("4.75; 2.00", [4.75], money) and not h.states("4.75 and 2 dollars", [4.75], money)
    count = [{"value": 1, "kind": "count"}, {"value": 3, "kind": "count"}]
    assert h.states("You can take home one of 2 available copies.", [2], count)  # "one of" is not a count
    assert not h.states("1 2 3 copies", [2], count) and not h.states("2 copies, 3 copies", [2], count)


def test_a_negative_fact_is_stated_by_denying_its_opposite(h):
    for answer in ("275.00, not paid yet.", "No, it hasn't been paid: the total was 275.00.", "275 (unpaid)"):
        assert h.states(answer, [275, "unpaid"], ["paid", "void"]), answer
    assert not h.states("275.00, paid in full.", [275, "unpaid"], ["paid", "void"])
    assert h.states("Dr. Kim is no longer active.", ["inactive"])


def test_a_denial_covers_a_name_held_in_two_columns_but_never_a_list_of_numbers(h):
    answer = "Leo Martin has The Hobbit. (Ravi Shah's lost copy is not counted as an overdue loan.)"
    assert h.states(answer, ["Leo Martin", "The Hobbit"], ["Ravi", "Shah", "Tom"])
    assert not h.states("0 1 2 3 4 5 yes no", [2], [0, 1, 3, 4, 5])  # "no" denies no number before it
    assert [str(n) for n in h.stated_numbers("3.5 (2 on June 3 and 1.5), $4.75, 555-0104 at 9:30")] == \
        ["1.5", "2", "3.5", "4.75"]


def test_others_gives_the_values_that_could_stand_in_for_the_quoted_ones(h):
    conn = sqlite3.connect(":memory:")
    conn.row_factory = sqlite3.Row
    conn.executescript(
        "CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT, author TEXT, copies INTEGER);"
        "INSERT INTO books VALUES (1, 'The Night Circus', 'Erin Morgenstern', 3), (2, 'Dune', 'Frank Herbert', 4),"
        " (3, 'Circe', 'Madeline Miller', 2);"
        "CREATE TABLE fines (id INTEGER PRIMARY KEY, amount REAL, issued_on TEXT);"
        "INSERT INTO fines VALUES (1, 4.75, '2025-05-20'), (2, 1.5, '2025-05-28');")
    expected = "2 copies of The Night Circus can be borrowed now (the library has 3)."
    wrong = h.others(conn, expected, [{"value": "2", "kind": "count"}])
    texts = [w for w in wrong if not isinstance(w, dict)]
    counts = {w["value"] for w in wrong if isinstance(w, dict)}
    assert set(texts) == {"Dune", "Circe"}  # the other titles; no author was quoted, no amount, no date
    assert 2 not in counts and 3 not in counts and {0, 1, 4, 50} <= counts  # the context's 3 is not wrong
    assert h.states("Two copies are on the shelf.", [2], wrong)
    assert h.states("2 copies of The Night Circus (3 in all, one is out).", [2], wrong)
    assert not h.states("2 copies of The Night Circus, Dune and Circe.", [2], wrong)  # every candidate named
    assert not h.states("1 or 2 copies.", [2], wrong)
    assert h.others(conn, "Sofia owes $4.75, issued 2025-05-20.") == [1.5, "2025-05-28"]


def test_a_condition_that_undoes_a_fact_is_a_hedge(h):
    """A red team's hedge with no hedge word: 'X, unless ..., in which case Y' (2026-11-26 trial)."""
    facts = ["TR-2025-039", "TR-2025-041"]
    assert h.states("TR-2025-039 is 5 seats short and TR-2025-041 is 9 seats short.", facts)
    assert not h.states("TR-2025-039 is 5 seats short and TR-2025-041 is 9 seats short, unless the cancelled bus "
                        "22 assignment is reinstated, in which case TR-2025-041 has enough seats.", facts)
    assert not h.states("TR-2025-039 and, depending on the bus, TR-2025-041.", facts)


def test_a_negation_does_not_reach_past_a_verb_to_the_value_the_answer_names(h):
    """A real-model trial: "kits that list neither tree nuts nor peanuts are the Asian Fusion Tasting Kit (...)"
    had the kit counted as denied by the "nor", so a correct answer lost the state reward."""
    answer = ("The active tasting kits that list neither tree nuts nor peanuts are the Asian Fusion Tasting Kit "
              "(TK-ASF-04), the Classic Plated Tasting Kit (TK-CLS-04) and the Vegetarian Garden Tasting Kit.")
    kits = ["Asian Fusion Tasting Kit", "Classic Plated Tasting Kit", "Vegetarian Garden Tasting Kit"]
    found = h.answer_facts(answer, kits + ["TK-ASF-04"], ["Southern Comfort Tasting Kit"])
    assert found["missing"] == [] and found["denied"] == []
    assert h.states(answer, kits, ["Southern Comfort Tasting Kit"])
    # a negation right before a value still denies it
    assert h.answer_facts("The nut-free kit is not the Asian Fusion Tasting Kit.", kits[:1], [])["denied"] == kits[:1]


def test_numbers_written_as_tens_and_units_are_numbers(h):
    """Players of a real-model trial: a correct "twenty-two" lost the state reward for a missing 22."""
    assert h.states("There are twenty-two seats left.", [22], [21, 23])
    assert [str(n) for n in h.stated_numbers("forty one people, twenty boats, nineteen and a half hours")] == \
        ["19.5", "20", "41"]
    assert not h.states("There are twenty-three seats left.", [22], [21, 23])


def test_a_date_without_its_year_or_a_time_without_am_pm_states_the_expected_value_not_a_wrong_one(h):
    """Players of a real-model trial: "June 20" also matched a wrong 2026-06-20, and the answer failed."""
    assert h.states("The trip leaves on June 20.", ["2025-06-20"], ["2026-06-20", "2025-06-21"])
    assert h.states("Pickup is at 9:30.", [{"value": "09:30", "kind": "time"}], [{"value": "21:30", "kind": "time"}])
    assert not h.states("The trip leaves on 2026-06-20.", ["2025-06-20"], ["2026-06-20"])
    assert not h.states("June 20 or June 21.", ["2025-06-20"], ["2025-06-21"])  # still a hedge


def test_twice_and_a_no_show_state_a_count(h):
    """A player of a real-model trial: "those participants no-showed twice" was correct, and the state reward
    missed its 2 ("twice" was no number, and the "no" of "no-showed" read as a denial)."""
    answer = "There were 6 completed sessions covering 3 participants; they no-showed twice in May."
    assert h.states(answer, [6, 3, 2], [1, 4])
    assert h.states("Sam was late thrice.", [3], [2])
    assert h.states("There were 2 no-shows.", [2], [3])
    assert not h.states("They no-showed three times.", [2], [3])
    assert h.answer_facts("There is no show on 2025-05-05.", ["2025-05-05"])["denied"] == ["2025-05-05"]
    assert h.states("Once it is signed, 3 trips can leave.", [3], [1])  # "once" is no count


def test_the_marks_of_a_code_are_part_of_it(h):
    """A player of a real-model trial: "4821*" passed for the gate code "4821#"."""
    assert h.states("The gate code is 4821#.", ["4821#"])
    assert not h.states("The gate code is 4821*.", ["4821#"])
    assert not h.states("The gate code is 4821.", ["4821#"])
    assert h.states("Use #12 at the desk.", ["#12"]) and not h.states("Use 12 at the desk.", ["#12"])
    assert h.states("Invoice INV-1002 (paid)", ["INV-1002"]) and h.states("Smith Jr signed.", ["Smith, Jr."])
    # a model-written fact can be huge: its marks are found in one walk (an end-anchored regex was quadratic)
    assert not h.states("The code is 1.", ["1" + "#" * 50_000 + "a"])
    assert h.states("Use #12 at the desk.", [{"value": "#12", "kind": "id"}])


def test_a_bound_after_a_negation_states_its_value(h):
    """A player of a real-model trial: "doesn't expire until 2026-03-31" lost its date to the "doesn't"."""
    assert h.states("The pass doesn't expire until 2026-03-31; it is active.", ["2026-03-31", "active"],
                    ["2026-04-30", "expired"])
    assert h.states("Payment is not due before June 5.", ["2025-06-05"], ["2025-06-06"])
    assert h.answer_facts("It is not due on June 5.", ["2025-06-05"])["denied"] == ["2025-06-05"]
