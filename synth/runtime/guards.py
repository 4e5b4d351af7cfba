"""What keeps env code's database and results within bounds, in the worker and in
trusted mode alike.

- GuardedConnection: an episode database whose limits (no ATTACH), authorizer
  (no ATTACH, so no VACUUM INTO; no load_extension) and deadline env code cannot
  change; Host sets them through the base class.
- checked_result: a tool's JSON result refused when over the size limit or nested
  deeper than HTTP encoders handle, with lone surrogates (not UTF-8) replaced.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

MAX_RESULT_DEPTH = 64  # deeper JSON breaks HTTP encoders; no real tool result nests like that
_SURROGATES = re.compile("[\\ud800-\\udfff]")  # not encodable as UTF-8: HTTP servers would fail on them
_DENY_ACTIONS = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}  # ATTACH opens files; VACUUM INTO is one


class GuardedConnection(sqlite3.Connection):
    """An episode database whose guards env code cannot change (Host sets them through
    the base class)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise sqlite3.NotSupportedError("environment code may not change the database's limits or guards")

    setlimit = set_authorizer = set_progress_handler = set_trace_callback = _refuse
    enable_load_extension = load_extension = _refuse


def _authorize(action: int, arg1: Any, arg2: Any, db_name: Any, source: Any) -> int:
    if action in _DENY_ACTIONS or (action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension"):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def open_guarded(data: bytes, readonly: bool = False) -> sqlite3.Connection:
    """A private in-memory copy of `data` for env code (row_factory=sqlite3.Row)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, factory=GuardedConnection)
    conn.deserialize(data)
    sqlite3.Connection.setlimit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    sqlite3.Connection.set_authorizer(conn, _authorize)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    if readonly:
        conn.execute("PRAGMA query_only=ON")
    return conn


def _depth(text: str) -> int:
    """Nesting depth of JSON text (strings removed; each pass drops the innermost pairs)."""
    shape = re.sub(r'"(?:[^"\\]|\\.)*"', "", text).translate(_BRACKETS)
    shape = re.sub(r"[^()]", "", shape)
    depth = 0
    while shape and depth <= MAX_RESULT_DEPTH:
        shape = shape.replace("()", "")
        depth += 1
    return depth


_BRACKETS = str.maketrans("[{]}", "(())")


def checked_result(text: str, what: str, limit: int | None) -> tuple:
    """A tool's JSON result, refused when too large or too deep, made encodable as UTF-8."""
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if limit is not None and size > limit:
        return ("error", "too_large", f"{what} returned {size:,} bytes of JSON; the limit is {limit:,} bytes "
                "(return fewer rows, or page through them)", "")
    if text.count("[") + text.count("{") > MAX_RESULT_DEPTH and _depth(text) > MAX_RESULT_DEPTH:
        return ("error", "bad_return", f"{what} returned JSON nested deeper than {MAX_RESULT_DEPTH} levels", "")
    return ("ok", clean_text(text))


def clean_text(text: str) -> str:
    """Lone surrogates (not encodable as UTF-8) replaced with U+FFFD."""
    return text if text.isascii() or not _SURROGATES.search(text) else _SURROGATES.sub("\ufffd", text)
