"""SQLite helpers: run model-written SQL statement by statement, build the initial
database in memory, hash and reopen its bytes, and diff two database states.

The schema and data stages feed `StatementError`s back to the model, so each
error carries the statement it came from and SQLite's own message.
"""

from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Any, Iterable

from synth.errors import SynthError

_MAX_SHOWN = 5  # problems listed in a DatabaseError's one-line message


@dataclass(frozen=True)
class StatementError:
    # A plain dataclass, not pydantic: the sandbox worker imports this module and
    # must start fast.
    index: int  # 0-based position of the statement in the script
    statement: str
    message: str

    def __str__(self) -> str:
        stmt = " ".join(self.statement.split())
        if len(stmt) > 200:
            stmt = stmt[:197] + "..."
        return f"statement {self.index + 1}: {self.message}: {stmt}"


class DatabaseError(SynthError):
    """The initial database could not be built cleanly; `problems` lists every reason."""

    def __init__(self, problems: list[str], errors: list[StatementError] | None = None):
        self.problems = problems
        self.errors = errors or []
        shown = "; ".join(problems[:_MAX_SHOWN])
        more = f" (+{len(problems) - _MAX_SHOWN} more)" if len(problems) > _MAX_SHOWN else ""
        super().__init__(f"database build failed: {shown}{more}")


def split_statements(sql: str) -> list[str]:
    """Split a script into complete statements; semicolons in strings, comments and
    trigger bodies do not split (sqlite3.complete_statement decides)."""
    statements: list[str] = []
    buf = ""
    for piece in sql.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            statements.append(buf.strip())
            buf = ""
    rest = buf[:-1]  # the last piece got a ';' that was not in the input
    if not _blank(rest):
        statements.append(rest.strip())
    return [s for s in statements if not _blank(s.rstrip(";"))]


def _blank(sql: str) -> bool:
    """True when `sql` holds only whitespace and comments."""
    lines = []
    for line in sql.splitlines():
        stripped = line.strip()
        if not stripped.startswith("--"):
            lines.append(stripped)
    text = " ".join(lines).strip()
    while text.startswith("/*") and "*/" in text:
        text = text[text.index("*/") + 2 :].strip()
    return not text


def run_script(conn: sqlite3.Connection, sql: str) -> list[StatementError]:
    """Execute `sql` one statement at a time, keep going after failures, return the errors."""
    errors = []
    for index, statement in enumerate(split_statements(sql)):
        try:
            conn.execute(statement)
        except (sqlite3.Error, sqlite3.Warning) as exc:
            errors.append(StatementError(index=index, statement=statement, message=str(exc)))
    return errors


def _connect() -> sqlite3.Connection:
    # Autocommit, so one failing INSERT never rolls back its neighbours.
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def check_database(conn: sqlite3.Connection) -> list[str]:
    """Foreign-key and integrity problems of `conn` ([] when clean)."""
    problems = []
    for table, rowid, parent, _fkid in conn.execute("PRAGMA foreign_key_check").fetchall():
        problems.append(f"{table} row {rowid} references a missing row of {parent}")
    integrity = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if integrity != ["ok"]:
        problems += [f"integrity: {msg}" for msg in integrity]
    return problems


def build_database(schema_sql: str, data_sql: str) -> bytes:
    """Build the initial database in memory with foreign keys on; return its bytes.

    Raises DatabaseError listing every failed statement and every foreign-key or
    integrity problem, so a stage can show them all to the model at once.
    """
    conn = _connect()
    try:
        errors = run_script(conn, schema_sql)
        problems = [f"schema {e}" for e in errors]
        if not user_tables(conn):
            problems.append("the schema creates no tables")
        data_errors = run_script(conn, data_sql)
        errors += data_errors
        problems += [f"data {e}" for e in data_errors]
        problems += check_database(conn)
        if problems:
            raise DatabaseError(problems, errors)
        return conn.serialize()
    finally:
        conn.close()


def db_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def open_bytes(data: bytes, readonly: bool = False) -> sqlite3.Connection:
    """A private in-memory connection on a copy of `data` (row_factory=sqlite3.Row).

    ATTACH is disabled (it could open files; VACUUM INTO goes through it too).
    `readonly` sets query_only, which is advisory: the copy is private anyway.
    """
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.deserialize(data)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    if readonly:
        conn.execute("PRAGMA query_only=ON")
    return conn


def user_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [r[0] for r in rows]


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: conn.execute(f"SELECT count(*) FROM {_quote(t)}").fetchone()[0] for t in user_tables(conn)}


def table_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()]


def _primary_key(conn: sqlite3.Connection, table: str) -> list[str]:
    info = conn.execute(f"PRAGMA table_info({_quote(table)})").fetchall()
    pk = [r[1] for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
    return pk or ["rowid"]


def _rows(conn: sqlite3.Connection, table: str, key: list[str]) -> dict[tuple, dict[str, Any]]:
    cols = table_columns(conn, table)
    select = ", ".join(_quote(c) for c in cols)
    if key == ["rowid"]:
        cur = conn.execute(f"SELECT rowid, {select} FROM {_quote(table)}")
        return {(r[0],): dict(zip(cols, r[1:])) for r in cur}
    idx = [cols.index(k) for k in key]
    return {tuple(r[i] for i in idx): dict(zip(cols, r)) for r in conn.execute(f"SELECT {select} FROM {_quote(table)}")}


def diff(
    conn_a: sqlite3.Connection, conn_b: sqlite3.Connection, ignore_columns: Iterable[str] = ()
) -> dict[str, dict[str, list]]:
    """Row changes from state a to state b, per table, matched by primary key (rowid if none).

    Returns {table: {"added": [row], "removed": [row], "changed": [{"key", "before",
    "after", "columns"}]}} for tables that changed only; {} means identical.
    `ignore_columns` ("table.column", e.g. volatile timestamps) do not count as changes.
    """
    ignored = set(ignore_columns)
    tables_a, tables_b = set(user_tables(conn_a)), set(user_tables(conn_b))
    result: dict[str, dict[str, list]] = {}
    for table in sorted(tables_a | tables_b):
        key = _primary_key(conn_b if table in tables_b else conn_a, table)
        rows_a = _rows(conn_a, table, key) if table in tables_a else {}
        rows_b = _rows(conn_b, table, key) if table in tables_b else {}
        added = [rows_b[k] for k in rows_b.keys() - rows_a.keys()]
        removed = [rows_a[k] for k in rows_a.keys() - rows_b.keys()]
        changed = []
        for k in sorted(rows_a.keys() & rows_b.keys(), key=repr):
            before, after = rows_a[k], rows_b[k]
            cols = [
                c
                for c in sorted(set(before) | set(after))
                if f"{table}.{c}" not in ignored and before.get(c) != after.get(c)
            ]
            if cols:
                changed.append({"key": dict(zip(key, k)), "before": before, "after": after, "columns": cols})
        if added or removed or changed:
            result[table] = {
                "added": sorted(added, key=repr),
                "removed": sorted(removed, key=repr),
                "changed": changed,
            }
    return result
