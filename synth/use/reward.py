"""The state-equivalence reward (tau2-bench style), computed beside the verifier's rubric.

The agent's final database is compared with the database the task's gold actions produce, on
every table, ignoring the env's declared volatile columns (generated ids, timestamps): rows are
compared as multisets with those columns masked, so the same rows created in another order or
with other generated ids still match. The reward is binary: 1.0 when every check passes.

Besides the tables: a read task's answer must state the facts of the expected answer (the
database texts it quotes and its numbers, matched with the verifiers' own normalising helpers)
and no other value of their kind; a write task's answer must not say the work failed.

`Episode.evaluate(answer, reward=...)` reports both rewards (Reward.rubric, Reward.state,
Reward.state_checks) and sets Reward.reward to the kind asked for: "rubric" (the verifier's
weighted checks), "state", or "both" (the rubric's score when the state reward passes, else 0).
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections import Counter
from functools import lru_cache
from typing import Any

from synth.artifacts import Check, Reward, Task
from synth.errors import SynthError
from synth.folder.database import open_bytes, table_columns, user_tables
from synth.use.datafacts import DataIndex, answer_facts, decimal_of, number_text, word_in
from synth.use.replay import VOLATILE, answer_text, canonical, quote_name, run_actions

REWARD_KINDS = ("rubric", "state", "both")
SMALL_NUMBERS = 50  # a read task's answer may not assert other numbers in 0..this (a shotgun of counts)
_gold_finals: "weakref.WeakKeyDictionary[Any, dict[str, bytes | str]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _rows(conn: sqlite3.Connection, table: str, volatile: set[str]) -> Counter:
    """The table's rows as a multiset, volatile columns masked (NULL or VOLATILE)."""
    select = ", ".join(
        f"CASE WHEN {quote_name(c)} IS NULL THEN NULL ELSE '{VOLATILE}' END" if f"{table}.{c}" in volatile
        else quote_name(c) for c in table_columns(conn, table))
    return Counter(canonical(list(r)) for r in conn.execute(f"SELECT {select} FROM {quote_name(table)}"))


def compare_states(gold_final: bytes, agent_final: bytes, volatile: list[str]) -> list[Check]:
    """One check per table that differs from the gold final state, or one check that all match."""
    vol = set(volatile)
    gold, agent = open_bytes(gold_final, readonly=True), open_bytes(agent_final, readonly=True)
    try:
        gold_tables, agent_tables = set(user_tables(gold)), set(user_tables(agent))
        differing = [t for t in sorted(gold_tables | agent_tables)
                     if t not in gold_tables or t not in agent_tables or _rows(gold, t, vol) != _rows(agent, t, vol)]
    finally:
        gold.close()
        agent.close()
    if not differing:
        return [Check(name="every table matches the gold final state", passed=True)]
    return [Check(name=f"table {t} matches the gold final state", passed=False) for t in differing]


@lru_cache(maxsize=1)
def helpers() -> Any:
    """The verifiers' answer helpers (templates/env/answers.py), loaded here as the sandbox loads them."""
    from synth.folder.format import render_verifiers_py
    from synth.runtime.loader import load_module

    source = render_verifiers_py("reward", "reward", [Task(task_id="t", instruction="-", kind="read",
                                                           difficulty="easy")], {"t": "return []"})
    return load_module("synth_reward_helpers", source, "synth-reward-helpers.py")


def _index(env: Any) -> DataIndex:
    with _lock:
        cache = _gold_finals.setdefault(env, {})
        index = cache.get("index")
    if index is None:
        index = DataIndex.of(env.initial_db)
        with _lock:
            cache["index"] = index
    return index  # type: ignore[return-value]


def expected_facts(env: Any, task: Task) -> tuple[list[str], list[Any]]:
    """The facts a read task's answer must state and the wrong values of their kind it may not."""
    expected = answer_text(task.expected_answer) or ""
    index = _index(env)
    right, wrong = [], []
    for fact, where in answer_facts(expected, task.instruction, index):
        right.append(fact)
        for column in where:
            wrong += [v for v in index.columns[column] if not word_in(number_text(v), expected)]
        number = decimal_of(fact)
        if number is not None:
            wrong += [n for n in range(SMALL_NUMBERS + 1) if n != number and not word_in(str(n), expected)]
    if not right and expected.strip():
        right.append(expected.strip())
    return right, wrong


def answer_checks(env: Any, task: Task, answer: Any) -> list[Check]:
    h = helpers()
    text = answer_text(answer)
    if task.kind == "read":
        right, wrong = expected_facts(env, task)
        if not right:
            return []
        return [Check(name="the answer states the expected facts and no wrong value of their kind",
                      passed=bool(h.states(text, right, wrong)))]
    return [Check(name="the answer does not say the work failed", passed=not h.refuses(text))]


def gold_final(env: Any, task: Task) -> bytes | str:
    """The database the task's gold actions produce (cached per loaded env), or why there is none."""
    with _lock:
        cache = _gold_finals.setdefault(env, {})
        known = cache.get(task.task_id)
    if known is not None:
        return known
    replay = run_actions(env, task, task.gold, evaluate=False, snapshot=True)
    result: bytes | str = "the gold solution does not replay: " + "; ".join(replay.errors) \
        if replay.errors or replay.final_db is None else replay.final_db
    with _lock:
        cache[task.task_id] = result
    return result


def volatile_columns(env: Any) -> list[str]:
    """The env's declared volatile columns (env.json `volatile_columns`)."""
    from synth.folder.files import read_env_json

    try:
        data = read_env_json(env.path, "env.json")
    except SynthError:
        return []
    columns = data.get("volatile_columns") if isinstance(data, dict) else None
    return [str(c) for c in columns] if isinstance(columns, list) else []


def state_match_reward(env: Any, task: Task | str, agent_final: bytes, answer: Any = None) -> Reward:
    """The state-equivalence reward of a final database (and answer) for one task of a loaded env."""
    task = env.tasks[task] if isinstance(task, str) else task
    gold = gold_final(env, task)
    if isinstance(gold, str):
        return Reward(reward=0.0, passed=False, error=gold)
    checks = compare_states(gold, agent_final, volatile_columns(env)) + answer_checks(env, task, answer)
    passed = all(c.passed for c in checks)
    return Reward(reward=1.0 if passed else 0.0, passed=passed, checks=checks)


def episode_state_reward(episode: Any, answer: Any = None, final: bytes | None = None) -> Reward:
    """state_match_reward for a live episode of a task (its current database, or `final` when the
    caller took the snapshot already, is the final one)."""
    if episode.task is None:
        return Reward(reward=0.0, passed=False, error="the episode has no task")
    if final is None:
        try:
            final = episode.snapshot()
        except SynthError as exc:
            return Reward(reward=0.0, passed=False, error=str(exc))
    return state_match_reward(episode.env, episode.task, final, answer)


def with_state(episode: Any, rubric: Reward, answer: Any, kind: str = "rubric", *,
               final: bytes | None = None) -> Reward:
    """`rubric` (the verifier's reward) with the state reward beside it, scored as `kind` asks."""
    if kind not in REWARD_KINDS:
        raise ValueError(f"unknown reward kind {kind!r}; use one of {', '.join(REWARD_KINDS)}")
    state = episode_state_reward(episode, answer, final)
    out = rubric.model_copy(update={"kind": kind, "rubric": rubric.reward, "state": state.reward,
                                    "state_checks": state.checks, "state_error": state.error})
    if kind == "state":
        out.reward, out.passed = state.reward, state.passed
    elif kind == "both":
        out.reward = rubric.reward if state.passed else 0.0
        out.passed = rubric.passed and state.passed
    return out
