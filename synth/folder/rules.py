"""rules.json: data invariants and status transitions, checked by execution.

An invariant is one SELECT that returns the rows breaking a rule ("no vet is
double-booked", "an invoice's total is the sum of its lines"); it holds when
it returns nothing. A transition rule lists, for one status column, which
values each value may change to. Both are written by the schema stage, held
on the initial data (the data stage feeds violations back) and after every
state-changing call in the check loop and the gates: a tool that breaks an
invariant, or moves a status along a change its column does not allow, has a bug.

Invariant SQL is model-written text, so it runs only on a private in-memory
copy of a state, under an authorizer that allows reading and nothing else
(no ATTACH, no PRAGMA, no writes) and a progress handler that stops a query
that runs too long.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

from synth.artifacts import Invariant, Rules, Transition
from synth.folder.database import open_bytes, table_columns, user_tables

MAX_ROWS_SHOWN = 3  # breaking rows quoted per violated invariant
MAX_STEPS = 2_000_000  # SQLite VM steps (in units of PROGRESS_EVERY) before a query is stopped
PROGRESS_EVERY = 1000
STATUS_COLUMN_RE = re.compile(r"^(status|state|[a-z0-9_]+_(status|state))$", re.IGNORECASE)
# A history or audit table's old_status / new_status columns record a change; they are not a status machine.
HISTORY_COLUMN_RE = re.compile(r"^(old|new|previous|prior|from|to)_", re.IGNORECASE)

_READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION}
_RECURSIVE = getattr(sqlite3, "SQLITE_RECURSIVE", 33)  # WITH RECURSIVE: reading too


def _authorize(action: int, *_: Any) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS or action == _RECURSIVE else sqlite3.SQLITE_DENY


class InvariantError(ValueError):
    """The invariant's SQL is not one read-only query that runs here."""


def run_query(conn: sqlite3.Connection, sql: str, limit: int = MAX_ROWS_SHOWN + 1) -> tuple[list[str], list[tuple]]:
    """(column names, the first `limit` rows) of one read-only query; raises InvariantError."""
    text = sql.strip().rstrip(";").strip()
    if not text:
        raise InvariantError("the SQL is empty")
    if not sqlite3.complete_statement(text + ";") or ";" in _outside_strings(text):
        raise InvariantError("give exactly one SELECT statement")
    steps = [0]

    def progress() -> int:
        steps[0] += 1
        return 1 if steps[0] * PROGRESS_EVERY > MAX_STEPS else 0

    conn.set_authorizer(_authorize)
    conn.set_progress_handler(progress, PROGRESS_EVERY)
    try:
        cursor = conn.execute(text)
        names = [d[0] for d in cursor.description or []]
        return names, [tuple(r) for r in cursor.fetchmany(limit)]
    except sqlite3.Error as exc:
        if steps[0] * PROGRESS_EVERY > MAX_STEPS:
            raise InvariantError("the query ran too long; make it cheaper (join on keys, no cross joins)") from exc
        message = str(exc)
        if "not authorized" in message:
            message = "only reading queries are allowed (one SELECT, no PRAGMA, ATTACH or writes)"
        raise InvariantError(message) from exc
    finally:
        conn.set_authorizer(None)
        conn.set_progress_handler(None, 0)


def _outside_strings(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "''", sql)


@dataclass
class Violation:
    name: str
    description: str
    rows: list[dict[str, Any]]  # the first breaking rows
    more: bool  # more rows than shown
    error: str | None = None  # the query itself failed on this state

    def text(self) -> str:
        if self.error:
            return f"invariant {self.name} could not be checked: {self.error}"
        shown = "; ".join(", ".join(f"{k}={v!r}" for k, v in row.items()) for row in self.rows)
        more = " (and more)" if self.more else ""
        return f"invariant {self.name} ({self.description}) is broken by: {shown}{more}"


def check_invariants(db_bytes: bytes, invariants: Iterable[Invariant]) -> list[Violation]:
    """The invariants that do not hold on the database `db_bytes` (a query error counts as not holding)."""
    invariants = list(invariants)
    if not invariants:
        return []
    conn = open_bytes(db_bytes, readonly=True)
    try:
        return [v for inv in invariants if (v := _check_one(conn, inv)) is not None]
    finally:
        conn.close()


def _check_one(conn: sqlite3.Connection, inv: Invariant) -> Violation | None:
    try:
        names, rows = run_query(conn, inv.sql)
    except InvariantError as exc:
        return Violation(inv.name, inv.description, [], False, error=str(exc))
    if not rows:
        return None
    shown = [dict(zip(names, r)) for r in rows[:MAX_ROWS_SHOWN]]
    return Violation(inv.name, inv.description, shown, len(rows) > MAX_ROWS_SHOWN)


# --------------------------------------------------------------------------- status columns


def check_values(conn: sqlite3.Connection, table: str, column: str) -> list[str] | None:
    """The values a CHECK (column IN (...)) constraint allows, or None when there is no such list."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    sql = row[0] if row else ""
    name = re.escape(column)
    match = re.search(rf'["`\[]?\b{name}\b["`\]]?\s+IN\s*\(([^)]*)\)', sql or "", re.IGNORECASE)
    if not match:
        return None
    return re.findall(r"'((?:[^']|'')*)'", match.group(1)) or None


def status_columns(conn: sqlite3.Connection) -> list[tuple[str, str, list[str]]]:
    """(table, column, allowed values) of every enumerated column named like a status."""
    found = []
    for table in user_tables(conn):
        for column in table_columns(conn, table):
            if STATUS_COLUMN_RE.match(column) and not HISTORY_COLUMN_RE.match(column):
                values = check_values(conn, table, column)
                if values and len(values) > 1:
                    found.append((table, column, values))
    return found


def transition_problems(conn: sqlite3.Connection, transitions: list[Transition]) -> list[str]:
    """Problems of the transition rules against a schema ([] when they fit it)."""
    problems = []
    tables = {t.lower(): t for t in user_tables(conn)}
    seen = set()
    for rule in transitions:
        label = f"transitions for {rule.table}.{rule.column}"
        table = tables.get(rule.table.lower())
        if table is None:
            problems.append(f"{label}: there is no table {rule.table!r}")
            continue
        if rule.column not in table_columns(conn, table):
            problems.append(f"{label}: table {table} has no column {rule.column!r}")
            continue
        seen.add((table.lower(), rule.column.lower()))
        values = check_values(conn, table, rule.column)
        if values:
            unknown = sorted({s for s in [*rule.allowed, *(v for vs in rule.allowed.values() for v in vs)]
                              if s not in values})
            if unknown:
                problems.append(f"{label}: {unknown} are not values its CHECK constraint allows ({values})")
    for table, column, values in status_columns(conn):
        if (table.lower(), column.lower()) not in seen:
            problems.append(f"status column {table}.{column} ({', '.join(values)}) has no transitions: list, for "
                            "each value, the values it may change to ([] for a final state; every other value if "
                            "any change is legitimate)")
    return problems


def invariant_problems(conn: sqlite3.Connection, invariants: list[Invariant]) -> list[str]:
    """Invariants whose SQL does not run on this schema (tried on `conn`, usually empty)."""
    problems = []
    names = [i.name for i in invariants]
    problems += [f"invariant {n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for inv in invariants:
        try:
            run_query(conn, inv.sql)
        except InvariantError as exc:
            problems.append(f"invariant {inv.name}: {exc}")
    return problems


def illegal_transitions(before: bytes, after: bytes, transitions: list[Transition],
                        changed: dict[str, Any] | None = None) -> list[str]:
    """Status changes from `before` to `after` that their column's rules do not allow."""
    if not transitions:
        return []
    a, b = open_bytes(before, readonly=True), open_bytes(after, readonly=True)
    try:
        found = []
        for rule in transitions:
            key = _row_key(b, rule.table)
            if key is None:
                continue
            quoted, col = _q(rule.table), _q(rule.column)
            keys = ", ".join(_q(k) for k in key)
            try:
                old = {tuple(r[:-1]): r[-1] for r in a.execute(f"SELECT {keys}, {col} FROM {quoted}")}
                new = b.execute(f"SELECT {keys}, {col} FROM {quoted}").fetchall()
            except sqlite3.Error:
                continue
            for row in new:
                k, value = tuple(row[:-1]), row[-1]
                if k in old and old[k] != value and value not in rule.allowed.get(str(old[k]), []):
                    where = ", ".join(f"{n}={v!r}" for n, v in zip(key, k))
                    found.append(f"{rule.table}.{rule.column} of the row with {where} changed from {old[k]!r} to "
                                 f"{value!r}, which its rules do not allow (allowed from {old[k]!r}: "
                                 f"{rule.allowed.get(str(old[k]), []) or 'nothing, it is final'})")
        return found
    finally:
        a.close()
        b.close()


def _row_key(conn: sqlite3.Connection, table: str) -> list[str] | None:
    try:
        info = conn.execute(f"PRAGMA table_info({_q(table)})").fetchall()
    except sqlite3.Error:
        return None
    if not info:
        return None
    pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
    return pk or ["rowid"]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def rules_after_call(before: bytes, after: bytes, rules: Rules | None, *,
                     broken_before: set[str] | None = None) -> list[str]:
    """What a state-changing call broke: invariants that held before it and not after, and status
    changes their rules do not allow. `broken_before` (invariant names) saves re-checking `before`."""
    if rules is None or before == after:
        return []
    after_violations = check_invariants(after, rules.invariants)
    if after_violations and broken_before is None:
        broken_before = {v.name for v in check_invariants(before, rules.invariants)}
    broken = [v.text() for v in after_violations if v.name not in (broken_before or set())]
    return broken + illegal_transitions(before, after, rules.transitions)
