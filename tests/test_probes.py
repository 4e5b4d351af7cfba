"""The probes gate, one probe kind at a time: on the hand-made library env, a verifier that is
vulnerable to exactly that probe (and to no other) fails the gate with the probe named; the
fixed verifier passes."""

from __future__ import annotations

from pathlib import Path

import pytest
from envkit import VERIFIER_BODIES
from verifykit import make_verified_library, set_verifier_body

import synth_validators
from synth.artifacts import Task, ToolCall
from synth.folder.format import read_env_draft, write_env
from synth_validators import probes

# A read task whose answer names records: the one the over-inclusive probe needs.
FANTASY = Task(task_id="task_05", kind="read", difficulty="easy",
               instruction="Which fantasy books are in the catalogue?",
               expected_answer="A Wizard of Earthsea and The Name of the Wind.",
               gold=[ToolCall(tool="search_books", arguments={"query": "of", "genre": "fantasy"})])
FANTASY_FIXED = '''\
titles = [r["title"] for r in query_rows(initial_db, "SELECT title FROM books ORDER BY title")]
right = [r["title"] for r in query_rows(initial_db, "SELECT title FROM books WHERE genre = 'fantasy'")]
return rubric([
    check("names the fantasy books and no other", states(answer, right, [t for t in titles if t not in right]), 2),
    check("database unchanged", unchanged(initial_db, final_db)),
])
'''
# task_01 (read): "How many copies of The Left Hand of Darkness can I borrow right now?" (2)
UNCHANGED = 'check("database unchanged", unchanged(initial_db, final_db))'
VULNERABLE = {
    "empty": ("task_01", "if not answer:\n    return [check(\"nothing to check\", True)]\n" + VERIFIER_BODIES["task_01"]),
    "shotgun": ("task_01", f'''\
said = mentions(answer, 2) and not answer_facts(answer, [2])["hedged"]
return rubric([check("says 2", said, 2), {UNCHANGED}])
'''),
    "hedged": ("task_01", f'''\
f = answer_facts(answer, [2], [0, 3])
return rubric([check("says 2 and not 0 or 3", not f["missing"] and not f["wrong"], 2), {UNCHANGED}])
'''),
    "over-inclusive": ("task_05", f'''\
right = [r["title"] for r in query_rows(initial_db, "SELECT title FROM books WHERE genre = 'fantasy'")]
f = answer_facts(answer, right, list(range(51)))
return rubric([check("names the fantasy books, no count", not f["missing"] and not f["wrong"] and not f["hedged"],
                     2), {UNCHANGED}])
'''),
    # task_02: Maya checks out Dune (member 2, book 3)
    "refusal": ("task_02", VERIFIER_BODIES["task_02"].replace(
        '    check("answer_reports_the_loan", reports(answer, ["Dune"])),\n', "")),
    "wrong record": ("task_02", VERIFIER_BODIES["task_02"].replace(
        'loan["member_id"] == 2 and loan["book_id"] == 3', 'loan["book_id"] == 3')),
    # task_03: Tom returns both of his loans
    "partial": ("task_03", VERIFIER_BODIES["task_03"].replace(
        'returned = bool(toms) and all(', 'returned = bool(toms) and any(').replace(
        'check("copies_back_on_shelf", copies == expected)',
        'check("copies_back_on_shelf", all(copies[b] >= expected[b] - 1 for b in expected))').replace(
        'reports(answer, titles)', 'reports(answer, [])')),
    # task_04: Ana reserves The Hound of the Baskervilles
    "collateral": ("task_04", '''\
held = query_rows(final_db, "SELECT 1 FROM reservations WHERE member_id = 1 AND book_id = 4 AND status = 'active'")
return rubric([
    check("ana_has_the_reservation", bool(held), 2.0),
    check("no_new_loans", unchanged(initial_db, final_db, ["loans"])),
    check("answer_does_not_deny_it", not refuses(answer) and not answer_facts(answer, [])["hedged"]),
])
'''),
}
FIXED = {"task_01": VERIFIER_BODIES["task_01"], "task_02": VERIFIER_BODIES["task_02"],
         "task_03": VERIFIER_BODIES["task_03"], "task_04": VERIFIER_BODIES["task_04"], "task_05": FANTASY_FIXED}


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    env = make_verified_library(tmp_path_factory.mktemp("probes"))
    draft = read_env_draft(env)
    draft.tasks.append(FANTASY)
    draft.verifier_bodies["task_05"] = FANTASY_FIXED
    return write_env(draft, env)


def _probe_gate(env: Path):
    return next(r for r in synth_validators.run_all(env) if r.name == "probes")


def test_the_fixed_verifiers_pass_every_probe(library: Path) -> None:
    gate = _probe_gate(library)
    assert gate.passed, gate.evidence
    kinds = {r["probe"].split(" (")[0] for records in gate.details["probes"].values() for r in records}
    assert kinds == set(VULNERABLE)  # every kind was built and run on this env
    assert all(r["reward"] < 0.5 and not r["passed"] for records in gate.details["probes"].values() for r in records)


@pytest.mark.parametrize("kind", list(VULNERABLE))
def test_a_verifier_open_to_one_probe_fails_the_gate_naming_it(library: Path, tmp_path: Path, kind: str) -> None:
    import shutil

    env = Path(shutil.copytree(library, tmp_path / "city_library"))
    task_id, body = VULNERABLE[kind]
    set_verifier_body(env, task_id, body)
    gate = _probe_gate(env)
    assert not gate.passed
    earned = [r["probe"] for r in gate.details["probes"][task_id] if r["passed"]]
    assert earned and {p.split(" (")[0] for p in earned} == {kind}, earned  # that probe, and only that one
    assert set(gate.details["tasks"]) == {task_id}
    assert all(f"probe '{p}' earned" in " ".join(gate.evidence) for p in earned)
    assert probes.HINTS[kind] in gate.evidence[0]
    set_verifier_body(env, task_id, FIXED[task_id])
    assert _probe_gate(env).passed


def test_threshold_and_margin_are_settings(library: Path, tmp_path: Path) -> None:
    import shutil

    from synth.config import Settings

    env = Path(shutil.copytree(library, tmp_path / "city_library"))
    strict = Settings(probe_threshold=0.1)
    gate = next(r for r in synth_validators.run_all(env, settings=strict) if r.name == "probes")
    assert not gate.passed and gate.details["threshold"] == 0.1
    assert any("must score below 0.1" in e for e in gate.evidence)
    # Without rubric(), gold plus an unrelated change keeps 3/4 of the reward: at the default threshold
    # that is an exploit; with a higher threshold it is not, unless the margin says it is too close to gold.
    counts = 'sorted({r["available_copies"] for r in query_rows(initial_db, "SELECT available_copies FROM books")} - {2})'
    set_verifier_body(env, "task_01", f'return [check("says 2", states(answer, [2], {counts}), 3), {UNCHANGED}]')
    gate = next(r for r in synth_validators.run_all(env) if r.name == "probes")
    assert [r["probe"] for r in gate.details["probes"]["task_01"] if r["passed"]] == ["collateral"]
    assert next(r for r in gate.details["probes"]["task_01"] if r["probe"] == "collateral")["reward"] == 0.75
    higher = Settings(probe_threshold=0.8)
    assert next(r for r in synth_validators.run_all(env, settings=higher) if r.name == "probes").passed
    closer = Settings(probe_threshold=0.8, probe_margin=0.3)
    assert not next(r for r in synth_validators.run_all(env, settings=closer) if r.name == "probes").passed
    assert probes.earned(0.4, 1.0, 0.5, 0.7) and not probes.earned(0.4, 1.0, 0.5, 0.5)
