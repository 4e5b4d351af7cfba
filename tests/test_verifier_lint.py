"""The gold stage refuses verifier bodies that match the answer with a bare substring or regex
test, and write tasks without a report of what was done."""

from __future__ import annotations

import ast

from synth.artifacts import GoldAnswer, Task
from synth.pipeline.stages.check.gold import answer_problems
from synth.pipeline.stages.check.verifier_lint import loose_change_checks, substring_checks
from verifykit import make_verified_library
from synth.folder.format import read_env_draft


def test_bare_substring_tests_on_the_answer_are_found():
    assert substring_checks('text = (answer or "").lower()\nok = "555-0104" in text\nreturn [check("a", ok)]')
    assert substring_checks('return [check("a", str(x).lower() in (answer or "").lower())]')
    assert substring_checks('return [check("a", re.search(r"\\b2\\b", answer or "") is not None)]')
    assert substring_checks('t = answer.strip()\nreturn [check("a", t.find("ok") >= 0)]')
    # The helpers' results and other lists are not the answer's text.
    assert not substring_checks('f = answer_facts(answer, [2])\nreturn [check("a", 2 in f["found"])]')
    assert not substring_checks('names = [r["name"] for r in query_rows(initial_db, "SELECT name FROM t")]\n'
                                'return [check("a", states(answer, names) and "Bob" in names)]')


def test_values_pulled_out_of_the_answer_to_compare_with_the_records_are_not_a_substring_test():
    """A real-model trial: gold verifiers refusing invented dates, amounts and words (the red team's finding)
    pulled them out with re.findall and were refused turn after turn; a search on the answer still is one."""
    invented_dates = ('ans = (answer or "").lower()\n'
                      'seen = [d for d in re.findall(r"\\d{4}-\\d\\d-\\d\\d", ans) if d not in known]\n'
                      'words = re.findall(r"[a-z0-9\'-]+", ans.replace("\\u2019", "\'"))\n'
                      'docks = [x.upper() for x in re.findall(r"\\bdock ([A-Za-z])\\b", answer, re.I)]\n'
                      'return [check("no invented date", not seen and not [w for w in words if w not in vocab])]')
    ast.parse("def v(initial_db, final_db, answer):\n" + "\n".join("    " + line for line in invented_dates.splitlines()))
    assert substring_checks(invented_dates) == []  # it parses (above), so [] is the lint's verdict
    found = substring_checks('named = {n for n in totals if re.search(r"\\b%s\\b" % re.escape(n), answer.upper())}\n'
                             'return [check("a", bool(named))]')
    assert len(found) == 1 and found[0].startswith("line 1:") and "re.findall" in found[0]


def test_gold_answers_need_helpers_and_a_report_for_write_tasks(tmp_path):
    draft = read_env_draft(make_verified_library(tmp_path))
    task = next(t for t in draft.tasks if t.task_id == "task_04")
    gold = [{"tool": c.tool, "arguments": c.arguments} for c in task.gold]
    body = 'return rubric([check("said", "Hound" in (answer or ""))])'
    problems = answer_problems(GoldAnswer(actions=gold, expected_answer=None, verifier_body=body), task, draft)
    assert any("a one-line report of what was done" in p for p in problems)
    assert any("bare substring or regex test on the answer" in p for p in problems)
    fine = 'return rubric([check("said", reports(answer, ["The Hound of the Baskervilles"]))])'
    assert answer_problems(GoldAnswer(actions=gold, expected_answer="Done: Ana is on the list.",
                                      verifier_body=fine), task, draft) == []
    assert isinstance(task, Task)


def test_only_changed_must_name_the_columns_a_row_may_change():
    """A red team passed unrequested edits through only_changed's older list form (any column of an
    allowed row could change); a new verifier must name the columns."""
    loose = 'd = db_diff(initial_db, final_db)\nreturn rubric([check("x", only_changed(d, {"bookings": [12]}))])'
    assert loose_change_checks(loose) and "name the columns" in loose_change_checks(loose)[0]
    strict = ('d = db_diff(initial_db, final_db)\n'
              'return rubric([check("x", only_changed(d, {"bookings": {"rows": {12: ["status"]}}, '
              '"payments": {"added": True}}))])')
    assert loose_change_checks(strict) == []
