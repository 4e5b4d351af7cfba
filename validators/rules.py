"""Gate `rules`: the business rules of rules.json hold, and the tools keep them.

- every invariant returns no rows on the initial database;
- status transitions: for every status column with transition rules, each
  state-changing tool that names a row of that table (by its id, or by a unique
  column such as a barcode in a tool named after the table) is called on a seeded row
  in each state the column has (a status-like parameter tried with every other
  value of the column). A call that moves the column along a change its rules
  do not allow, or that breaks an invariant, is a tool bug. The details list,
  per column, the disallowed changes some tool attempted (and refused) and
  those no tool can make at all.

A folder made before rules.json existed has none: the gate passes and says so.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from synth.artifacts import GateResult, ToolSpec, Transition
from synth.folder.database import open_bytes, user_tables
from synth.folder.rules import STATUS_COLUMN_RE, check_invariants, check_values, rules_after_call
from synth.folder.toolschema import schema_to_params
from synth.pipeline.stages.build.tool_probe import id_tables, plausible_arguments, primary_key
from synth.use.replay import canonical

from .common import EnvFolder, Findings, run_with_env

NAME = "rules"
ROWS_PER_STATE = 1  # seeded rows tried per value of a status column
MAX_CALLS = 400  # calls per gate run, so a large env stays bounded


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _status_params(tool: ToolSpec, column: str) -> list[str]:
    """Parameters of `tool` that name a new value for `column` (status, new_status, state...)."""
    out = []
    for p in schema_to_params(tool.parameters):
        name = p.name.lower()
        if p.type == "string" and (name == column.lower() or name.endswith(column.lower())
                                   or STATUS_COLUMN_RE.match(name.removeprefix("new_"))):
            out.append(p.name)
    return out


def _unique_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    cols = set()
    for index in conn.execute(f"PRAGMA index_list({_q(table)})").fetchall():
        if index[2]:  # unique
            names = [r[2] for r in conn.execute(f"PRAGMA index_info({_q(index[1])})").fetchall()]
            if len(names) == 1 and names[0]:
                cols.add(names[0].lower())
    return cols


def _row_params(conn: sqlite3.Connection, tool: ToolSpec, table: str, tables: list[str], pk: str) -> list[tuple[str,
                                                                                                               str]]:
    """(parameter, column) pairs by which `tool` names a row of `table`: an id of it (pet_id -> pets.id),
    or, in a tool named after the table, a unique column of it (return_copy(barcode) -> copies.barcode)."""
    params = schema_to_params(tool.parameters)
    by_id = [(p.name, pk) for p in params if table in id_tables(tool.name, p.name, tables)]
    if by_id:
        return by_id
    name = table.lower()
    stem = name[:-3] + "y" if name.endswith("ies") else name.rstrip("s")
    if stem not in tool.name.lower():
        return []
    unique = _unique_columns(conn, table)
    return [(p.name, p.name) for p in params if p.type == "string" and p.name.lower() in unique]


def _targets(conn: sqlite3.Connection, rule: Transition) -> list[Any]:
    values = check_values(conn, rule.table, rule.column) or []
    values += [s for s in rule.allowed if s not in values]
    values += [v for vs in rule.allowed.values() for v in vs if v not in values]
    return values


class _Probe:
    def __init__(self, folder: EnvFolder, env: Any, found: Findings):
        self.folder, self.env, self.found = folder, env, found
        self.calls = 0
        self.attempted: dict[str, dict[str, list[str]]] = {}  # "table.column" -> "a -> b" -> tools
        self.reached: dict[str, set[str]] = {}  # "table.column" -> "a -> b" a tool made
        self.blamed: set[tuple[str, str]] = set()
        self.broken_initially = {v.name for v in check_invariants(env.initial_db, folder.rules.invariants)} \
            if folder.rules else set()

    def run(self, conn: sqlite3.Connection, rule: Transition) -> None:
        tables = user_tables(conn)
        table = next((t for t in tables if t.lower() == rule.table.lower()), None)
        pk = primary_key(conn, table) if table else None
        if table is None or pk is None:
            return
        writes = [t for t in self.env.tools if not t.read_only]
        targets = _targets(conn, rule)
        label = f"{table}.{rule.column}"
        for state in [r[0] for r in conn.execute(f"SELECT DISTINCT {_q(rule.column)} FROM {_q(table)} "
                                                 f"WHERE {_q(rule.column)} IS NOT NULL")]:
            rows = [r[0] for r in conn.execute(f"SELECT {_q(pk)} FROM {_q(table)} WHERE {_q(rule.column)} = ? "
                                               f"ORDER BY rowid LIMIT {ROWS_PER_STATE}", (state,))]
            for tool in writes:
                row_params = _row_params(conn, tool, table, tables, pk)
                if not row_params:
                    continue
                status_params = _status_params(tool, rule.column)
                for row in rows:
                    values = dict(conn.execute(f"SELECT * FROM {_q(table)} WHERE {_q(pk)} = ?", (row,)).fetchone())
                    lowered = {k.lower(): v for k, v in values.items()}
                    for wanted in ([t for t in targets if t != state] if status_params else [None]):
                        args = plausible_arguments(conn, tool)
                        args.update({p: lowered.get(column.lower()) for p, column in row_params})
                        if wanted is not None:
                            args.update({p: wanted for p in status_params})
                        self._call(tool, args, rule, label, table, pk, row, state, wanted)

    def _call(self, tool: ToolSpec, args: dict[str, Any], rule: Transition, label: str, table: str, pk: str,
              row: Any, state: Any, wanted: Any) -> None:
        if self.calls >= MAX_CALLS:
            return
        self.calls += 1
        with self.env.episode() as episode:
            observation = episode.call(tool.name, args)
            after = episode.snapshot() if observation.get("ok") else None
        allowed = rule.allowed.get(str(state), [])
        if wanted is not None and wanted not in allowed:
            self.attempted.setdefault(label, {}).setdefault(f"{state} -> {wanted}", []).append(tool.name)
        if after is None:
            return
        conn = open_bytes(after, readonly=True)
        try:
            now = conn.execute(f"SELECT {_q(rule.column)} FROM {_q(table)} WHERE {_q(pk)} = ?", (row,)).fetchone()
        finally:
            conn.close()
        if now is not None and now[0] != state:
            self.reached.setdefault(label, set()).add(f"{state} -> {now[0]}")
        broken = rules_after_call(self.env.initial_db, after, self.folder.rules,
                                  broken_before=self.broken_initially)
        if broken and (tool.name, broken[0]) not in self.blamed:
            self.blamed.add((tool.name, broken[0]))
            self.found.tool(tool.name, f"called {tool.name}({canonical(args)}) on {table} row {row!r} "
                                       f"({rule.column} = {state!r}): " + "; ".join(broken))

    def coverage(self) -> dict[str, Any]:
        out = {}
        for rule in self.folder.rules.transitions if self.folder.rules else []:
            label = f"{rule.table}.{rule.column}"
            states = set(rule.allowed) | {v for vs in rule.allowed.values() for v in vs}
            disallowed = sorted(f"{a} -> {b}" for a in states for b in states
                                if a != b and b not in rule.allowed.get(a, []))
            made = {pair.split(" -> ")[1] for pair in self.reached.get(label, set())}
            tried = set(self.attempted.get(label, {}))
            # A tool that moved some row to b was also tried on rows in every other state: it attempted a -> b.
            tried |= {p for p in disallowed if p.split(" -> ")[1] in made}
            out[label] = {"disallowed": len(disallowed), "attempted": sorted(tried & set(disallowed)),
                          "no_tool_can_make": sorted(set(disallowed) - tried)}
        return out


def _check(folder: EnvFolder, env: Any, found: Findings) -> None:
    for problem in folder.problems.get("rules.json", []):
        found.env(problem)
    if folder.rules is None:
        found.details["note"] = "no rules.json (an env made before rules existed)"
        return
    for violation in check_invariants(env.initial_db, folder.rules.invariants):
        found.env(f"initial data: {violation.text()}")
    probe = _Probe(folder, env, found)
    conn = open_bytes(env.initial_db, readonly=True)
    try:
        for rule in folder.rules.transitions:
            probe.run(conn, rule)
    finally:
        conn.close()
    found.details.update(invariants=len(folder.rules.invariants), calls=probe.calls,
                         transitions=probe.coverage())


def run(env_dir: Path | str, env: Any = None) -> GateResult:
    return run_with_env(NAME, env_dir, env, _check)
