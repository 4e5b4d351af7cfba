"""What keeps env code's database and results within bounds, in the worker and in
trusted mode alike.

- GuardedConnection: an episode database whose limits (no ATTACH), authorizer
  (no ATTACH, so no VACUUM INTO; no load_extension) and deadline env code cannot
  change; Host sets them through the base class. A snapshot of it is refused past
  db_limit() bytes (its initial size plus DB_GROWTH).
- checked_result: a tool's JSON result refused when over the size limit or nested
  deeper than HTTP encoders handle, with lone surrogates (not UTF-8) replaced.
- plain_checks: a verifier's result as (name, passed, weight) tuples, at most
  MAX_CHECKS of them.
- plain: whether a reply holds built-in data only (nothing of env code's making).
- json_default, safe_str: a tool's result as JSON and an exception's message, taken while
  the code that made them still runs as env code.
"""

from __future__ import annotations

import datetime
import decimal
import re
import sqlite3
from typing import Any

MAX_RESULT_DEPTH = 64  # deeper JSON breaks HTTP encoders; no real tool result nests like that
MAX_CHECKS = 200  # checks one verifier call may return; more is a verifier bug
_MESSAGE_CHARS = 2000  # longest error message passed on
DB_GROWTH = 64 << 20  # bytes an episode's database may grow beyond its initial size
_SURROGATES = re.compile("[\\ud800-\\udfff]")  # not encodable as UTF-8: HTTP servers would fail on them
_DENY_ACTIONS = {sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH}  # ATTACH opens files; VACUUM INTO is one


class GuardedConnection(sqlite3.Connection):
    """An episode database whose guards env code cannot change (Host sets them through
    the base class). No instance attributes: env code cannot shadow `serialize`, `commit`
    or `close` on it either."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise sqlite3.NotSupportedError("environment code may not change the database's limits or guards")

    setlimit = set_authorizer = set_progress_handler = set_trace_callback = _refuse
    enable_load_extension = load_extension = _refuse


def _authorize(action: int, arg1: Any, arg2: Any, db_name: Any, source: Any) -> int:
    if action in _DENY_ACTIONS or (action == sqlite3.SQLITE_FUNCTION and arg2 == "load_extension"):
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def db_limit(initial_size: int) -> int:
    """The most bytes a snapshot of an episode database of this initial size may carry."""
    return initial_size + DB_GROWTH


def open_guarded(data: bytes, readonly: bool = False) -> sqlite3.Connection:
    """A private in-memory copy of `data` for env code (row_factory=sqlite3.Row)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, factory=GuardedConnection)
    sqlite3.Connection.deserialize(conn, data)
    sqlite3.Connection.setlimit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    sqlite3.Connection.set_authorizer(conn, _authorize)
    conn.row_factory = sqlite3.Row
    sqlite3.Connection.execute(conn, "PRAGMA foreign_keys=ON")
    if readonly:
        sqlite3.Connection.execute(conn, "PRAGMA query_only=ON")
    return conn


def plain_checks(result: Any) -> list[tuple[str, bool, float]]:
    """Validate a verifier's result (list of check dicts) into plain tuples."""
    if not isinstance(result, list):
        raise ValueError(f"a verifier must return a list of checks, got {type(result).__name__}")
    if list.__len__(result) > MAX_CHECKS:
        raise ValueError(f"a verifier may return at most {MAX_CHECKS} checks; this one returned "
                         f"{list.__len__(result):,}")
    checks = []
    for item in list.__iter__(result):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "passed" not in item:
            raise ValueError("each check must be a dict with 'name' and 'passed' (use check(name, passed))")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"check {item['name']!r} has an invalid weight {weight!r}")
        checks.append((clean_text(str.__str__(item["name"])[:200]), bool(item["passed"]), float(weight)))
    return checks


_PLAIN_SCALARS = (str, bytes, int, float, bool, type(None))


def plain(value: Any, depth: int = 0) -> bool:
    """True when `value` is built-in data only (exact types, so pickling it runs no env code)."""
    kind = type(value)
    if kind in _PLAIN_SCALARS:
        return True
    if depth > 8:
        return False
    if kind is tuple or kind is list:
        return all(plain(v, depth + 1) for v in value)
    if kind is dict:
        return all(type(k) is str and plain(v, depth + 1) for k, v in value.items())
    return False


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


def json_default(value: Any) -> Any:
    """JSON for the few non-JSON types tool code commonly returns (json.dumps `default`)."""
    if isinstance(value, sqlite3.Row):
        return dict(zip(value.keys(), value))
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"a value of type {type(value).__name__} is not JSON-serializable")


def safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile or broken __str__
        return "<unprintable message>"
    if not isinstance(text, str):
        return "<unprintable message>"
    text = str.__str__(text)  # an exact str, never env code's subclass
    return clean_text(text[:_MESSAGE_CHARS] + ("..." if len(text) > _MESSAGE_CHARS else ""))
