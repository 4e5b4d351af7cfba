"""Execute generated tool bodies in the sandbox and report the ones that are broken.

Every tool is called on a fresh episode with plausible arguments drawn from
the initial data (an `owner_id` that exists, a `status` from its enum, a
`title` that is some row's title), and again with other rows, up to
PROBE_VARIANTS times, while it only refuses. A ToolError is the tool refusing a request,
which is fine; an unexpected exception, a timeout, a non-JSON result or a
read-only tool that changed the database is a bug, reported with the call, the
message and the traceback so a repair prompt can show them. Nothing here runs
generated code in this process: the bodies run in a SandboxPool worker.
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from synth.artifacts import ToolSpec
from synth.errors import SynthError
from synth.folder.database import diff, open_bytes, table_columns, user_tables
from synth.folder.format import EnvDraft, normalize_body, write_env
from synth.folder.toolschema import schema_to_params
from synth.runtime.codecheck import check_source

# Replaces a body that failed the static check so the other tools can still be probed this round.
_PLACEHOLDER = 'raise ToolError("this tool failed the static check")'
_FALLBACK = {"string": "example", "integer": 1, "number": 1.0, "boolean": True}
_NAME_PREFIXES = ("new_", "old_", "current_", "min_", "max_", "from_", "to_")
MAX_TRACEBACK_CHARS = 1500
PROBE_VARIANTS = 3  # argument sets tried per tool until one call succeeds


# --------------------------------------------------------------------------- static check


def body_problems(name: str, body: str) -> list[str]:
    """Syntax and sandbox-rule problems of one body, with line numbers counted inside the body."""
    text = normalize_body(body)
    if not text.strip():
        return ["the body is empty"]
    first = text.lstrip().split("\n", 1)[0]
    if first.startswith((f"def {name}(", f"async def {name}(")):  # a helper def inside the body is fine
        return ["write only the function body, without the def line"]
    wrapped = f"def {name}(db, **kwargs):\n" + "\n".join("    " + line for line in text.splitlines())
    problems = []
    for problem in check_source(wrapped, "tools.py"):
        head, sep, rest = problem.partition(": ")
        if sep and head.startswith("line ") and head[5:].isdigit():
            problem = f"body line {int(head[5:]) - 1}: {rest}"
        problems.append(problem)
    return problems


# --------------------------------------------------------------------------- plausible arguments


def _values(conn: sqlite3.Connection, table: str, column: str) -> list[Any]:
    """Distinct non-null values of a column from its first, last and middle rows (rowid order)."""
    q = lambda n: '"' + n.replace('"', '""') + '"'  # noqa: E731
    where = f"FROM {q(table)} WHERE {q(column)} IS NOT NULL"
    n = conn.execute(f"SELECT count(*) {where}").fetchone()[0]
    values = []
    for offset in dict.fromkeys((0, n - 1, n // 2)):
        if 0 <= offset < n:
            row = conn.execute(f"SELECT {q(column)} {where} ORDER BY rowid LIMIT 1 OFFSET ?", (offset,)).fetchone()
            if row[0] not in values:
                values.append(row[0])
    return values


def _fits(value: Any, type_: str) -> bool:
    if type_ == "string":
        return isinstance(value, str)
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return type_ == "boolean" and value in (0, 1)


def _tables_for(stem: str, tables: list[str]) -> list[str]:
    """Tables an id parameter's stem (owner, category, ...) may name, best first."""
    stem = stem.lower()
    forms = [stem, stem + "s", stem + "es", stem[:-1] + "ies" if stem.endswith("y") else None]
    by_lower = {t.lower(): t for t in tables}
    found = [by_lower[f] for f in forms if f and f in by_lower]
    found += [t for t in tables if t.lower().endswith("_" + stem + "s") or t.lower().endswith(stem + "s")]
    return list(dict.fromkeys(found))


def _primary_key(conn: sqlite3.Connection, table: str) -> str | None:
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    pk = [r[1] for r in info if r[5] > 0]
    return pk[0] if len(pk) == 1 else None


def id_tables(tool: str, param: str, tables: list[str]) -> list[str]:
    """Tables an id parameter may point into, best first (owner_id -> owners; `id` of
    cancel_booking -> bookings); [] when `param` is not an id."""
    lowered = param.lower()
    if not (lowered.endswith("_id") or lowered == "id"):
        return []
    stem = lowered[:-3] if lowered != "id" else tool.split("_", 1)[-1]
    return list(dict.fromkeys(_tables_for(stem.split("_")[-1], tables) + _tables_for(stem, tables)))


def primary_key(conn: sqlite3.Connection, table: str) -> str | None:
    return _primary_key(conn, table)


def plausible_values(conn: sqlite3.Connection, tool: str, name: str, type_: str) -> list[Any]:
    """Values for parameter `name` taken from the data when a column fits, else [a typed default]."""
    tables = user_tables(conn)
    columns = {t: table_columns(conn, t) for t in tables}
    lowered = name.lower()
    # An id parameter: the first row of the table it names (owner_id -> owners.id).
    for table in id_tables(tool, name, tables):
        pk = _primary_key(conn, table)
        if pk:
            values = [v for v in _values(conn, table, pk) if _fits(v, type_)]
            if values:
                return values
    # A column of the same name, preferring tables the tool's name mentions (find_pets -> pets).
    words = set(tool.lower().split("_"))
    mentioned = [t for t in tables if t.lower() in words or t.lower().rstrip("s") in words]
    ordered = mentioned + [t for t in tables if t not in mentioned]
    candidates = [lowered]
    for prefix in _NAME_PREFIXES:
        if lowered.startswith(prefix):
            candidates.append(lowered[len(prefix):])
    for wanted in candidates:
        for table in ordered:
            for column in columns[table]:
                if column.lower() == wanted:
                    values = [v for v in _values(conn, table, column) if _fits(v, type_)]
                    if values:
                        return [bool(v) for v in values] if type_ == "boolean" else values
    return [_FALLBACK[type_]]


def plausible_arguments(conn: sqlite3.Connection, tool: ToolSpec, variant: int = 0) -> dict[str, Any]:
    """Arguments for every required parameter of `tool` (optional ones are left out).

    Variant k takes the k-th candidate of each parameter (first row, last row, middle row),
    so a write tool refused for the first row's state can be tried on another row.
    """
    args: dict[str, Any] = {}
    for p in schema_to_params(tool.parameters):
        if not p.required:
            continue
        if p.enum:
            value: Any = p.enum[variant % len(p.enum)]
            args[p.name] = [value] if p.type == "array" else value
            continue
        element = (p.items or "string") if p.type == "array" else p.type
        values = plausible_values(conn, tool.name, p.name.rstrip("s") if p.type == "array" else p.name, element)
        value = values[variant % len(values)]
        args[p.name] = [value] if p.type == "array" else value
    return args


# --------------------------------------------------------------------------- execution


def _call_text(name: str, args: dict[str, Any]) -> str:
    return f"{name}({json.dumps(args, ensure_ascii=False, default=str)})"


def probe_tools(draft: EnvDraft, db_bytes: bytes, pool: Any) -> tuple[dict[str, str], dict[str, dict]]:
    """Check and call every tool of `draft` once in the sandbox.

    Returns (failures: tool -> problem text, probes: tool -> {"arguments", "outcome", "message"}).
    """
    from synth.runtime import Env

    failures = {t.name: "; ".join(p) for t in draft.tools
                if (p := body_problems(t.name, draft.tool_bodies.get(t.name, "")))}
    runnable = {n: (_PLACEHOLDER if n in failures else b) for n, b in draft.tool_bodies.items()}
    probe_draft = draft.model_copy(update={"tool_bodies": runnable, "verifier_bodies": {}, "status": "built"})
    conn = open_bytes(db_bytes, readonly=True)
    probes: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="synth-probe-") as tmp:
            folder = write_env(probe_draft, Path(tmp) / draft.env_id, db_bytes=db_bytes)
            try:
                env = Env.load(folder, pool=pool)
            except SynthError as exc:  # the module as a whole would not load
                message = str(exc)
                return {t.name: failures.get(t.name, message) for t in draft.tools}, probes
            try:
                for tool in draft.tools:
                    if tool.name in failures:
                        continue
                    problem, probes[tool.name] = _probe_one(env, tool, conn, db_bytes)
                    if problem:
                        failures[tool.name] = problem
            finally:
                env.close()
    finally:
        conn.close()
    return failures, probes


def _probe_one(env: Any, tool: ToolSpec, conn: sqlite3.Connection, db_bytes: bytes) -> tuple[str | None, dict]:
    """Call `tool` with up to PROBE_VARIANTS argument sets until one succeeds; stop at the first bug."""
    record: dict = {}
    tried: list[dict[str, Any]] = []
    for variant in range(PROBE_VARIANTS):
        args = plausible_arguments(conn, tool, variant)
        if args in tried:
            break
        tried.append(args)
        problem, record = _call_once(env, tool, args, db_bytes)
        if problem or record["outcome"] == "ok":
            return problem, record
    return None, record


def _call_once(env: Any, tool: ToolSpec, args: dict[str, Any], db_bytes: bytes) -> tuple[str | None, dict]:
    call = _call_text(tool.name, args)
    with env.episode() as episode:
        seen = len(episode.bugs)
        observation = episode.call(tool.name, args)
        if len(episode.bugs) > seen:
            bug = episode.bugs[-1]
            tb = bug.traceback.strip()[-MAX_TRACEBACK_CHARS:]
            problem = f"calling {call} failed ({bug.kind}): {bug.message}" + (f"\ntraceback:\n{tb}" if tb else "")
            return problem, {"arguments": args, "outcome": "bug", "message": bug.message}
        if not observation["ok"]:
            return None, {"arguments": args, "outcome": "tool_error", "message": observation["error"]}
        if tool.read_only:
            before, after = open_bytes(db_bytes, readonly=True), episode.state()
            try:
                changed = sorted(diff(before, after))
            finally:
                before.close()
                after.close()
            if changed:
                problem = (f"calling {call} changed table(s) {', '.join(changed)}, but the tool is read-only: "
                           "it must not insert, update or delete anything")
                return problem, {"arguments": args, "outcome": "bug", "message": problem}
    return None, {"arguments": args, "outcome": "ok", "message": ""}
