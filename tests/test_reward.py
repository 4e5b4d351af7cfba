"""The state-equivalence reward (the gold replay's final database vs the agent's, every table,
volatile columns masked; a read task's answer states the expected facts and nothing else of their
kind), reported by evaluate() beside the rubric and selectable as rubric | state | both."""

from __future__ import annotations

import json

import pytest
from envkit import GOLD_ANSWERS, make_library_env

from synth.artifacts import Fact
from synth.folder.database import build_database
from synth.runtime import Env
from synth.use.replay import VOLATILE, state_diff
from synth.use.reward import compare_states, expected_facts, state_match_reward, task_facts


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    loaded = Env.load(make_library_env(tmp_path_factory.mktemp("lib")))
    yield loaded
    loaded.close()


def _play(env: Env, task_id: str, calls: list[tuple[str, dict]]) -> bytes:
    with env.episode(task_id) as episode:
        for tool, args in calls:
            assert episode.call(tool, args)["ok"], (tool, args)
        return episode.snapshot()


@pytest.mark.parametrize("task_id", ["task_01", "task_02", "task_03", "task_04"])
def test_gold_earns_both_rewards_and_doing_nothing_neither(env: Env, task_id: str) -> None:
    task = env.tasks[task_id]
    with env.episode(task_id) as episode:
        for call in task.gold:
            episode.call(call.tool, call.arguments)
        both = episode.evaluate(GOLD_ANSWERS[task_id], reward="both")
    assert (both.kind, both.reward, both.rubric, both.state, both.passed) == ("both", 1.0, 1.0, 1.0, True)
    with env.episode(task_id) as idle:
        for kind in ("rubric", "state", "both"):
            nothing = idle.evaluate("I don't know", reward=kind)
            assert nothing.reward < 0.5 and not nothing.passed and nothing.kind == kind
        assert idle.evaluate("I don't know").state == 0.0


def test_every_table_is_compared_and_a_different_record_fails(env: Env) -> None:
    # task_02 is Maya checking out Dune (book 3); this agent lends her Sapiens (book 5) instead.
    reward = state_match_reward(env, "task_02", _play(env, "task_02", [("checkout_book", {"member_id": 2,
                                                                                           "book_id": 5})]),
                                GOLD_ANSWERS["task_02"])
    assert reward.reward == 0.0 and {c.name for c in reward.checks if not c.passed} == {
        "table books matches the gold final state (differs: column available_copies)",
        "table loans matches the gold final state (differs: column book_id)"}
    # The right loan plus a change to an unrelated table is not the gold state either.
    final = _play(env, "task_02", [("checkout_book", {"member_id": 2, "book_id": 3}),
                                   ("reserve_book", {"member_id": 3, "book_id": 6})])
    reward = state_match_reward(env, "task_02", final, GOLD_ANSWERS["task_02"])
    assert reward.reward == 0.0
    assert [c.name for c in reward.checks if not c.passed] == [
        "table reservations matches the gold final state (differs: 1 row(s) only on one side)"]
    # A write task's answer must not say the work failed.
    final = _play(env, "task_02", [("checkout_book", {"member_id": 2, "book_id": 3})])
    assert state_match_reward(env, "task_02", final, "Done, Dune is yours.").reward == 1.0
    assert state_match_reward(env, "task_02", final, "I could not do it.").reward == 0.0


def test_read_task_answers_state_the_facts_and_no_other_value_of_their_kind(env: Env) -> None:
    assert expected_facts(env, env.tasks["task_01"])[0] == ["2"]
    for good in ("There are 2 copies on the shelf.", "two"):
        assert state_match_reward(env, "task_01", env.initial_db, good).passed, good
    for bad in ("There are 3 copies on the shelf.", None, "2 or maybe 1", "0 1 2 3 4 5 6 7 8 9 10"):
        assert not state_match_reward(env, "task_01", env.initial_db, bad).passed, bad


def test_evaluate_can_leave_the_state_reward_out(env: Env) -> None:
    with env.episode("task_01") as episode:
        rubric = episode.evaluate("2 copies", state=False)
    assert rubric.kind == "rubric" and rubric.state is None and rubric.reward == 1.0
    with pytest.raises(ValueError, match="unknown reward kind 'best'"):
        with env.episode("task_01") as episode:
            episode.evaluate("2 copies", reward="best")


SCHEMA = "CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book TEXT, returned_on TEXT, created_at TEXT);"


def _db(rows: str) -> bytes:
    return build_database(SCHEMA, f"INSERT INTO loans VALUES {rows};")


def test_volatile_columns_are_masked_not_dropped() -> None:
    initial = _db("(1, 'Dune', NULL, '2024-01-01')")
    monday = _db("(1, 'Dune', '2025-06-02', '2024-01-01'), (2, 'Emma', NULL, '2025-06-02T10:00')")
    tuesday = _db("(1, 'Dune', '2025-06-03', '2024-01-01'), (2, 'Emma', NULL, '2025-06-03T09:00')")
    volatile = ["loans.returned_on", "loans.created_at"]
    # Which date a loan was returned on, or when a row was created, does not matter...
    assert state_diff(monday, tuesday, volatile) == {}
    assert all(c.passed for c in compare_states(monday, tuesday, volatile))
    # ...but whether it was returned at all does.
    change = state_diff(initial, monday, volatile)["loans"]
    assert change["changed"] == [{"key": {"loan_id": 1}, "columns": ["returned_on"],
                                  "before": {"returned_on": None}, "after": {"returned_on": VOLATILE}}]
    assert change["added"] == [{"loan_id": 2, "book": "Emma", "returned_on": None, "created_at": VOLATILE}]
    not_returned = _db("(1, 'Dune', NULL, '2024-01-01'), (2, 'Emma', NULL, '2025-06-02T10:00')")
    assert not all(c.passed for c in compare_states(monday, not_returned, volatile))
    # Without the declaration, the dates are ordinary values.
    plain = state_diff(monday, tuesday)["loans"]["changed"]
    assert [c["columns"] for c in plain] == [["returned_on"], ["created_at"]]


# ------------------------------------------------------------------- fair to correct work, closed to hedges


def _with_facts(env: Env, task_id: str, *values: tuple[str, str]):
    task = env.tasks[task_id].model_copy(update={"facts": [Fact(value=v, kind=k) for v, k in values]})
    env.tasks[task_id] = task
    return task


def test_a_concise_correct_answer_earns_both_rewards(tmp_path) -> None:
    env_dir = make_library_env(tmp_path)
    with Env.load(env_dir) as env:
        task = env.tasks["task_01"].model_copy(update={
            "expected_answer": "2 copies can be borrowed right now (4 in all; the others are out)."})
        env.tasks["task_01"] = task
        # Without facts, the state reward asks for every number of the expected answer, context too.
        assert not state_match_reward(env, task, env.initial_db, "2 copies.").passed
        task = _with_facts(env, "task_01", ("2", "count"))
        for concise in ("2", "Two copies.", "You can borrow 2 copies right now."):
            with env.episode("task_01") as episode:
                reward = episode.evaluate(concise, reward="both")
            assert (reward.rubric, reward.state, reward.reward) == (1.0, 1.0, 1.0), (concise, reward.state_checks)


def test_a_hedge_fails_both_rewards_whatever_the_alternative(tmp_path) -> None:
    with Env.load(make_library_env(tmp_path)) as env:
        _hedges_fail(env)


def _hedges_fail(env: Env) -> None:
    _with_facts(env, "task_01", ("2", "count"))
    for hedge in ("2 copies are available. Or maybe: 47 copies.", "2 copies, possibly 47.",
                  "Between 2 and 47 copies.", "2 or 47 copies.", "2 copies. Or perhaps none at all, say 0."):
        with env.episode("task_01") as episode:
            reward = episode.evaluate(hedge, reward="both")
        assert reward.rubric < 0.5 and reward.state == 0.0 and reward.reward == 0.0, (hedge, reward)
    # A list of counts is not an answer either, nor a dump of numbers with the right one among them.
    for dump in ("1 2 3 copies", "2 copies; also 11, 12, 13, 14, 15 and 16"):
        assert not state_match_reward(env, "task_01", env.initial_db, dump).passed, dump


def test_an_old_folder_without_the_new_task_fields_still_loads_and_is_scored(tmp_path) -> None:
    env_dir = make_library_env(tmp_path)
    path = env_dir / "tasks.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:  # a tasks.jsonl written before facts and free_columns existed
        del line["facts"], line["free_columns"]
    lines[0]["expected_answer"] = "2 copies can be borrowed right now (4 in all)."
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Env.load(env_dir) as env:
        task = env.tasks["task_01"]
        assert task.facts is None and task.free_columns is None
        # The fallback: the expected answer's facts (2 and 4) ...
        assert [f.value for f in task_facts(env, task)] == ["2", "4"]
        for task_id in ("task_01", "task_02"):
            with env.episode(task_id) as episode:
                for call in env.tasks[task_id].gold:
                    episode.call(call.tool, dict(call.arguments))
                answer = "2 copies can be borrowed, 4 in all." if task_id == "task_01" else GOLD_ANSWERS[task_id]
                reward = episode.evaluate(answer, reward="both")
            assert (reward.rubric, reward.state) == (1.0, 1.0), (task_id, reward)
    # ... less what a recorded correct answer (verifier_tests.jsonl) leaves out.
    case = {"case_id": "task_01.paraphrase.1", "task_id": "task_01", "source": "paraphrase", "use_gold": True,
            "calls": [], "answer": "Two copies.", "expect": "pass"}
    (env_dir / "verifier_tests.jsonl").write_text(json.dumps(case) + "\n")
    with Env.load(env_dir) as env:
        assert [f.value for f in task_facts(env, env.tasks["task_01"])] == ["2"]
        assert state_match_reward(env, "task_01", env.initial_db, "Two copies.").passed


WAIVERS = "CREATE TABLE waivers (id INTEGER PRIMARY KEY, fine_id INTEGER NOT NULL, reason TEXT);"


def test_free_columns_count_as_written_or_not_and_fixed_ones_exactly() -> None:
    def db(rows: str) -> bytes:
        return build_database(WAIVERS, f"INSERT INTO waivers VALUES {rows};")

    initial = db("(1, 7, 'lost card')")
    gold = db("(1, 7, 'lost card'), (2, 8, 'member asked')")
    free = ["waivers.reason"]

    def same(agent: bytes, columns: list[str] = free) -> bool:
        return all(c.passed for c in compare_states(gold, agent, [], initial=initial, free=columns))

    assert same(db("(1, 7, 'lost card'), (2, 8, 'requested at the desk')"))  # another reason, in its own words
    assert not same(db("(1, 7, 'lost card'), (2, 8, 'requested at the desk')"), [])  # unless the task fixed it
    assert not same(db("(1, 7, 'lost card'), (2, 8, NULL)"))  # the reason must be written
    assert not same(db("(1, 7, 'lost card'), (2, 8, '  ')"))
    assert not same(db("(1, 7, 'changed'), (2, 8, 'member asked')"))  # and only where the gold wrote one
    assert not same(db("(1, 7, 'lost card'), (2, 9, 'member asked')"))  # a fixed column is compared exactly
