"""The state-equivalence reward (tau2-bench style), computed beside the verifier's rubric.

The agent's final database is compared with the database the task's gold actions produce, on
every table: the env's declared volatile columns (generated ids, timestamps) are masked, and so are
the columns the task leaves free (synth/use/taskfacts.py: a reason in the agent's own words, a name
the user did not give), which only have to be written where the gold wrote them. Rows are compared
as multisets, so the same rows created in another order still match. The reward is binary: 1.0
when every check passes.

Besides the tables: a read task's answer must state the task's facts (Task.facts, or for folders
made before them the facts derived from the expected answer), matched with the verifiers' own
normalising helpers, assert no other value of their kind, not hedge (whatever the alternative) and
not refuse; a write task's answer must not say the work failed.

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

from synth.artifacts import Check, Fact, Reward, Task, VerifierCase
from synth.errors import InputError, SynthError
from synth.folder.database import open_bytes, table_columns, user_tables
from synth.folder.files import env_file_exists, read_env_text
from synth.use.datafacts import DataIndex
from synth.use.replay import VOLATILE, answer_text, canonical, quote_name, run_actions, state_diff
from synth.use.taskfacts import SMALL_NUMBERS, default_free_columns, derived_facts, wrong_values

REWARD_KINDS = ("rubric", "state", "both")
MAX_EXTRA_NUMBERS = 5  # numbers beyond the expected answer's a correct answer may add (a dump has dozens)
WRITTEN, KEPT = "<written>", "<as before>"  # what a free column's value is compared as
_caches: "weakref.WeakKeyDictionary[Any, dict[Any, Any]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _key_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    info = conn.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()
    return [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0] or ["rowid"]


def _keyed_rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], dict[Any, tuple]]:
    columns, keys = table_columns(conn, table), _key_columns(conn, table)
    select = ", ".join([quote_name(k) if k != "rowid" else "rowid" for k in keys] + [quote_name(c) for c in columns])
    rows = conn.execute(f"SELECT {select} FROM {quote_name(table)}").fetchall()
    return columns, {tuple(r[:len(keys)]): tuple(r[len(keys):]) for r in rows}


def _raw(conn: sqlite3.Connection, table: str) -> list[tuple]:
    return [tuple(r) for r in conn.execute(f"SELECT * FROM {quote_name(table)}")]


def _masked(table: str, columns: list[str], rows: dict[Any, tuple], volatile: set[str], free: set[str],
            before: dict[Any, tuple]) -> dict[Any, tuple]:
    """Rows with volatile columns as NULL / VOLATILE and free columns as NULL / KEPT / WRITTEN."""
    out = {}
    for key, row in rows.items():
        masked = []
        for i, (column, value) in enumerate(zip(columns, row)):
            name = f"{table}.{column}"
            if name in volatile:
                value = None if value is None else VOLATILE
            elif name in free:
                old = before.get(key)
                value = None if value is None or (isinstance(value, str) and not value.strip()) else \
                    KEPT if old is not None and i < len(old) and old[i] == value else WRITTEN
            masked.append(value)
        out[key] = tuple(masked)
    return out


def compare_states(gold_final: bytes, agent_final: bytes, volatile: list[str], *, initial: bytes | None = None,
                   free: list[str] = ()) -> list[Check]:
    """One check per table that differs from the gold final state (naming the columns that differ), or
    one check that all match. `free` columns ("table.column", with the `initial` database) count only
    as written or not, not by their text."""
    if gold_final == agent_final:  # the same bytes: every table matches, nothing to read
        return [Check(name="every table matches the gold final state", passed=True)]
    vol, free_set = set(volatile), set(free)
    gold, agent = open_bytes(gold_final, readonly=True), open_bytes(agent_final, readonly=True)
    start = open_bytes(initial, readonly=True) if initial is not None and free_set else None
    failed = []
    try:
        gold_tables, agent_tables = set(user_tables(gold)), set(user_tables(agent))
        for table in sorted(gold_tables | agent_tables):
            if table not in gold_tables or table not in agent_tables:
                failed.append(Check(name=f"table {table} matches the gold final state", passed=False))
                continue
            if _raw(gold, table) == _raw(agent, table):
                continue  # the same rows in the same order: nothing to mask
            before = _keyed_rows(start, table)[1] if start is not None and table in user_tables(start) else {}
            columns, gold_rows = _keyed_rows(gold, table)
            g = _masked(table, columns, gold_rows, vol, free_set, before)
            a = _masked(table, *_keyed_rows(agent, table), vol, free_set, before)
            if Counter(map(canonical, g.values())) != Counter(map(canonical, a.values())):
                failed.append(Check(name=f"table {table} matches the gold final state{_differences(columns, g, a)}",
                                    passed=False))
    finally:
        for conn in (gold, agent, start):
            if conn is not None:
                conn.close()
    return failed or [Check(name="every table matches the gold final state", passed=True)]


def _differences(columns: list[str], gold: dict[Any, tuple], agent: dict[Any, tuple]) -> str:
    differ = sorted({c for k in gold.keys() & agent.keys() for c, x, y in zip(columns, gold[k], agent[k]) if x != y})
    rows = len(gold.keys() ^ agent.keys())
    said = ([f"column {', '.join(differ)}"] if differ else []) + ([f"{rows} row(s) only on one side"] if rows else [])
    return f" (differs: {'; '.join(said)})" if said else ""


@lru_cache(maxsize=1)
def helpers() -> Any:
    """The verifiers' answer helpers (templates/env/answers.py), loaded here as the sandbox loads them."""
    from synth.folder.format import render_verifiers_py
    from synth.runtime.loader import load_module

    source = render_verifiers_py("reward", "reward", [Task(task_id="t", instruction="-", kind="read",
                                                           difficulty="easy")], {"t": "return []"})
    return load_module("synth_reward_helpers", source, "synth-reward-helpers.py")


def _cached(env: Any, key: Any, make: Any) -> Any:
    """make() once per loaded env and key (computed outside the lock; a race computes it twice)."""
    with _lock:
        cache = _caches.setdefault(env, {})
        if key in cache:
            return cache[key]
    value = make()
    with _lock:
        return _caches[env].setdefault(key, value)


def _index(env: Any) -> DataIndex:
    return _cached(env, "index", lambda: DataIndex.of(env.initial_db))


def _task_key(kind: str, task: Task) -> tuple[str, str, str]:
    return kind, task.task_id, canonical(task.model_dump(mode="json"))


def correct_answers(env: Any, task_id: str) -> list[str]:
    """The answers the env's recorded correct cases (verifier_tests.jsonl, "expect": "pass") give a task."""
    def read() -> dict[str, list[str]]:
        root = getattr(env, "path", None)
        out: dict[str, list[str]] = {}
        try:
            if root is None or not env_file_exists(root, "verifier_tests.jsonl"):
                return out
            lines = read_env_text(root, "verifier_tests.jsonl").splitlines()
        except InputError:
            return out
        for line in lines:
            try:
                case = VerifierCase.model_validate_json(line)
            except ValueError:
                continue  # the reward_cases gate reports a bad line
            if case.expect == "pass" and case.answer:
                out.setdefault(case.task_id, []).append(case.answer)
        return out

    return _cached(env, "correct answers", read).get(task_id, [])


def task_facts(env: Any, task: Task) -> list[Fact]:
    """A read task's facts: Task.facts, or for a folder made before them, derived (taskfacts.py)."""
    if task.facts is not None:
        return list(task.facts)
    return _cached(env, _task_key("facts", task), lambda: derived_facts(
        answer_text(task.expected_answer) or "", task.instruction, _index(env), correct_answers(env, task.task_id),
        helpers()))


def expected_facts(env: Any, task: Task) -> tuple[list[str], list[Any]]:
    """The values a read task's answer must state and the wrong values it may not (taskfacts.wrong_values)."""
    def make() -> tuple[list[str], list[Any]]:
        facts = task_facts(env, task)
        expected = answer_text(task.expected_answer) or ""
        if not facts:  # the answer finds nothing ("none are overdue"): it may not give a count either
            return [], [{"value": n, "kind": "count"} for n in range(1, SMALL_NUMBERS + 1)]
        return [f.value for f in facts], wrong_values(facts, expected, task.instruction, _index(env), helpers())

    return _cached(env, _task_key("expected", task), make)


def extra_numbers(task: Task, right: list[str], text: str | None) -> int:
    """How many numbers the answer states that neither the facts nor the expected answer give."""
    h = helpers()
    known = set(h.stated_numbers(answer_text(task.expected_answer))) | set(h.stated_numbers(" ; ".join(right)))
    return len([n for n in h.stated_numbers(text) if n not in known])


def _answer_faults(env: Any, task: Task, text: str | None, detail: bool) -> dict[str, str]:
    """What keeps a read task's answer from the state reward, by kind (missing, asserts, hedges, refuses,
    numbers, empty). What it leaves out is named only with `detail`."""
    h = helpers()
    right, wrong = expected_facts(env, task)
    found = h.answer_facts(text, right, wrong)
    extra = extra_numbers(task, right, text)
    missing = ", ".join(map(repr, found["missing"])) if detail else f"{len(found['missing'])} of {len(right)} facts"
    asserted = ", ".join(repr(w.get("value") if isinstance(w, dict) else w) for w in found["wrong"][:5])
    faults = {"missing": f"it leaves out {missing}" if found["missing"] else "",
              "asserts": f"it also asserts {asserted}" if found["wrong"] else "",
              "hedges": "it hedges" if found["hedged"] else "", "refuses": "it refuses" if h.refuses(text) else "",
              "numbers": f"it lists {extra} other numbers" if extra > MAX_EXTRA_NUMBERS else "",
              "empty": "it says nothing" if not right and not (text or "").strip() else ""}
    return {k: v for k, v in faults.items() if v}


def answer_checks(env: Any, task: Task, answer: Any, *, detail: bool = False) -> list[Check]:
    """The answer's check. What it leaves out is named only with `detail` (for the gold stage's repair
    feedback): an agent that sees its rewards must not learn the expected values from them."""
    text = answer_text(answer)
    if task.kind != "read":
        return [Check(name="the answer does not say the work failed", passed=not helpers().refuses(text))]
    why = list(_answer_faults(env, task, text, detail).values())
    name = "the answer states the task's facts, no other value of their kind and no hedge"
    return [Check(name=f"{name}: {'; '.join(why)}" if why else name, passed=not why)]


def beyond_contract(env: Any, task: Task, answer: Any) -> str:
    """Why a read task's answer lies outside what any reward of it can pay, or "": it asserts another value
    of a fact's kind ("4 seats free (12-seat session, 8 taken)" when a count is asked) or lists many other
    numbers. Read alone, such an answer is a hedge over the values it names, so the state reward refuses
    it, and no verifier repair can make both rewards pay it (a real-model trial: paraphrases adding context
    figures sent verifiers to repair again and again)."""
    if task.kind != "read":
        return ""
    faults = _answer_faults(env, task, answer_text(answer), False)
    return "; ".join(faults[k] for k in ("asserts", "numbers") if k in faults)


def gold_final(env: Any, task: Task) -> bytes | str:
    """The database the task's gold actions produce (cached per loaded env), or why there is none."""
    def replay() -> bytes | str:
        done = run_actions(env, task, task.gold, evaluate=False, snapshot=True)
        return "the gold solution does not replay: " + "; ".join(done.errors) \
            if done.errors or done.final_db is None else done.final_db

    return _cached(env, ("gold", task.task_id, canonical([c.model_dump(mode="json") for c in task.gold])), replay)


def volatile_columns(env: Any) -> list[str]:
    """The env's declared volatile columns (env.json `volatile_columns`)."""
    from synth.folder.files import read_env_json

    try:
        data = read_env_json(env.path, "env.json")
    except SynthError:
        return []
    columns = data.get("volatile_columns") if isinstance(data, dict) else None
    return [str(c) for c in columns] if isinstance(columns, list) else []


def free_columns(env: Any, task: Task) -> list[str]:
    """A write task's free columns: Task.free_columns, or for a folder made before them, the default rule."""
    if task.kind != "write":
        return []
    if task.free_columns is not None:
        return list(task.free_columns)

    def compute() -> list[str]:
        gold = gold_final(env, task)
        if isinstance(gold, str):
            return []
        diff = state_diff(env.initial_db, gold, volatile_columns(env))
        return default_free_columns(task, list(env.tools), _index(env), diff, helpers())

    return _cached(env, _task_key("free", task), compute)


def table_checks(env: Any, task: Task, gold: bytes, agent_final: bytes, volatile: list[str] | None = None) -> list[Check]:
    """The final database against the gold's, volatile and free columns masked."""
    return compare_states(gold, agent_final, volatile_columns(env) if volatile is None else volatile,
                          initial=env.initial_db, free=free_columns(env, task))


def state_match_reward(env: Any, task: Task | str, agent_final: bytes, answer: Any = None, *,
                       detail: bool = False) -> Reward:
    """The state-equivalence reward of a final database (and answer) for one task of a loaded env
    (`detail`: name the facts an answer leaves out, for the pipeline's own feedback)."""
    task = env.tasks[task] if isinstance(task, str) else task
    gold = gold_final(env, task)
    if isinstance(gold, str):
        return Reward(reward=0.0, passed=False, error=gold)
    checks = table_checks(env, task, gold, agent_final) + answer_checks(env, task, answer, detail=detail)
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
