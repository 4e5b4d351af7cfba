"""Reading an env's db/initial.sqlite for the viewer: tables, columns, foreign keys,
row counts and pages of rows. The file is read like every env folder file (no link,
FIFO or oversized file; synth.folder.files) and opened from memory, read-only, with
untrusted schema features off, since an env folder is untrusted input."""

from __future__ import annotations

import functools
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.folder.database import open_bytes, table_columns, user_tables
from synth.folder.files import read_env_bytes

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


DB_FILE = "db/initial.sqlite"
_CACHED_BYTES = 64 << 20  # databases up to this size are kept between page views


@functools.lru_cache(maxsize=4)
def _cached(path: str, signature: tuple) -> bytes:  # noqa: ARG001 - the signature keys the cache
    return read_env_bytes(path, DB_FILE)


def open_readonly(env_dir: Path) -> sqlite3.Connection:
    """The env's initial database, read through the env-folder reader and opened in memory."""
    try:
        st = os.lstat(Path(env_dir) / DB_FILE)
        small = st.st_size <= _CACHED_BYTES
    except OSError:
        small = False  # missing or unreadable: the reader says why
    data = _cached(str(env_dir), (st.st_mtime_ns, st.st_size, st.st_ino)) if small \
        else read_env_bytes(env_dir, DB_FILE)
    conn = open_bytes(data, readonly=True)
    conn.execute("PRAGMA trusted_schema=OFF")
    return conn


def schema(env_dir: Path) -> list[TableInfo]:
    conn = open_readonly(env_dir)
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


def table_page(env_dir: Path, table: str, page: int = 1) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Column names, one page of rows (in rowid / primary-key order) and the table's row count."""
    conn = open_readonly(env_dir)
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
