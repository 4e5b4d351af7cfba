"""The rows a request is about, found by query: the rows holding a value the request names (a
name, a reference, a date), then the rows linked to them by a foreign key (a booking's guest and
its room, a member's loans). A prompt that must state facts from the database shows these rows
first, whatever their position in the table, instead of each table's first N rows."""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from synth.folder.database import open_bytes, table_columns, user_tables

MAX_ANCHORS = 30  # rows per table that match the request's values
MAX_LINKED = 20  # rows per table reached through one foreign key
_WORD_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9@._'/-]*[A-Za-z0-9]|[A-Za-z0-9]")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


def _named(value: Any, text: str, words: set[str]) -> bool:
    """Does the request name this value (as whole words; 3 characters at least, a date by its day)?"""
    if value is None or isinstance(value, bytes):
        return False
    if isinstance(value, float):
        value = f"{value:.2f}".rstrip("0").rstrip(".")
    value = str(value).strip()
    if len(value) < 3:
        return False
    if re.match(r"^\d{4}-\d{2}-\d{2}", value):
        return value[:10] in text
    low = value.lower()
    if low in words:
        return True
    parts = _words(low)
    return len(parts) > 1 and re.search(r"(?<![A-Za-z0-9])" + re.escape(low) + r"(?![A-Za-z0-9])", text.lower()) \
        is not None


def _links(conn: sqlite3.Connection, tables: list[str]) -> list[tuple[str, str, str, str]]:
    """(child table, child column, parent table, parent column) of every single-column foreign key."""
    lowered = {t.lower(): t for t in tables}
    out = []
    for child in tables:
        for r in conn.execute(f"PRAGMA foreign_key_list({_q(child)})").fetchall():
            parent = lowered.get(str(r[2]).lower())
            if parent is None:
                continue
            column = r[4]
            if column is None:
                pk = [c[1] for c in conn.execute(f"PRAGMA table_info({_q(parent)})") if c[5] == 1]
                column = pk[0] if pk else "rowid"
            out.append((child, r[3], parent, column))
    return out


def request_rows(db_bytes: bytes, texts: list[str]) -> dict[str, list[int]]:
    """{table: rowids} of the rows the requests `texts` are about and the rows linked to them."""
    text = "\n".join(texts)
    words = _words(text)
    conn = open_bytes(db_bytes, readonly=True)
    try:
        tables = user_tables(conn)
        picked: dict[str, list[int]] = {}
        for table in tables:
            columns = table_columns(conn, table)
            hits = []
            for row in conn.execute(f"SELECT rowid, {', '.join(_q(c) for c in columns)} FROM {_q(table)}"):
                if any(_named(v, text, words) for v in row[1:]):
                    hits.append(row[0])
                    if len(hits) >= MAX_ANCHORS:
                        break
            if hits:
                picked[table] = hits
        links = _links(conn, tables)
        anchors = {t: list(ids) for t, ids in picked.items()}
        for _ in range(2):  # two hops: a named booking, its performance, then that performance's venue
            grown = {t: list(ids) for t, ids in picked.items()}
            for child, ccol, parent, pcol in links:
                if child in picked:  # the rows the picked rows reference
                    _add(conn, grown, parent, f"{_q(pcol)} IN (SELECT {_q(ccol)} FROM {_q(child)} WHERE rowid IN "
                                              f"({_ids(picked[child])}))")
                if parent in anchors:  # the rows that reference a named row (a member's loans)
                    _add(conn, grown, child, f"{_q(ccol)} IN (SELECT {_q(pcol)} FROM {_q(parent)} WHERE rowid IN "
                                             f"({_ids(anchors[parent])}))")
            picked = grown
        return picked
    finally:
        conn.close()


def _ids(ids: list[int]) -> str:
    return ", ".join(str(int(i)) for i in ids)


def _add(conn: sqlite3.Connection, picked: dict[str, list[int]], table: str, where: str) -> None:
    have = picked.setdefault(table, [])
    try:
        rows = conn.execute(f"SELECT rowid FROM {_q(table)} WHERE {where} LIMIT {MAX_LINKED}").fetchall()
    except sqlite3.Error:
        return
    have += [r[0] for r in rows if r[0] not in have]
