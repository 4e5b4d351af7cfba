"""Reading an env's db/initial.sqlite for the viewer: tables, columns, foreign keys,
row counts and pages of rows. Opened read-only with untrusted schema features off,
since an env folder is untrusted input."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.folder.database import table_columns, user_tables

ROWS_PAGE = 50


@dataclass
class Column:
    name: str
    type: str
    notnull: bool
    pk: bool


@dataclass
class ForeignKey:
    table: str
    columns: list[str]
    ref_table: str
    ref_columns: list[str]


@dataclass
class TableInfo:
    name: str
    columns: list[Column]
    rows: int
    foreign_keys: list[ForeignKey] = field(default_factory=list)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def open_readonly(db_file: Path) -> sqlite3.Connection:
    if not db_file.is_file():
        raise FileNotFoundError(f"{db_file} is missing")
    conn = sqlite3.connect(f"file:{db_file}?mode=ro&immutable=1", uri=True, check_same_thread=False)
    conn.execute("PRAGMA trusted_schema=OFF")
    return conn


def schema(db_file: Path) -> list[TableInfo]:
    conn = open_readonly(db_file)
    try:
        tables = []
        for name in user_tables(conn):
            info = conn.execute(f"PRAGMA table_info({_q(name)})").fetchall()
            cols = [Column(name=r[1], type=r[2] or "", notnull=bool(r[3]), pk=r[5] > 0) for r in info]
            fks: dict[int, ForeignKey] = {}
            for r in conn.execute(f"PRAGMA foreign_key_list({_q(name)})").fetchall():
                fk = fks.setdefault(r[0], ForeignKey(table=name, columns=[], ref_table=r[2], ref_columns=[]))
                fk.columns.append(r[3])
                fk.ref_columns.append(r[4] or "")
            rows = conn.execute(f"SELECT count(*) FROM {_q(name)}").fetchone()[0]
            tables.append(TableInfo(name=name, columns=cols, rows=rows, foreign_keys=list(fks.values())))
        return tables
    finally:
        conn.close()


def table_page(db_file: Path, table: str, page: int = 1) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Column names, one page of rows (in rowid / primary-key order) and the table's row count."""
    conn = open_readonly(db_file)
    try:
        if table not in user_tables(conn):
            raise KeyError(table)
        cols = table_columns(conn, table)
        total = conn.execute(f"SELECT count(*) FROM {_q(table)}").fetchone()[0]
        rows = conn.execute(f"SELECT * FROM {_q(table)} LIMIT ? OFFSET ?",
                            (ROWS_PAGE, (max(page, 1) - 1) * ROWS_PAGE)).fetchall()
        return cols, rows, total
    finally:
        conn.close()
