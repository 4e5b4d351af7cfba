"""Replaying tool calls on fresh episodes: gold solutions, single test calls, and
the database change they make.

Everything here drives a loaded `Env` (synth.runtime), so the env's code runs in
the sandbox; this process only reads database bytes (data, not code) to diff
states. The gold stage, the check loop and the quality gates share these
helpers, so a gate judges an env exactly the way the loop that repaired it did.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Iterable

from synth.artifacts import Observation, Reward, Rules, Task, ToolCall
from synth.errors import SynthError
from synth.folder.database import open_bytes, user_tables
from synth.folder.rules import rules_after_call
from synth.runtime.schema_check import ArgumentError

MAX_RESULT_CHARS = 2000  # a larger tool result is kept as a preview (cut by items) plus its digest
BUG_KINDS = frozenset({"exception", "timeout", "bad_return", "missing", "violation", "crash", "killed", "internal"})


def answer_text(value: Any) -> str | None:
    """What evaluate() receives for a task's expected answer."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


VOLATILE = "<volatile>"  # what a non-NULL value of a volatile column is compared as


def quote_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _masked_rows(conn: sqlite3.Connection, table: str, volatile: set[str]) -> dict[tuple, dict[str, Any]]:
    """Rows of `table` keyed by primary key, volatile columns masked to NULL / VOLATILE.

    Masking instead of dropping keeps what matters about a volatile column: a loan's
    `returned_on` going from NULL to some date is a change; which date is not. A
    table whose key is itself volatile (random ids) is keyed by rowid."""
    cols = [r[1] for r in conn.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()]
    pk = _key_names(conn, table, volatile)
    select = [f"CASE WHEN {quote_name(c)} IS NULL THEN NULL ELSE '{VOLATILE}' END" if f"{table}.{c}" in volatile
              else quote_name(c) for c in cols]
    if pk == ["rowid"]:
        try:
            rows = conn.execute(f"SELECT rowid, {', '.join(select)} FROM {quote_name(table)}").fetchall()
        except sqlite3.OperationalError:  # WITHOUT ROWID with a volatile key: every column is the key
            rows = [(i, *r) for i, r in enumerate(sorted(
                conn.execute(f"SELECT {', '.join(select)} FROM {quote_name(table)}").fetchall(), key=repr))]
        return {(r[0],): dict(zip(cols, r[1:])) for r in rows}
    out = {}
    for r in conn.execute(f"SELECT {', '.join(select)} FROM {quote_name(table)}").fetchall():
        row = dict(zip(cols, r))
        out[tuple(row[k] for k in pk)] = row
    return out


def _key_names(conn: sqlite3.Connection, table: str, volatile: set[str]) -> list[str]:
    """The primary key columns, or ["rowid"] when there is none or it is volatile."""
    info = conn.execute(f"PRAGMA table_info({quote_name(table)})").fetchall()
    pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
    return ["rowid"] if not pk or any(f"{table}.{k}" in volatile for k in pk) else pk


def state_diff(before: bytes, after: bytes, volatile: Iterable[str] = ()) -> dict[str, Any]:
    """Row changes from `before` to `after` per table, matched by primary key, with volatile
    columns masked (NULL stays NULL, any other value reads VOLATILE), as plain JSON data
    ({table: {"added": [row], "removed": [row], "changed": [{"key", "columns", "before",
    "after"}]}}, changed tables only) so it can be stored in tests.jsonl and compared."""
    if before == after:  # the same bytes: nothing to read (most probes and replays of reads end here)
        return {}
    vol = set(volatile)
    a, b = open_bytes(before, readonly=True), open_bytes(after, readonly=True)
    out: dict[str, Any] = {}
    try:
        tables_a, tables_b = set(user_tables(a)), set(user_tables(b))
        for table in sorted(tables_a | tables_b):
            rows_a = _masked_rows(a, table, vol) if table in tables_a else {}
            rows_b = _masked_rows(b, table, vol) if table in tables_b else {}
            names = _key_names(b if table in tables_b else a, table, vol)
            changed = []
            for key in sorted(rows_a.keys() & rows_b.keys(), key=repr):
                cols = [c for c in rows_b[key] if rows_a[key].get(c) != rows_b[key].get(c)]
                if cols:
                    changed.append({"key": dict(zip(names, key)), "columns": cols,
                                    "before": {c: rows_a[key].get(c) for c in cols},
                                    "after": {c: rows_b[key].get(c) for c in cols}})
            entry = {"added": sorted((rows_b[k] for k in rows_b.keys() - rows_a.keys()), key=canonical),
                     "removed": sorted((rows_a[k] for k in rows_a.keys() - rows_b.keys()), key=canonical),
                     "changed": changed}
            if any(entry.values()):
                out[table] = entry
    finally:
        a.close()
        b.close()
    return json.loads(canonical(out))


def diff_summary(d: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{table: {"added": n, "removed": n, "changed": n}} for prompts and reports."""
    return {t: {k: len(v) for k, v in c.items() if v} for t, c in d.items()}


# --------------------------------------------------------------------------- gold replays


@dataclass
class Replay:
    errors: list[str] = field(default_factory=list)  # one line per failed call
    reward: Reward | None = None
    final_db: bytes | None = None


def run_actions(env: Any, task: Task | None, actions: list[ToolCall], *, evaluate: bool = True,
                answer: Any = None, snapshot: bool = False) -> Replay:
    """Play `actions` on a fresh episode of `task`, then (optionally) evaluate `answer`."""
    out = Replay()
    with env.episode(task.task_id if task else None) as episode:
        for i, call in enumerate(actions, 1):
            observation = episode.call(call.tool, call.arguments)
            if not observation.get("ok"):
                out.errors.append(f"call {i} ({call.tool} {canonical(call.arguments)}) failed: "
                                  f"{observation.get('error')}")
        if evaluate:
            out.reward = episode.evaluate(answer_text(answer), state=False)
        if snapshot:
            try:
                out.final_db = episode.snapshot()
            except SynthError as exc:  # the worker died: the state is gone
                out.errors.append(f"the episode was lost: {exc}")
    return out


def reward_problem(reward: Reward | None) -> str | None:
    """Why a reward is not a clean full pass (None when it is)."""
    if reward is None:
        return "no reward"
    if reward.error:
        return f"the verifier failed: {reward.error}"
    if not reward.passed or reward.reward < 1.0:
        failed = [c.name for c in reward.checks if not c.passed]
        return f"the verifier scored {reward.reward:g} (failed checks: {', '.join(failed) or 'none'})"
    return None


def last_write_index(env: Any, actions: list[ToolCall]) -> int | None:
    """Index of the last call to a state-changing tool (tools.json read_only false)."""
    writes = {t.name for t in env.tools if not t.read_only}
    indices = [i for i, a in enumerate(actions) if a.tool in writes]
    return indices[-1] if indices else None


def gold_problems(env: Any, task: Task) -> list[str]:
    """Execution problems of one task's gold solution and verifier ([] when sound):
    the gold replay must succeed and score 1.0; the untouched initial state with an
    empty answer must fail; for write tasks, gold minus its last state-changing call
    must fail too."""
    problems = []
    gold = run_actions(env, task, task.gold, answer=task.expected_answer)
    problems += [f"gold solution: {e}" for e in gold.errors]
    why = reward_problem(gold.reward)
    if why:
        problems.append(f"after the gold solution, {why}")
    empty = run_actions(env, task, [], answer=None)
    if empty.reward is not None and empty.reward.error:
        problems.append(f"on the initial state with an empty answer, the verifier failed: {empty.reward.error}")
    elif empty.reward is not None and empty.reward.passed:
        problems.append("the verifier passes on the untouched initial state with an empty answer "
                        "(it must fail until the task is done)")
    last = last_write_index(env, task.gold)
    if task.kind == "write" and last is None:
        problems.append("a write task's gold solution calls no state-changing tool")
    if last is not None:
        partial = run_actions(env, task, task.gold[:last] + task.gold[last + 1:], answer=task.expected_answer)
        if partial.reward is not None and partial.reward.error:
            problems.append(f"without the last state-changing call ({task.gold[last].tool}), the verifier "
                            f"failed: {partial.reward.error}")
        elif partial.reward is not None and partial.reward.passed:
            problems.append(f"the verifier still passes when the last state-changing call "
                            f"({task.gold[last].tool}) is left out (it does not check that change)")
    return problems


# --------------------------------------------------------------------------- single test calls


def preview(value: Any, limit: int = MAX_RESULT_CHARS) -> Any:
    """`value` small enough to show: long lists keep their first items and end with a note of how
    many were left out; long strings are shortened with a note. Always valid JSON, never cut mid-value."""
    if len(canonical(value)) <= limit:
        return value
    if isinstance(value, list):
        kept: list[Any] = []
        for item in value:
            shown = preview(item, limit // 2)
            if len(canonical(kept + [shown])) > limit - 60 and kept:
                break
            kept.append(shown)
        return kept + [f"... {len(value) - len(kept)} more items not shown (of {len(value)})"]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        share = max(80, limit // max(1, len(value)))
        for key, item in value.items():
            out[key] = preview(item, share)
        return out
    if isinstance(value, str):
        return value[: max(40, limit - 60)] + f"... ({len(value)} characters in all)"
    return value


def observe_call(env: Any, tool: str, arguments: dict[str, Any], volatile: Iterable[str] = (), *,
                 setup: list[ToolCall] | None = None, rules: Rules | None = None) -> Observation:
    """Run `setup` then one call on a fresh episode (no task) and record what the call did:
    its result or refusal, the database change from the state after setup, and the rules of
    rules.json it broke (invariants that stopped holding, illegal status changes)."""
    validator = env.validators.get(tool)
    if validator is None:
        return Observation(ok=False, kind="unknown_tool", error=f"unknown tool {tool!r}")
    try:
        validator(arguments)
    except ArgumentError as exc:
        return Observation(ok=False, kind="bad_arguments", error=str(exc))
    with env.episode() as episode:
        for i, call in enumerate(setup or [], 1):
            done = episode.call(call.tool, call.arguments)
            if not done.get("ok"):
                return Observation(ok=False, kind="setup_failed",
                                   error=f"setup call {i} {call.tool}({canonical(call.arguments)}) failed: "
                                         f"{done.get('error')}")
        try:
            before = episode.snapshot() if setup else env.initial_db
        except SynthError as exc:
            return Observation(ok=False, kind="setup_failed", error=f"the setup calls killed the episode: {exc}")
        seen = len(episode.bugs)
        observation = episode.call(tool, arguments)
        bug = episode.bugs[-1] if len(episode.bugs) > seen else None
        try:
            after = episode.snapshot()
        except SynthError:
            after = None  # the call killed its worker; there is no state to diff
    if bug is not None:
        kind = bug.kind
    else:
        kind = "ok" if observation.get("ok") else "tool_error"
    result = observation.get("result") if observation.get("ok") else None
    text = canonical(result)
    broken = rules_after_call(before, after, rules) if after is not None and observation.get("ok") else []
    return Observation(
        ok=bool(observation.get("ok")), kind=kind,
        result=preview(result),
        result_sha256=hashlib.sha256(text.encode()).hexdigest() if observation.get("ok") else None,
        error=None if observation.get("ok") else str(observation.get("error")),
        diff=state_diff(before, after, volatile) if after is not None else {},
        broken=broken,
    )


def observation_mismatch(recorded: Observation, replayed: Observation, *, compare_result: bool) -> str | None:
    """How a replayed observation differs from the recorded one (None when it reproduces)."""
    if recorded.ok != replayed.ok or recorded.kind != replayed.kind:
        was = recorded.kind if recorded.ok or recorded.kind != "tool_error" else f"error {recorded.error!r}"
        now = replayed.kind if replayed.ok or replayed.kind != "tool_error" else f"error {replayed.error!r}"
        return f"recorded {was}, now {now}"
    if recorded.kind == "tool_error" and recorded.error != replayed.error:
        return f"recorded error {recorded.error!r}, now {replayed.error!r}"
    if canonical(recorded.diff) != canonical(replayed.diff):
        return (f"recorded database change {canonical(diff_summary(recorded.diff))}, "
                f"now {canonical(diff_summary(replayed.diff))}")
    if replayed.broken and not recorded.broken:
        return f"it now breaks the rules: {'; '.join(replayed.broken)[:300]}"
    if compare_result and recorded.ok and recorded.result_sha256 != replayed.result_sha256:
        return "the result differs from the recorded one"
    return None
