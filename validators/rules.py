"""Gate `rules`: the business rules of rules.json hold, and the tools keep them.

- every invariant returns no rows on the initial database;
- status transitions: for every status column with transition rules, each
  state-changing tool that takes an id of that table is called on a seeded row
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
from synth.database import open_bytes, user_tables
from synth.replay import canonical
from synth.rules import STATUS_COLUMN_RE, check_invariants, check_values, rules_after_call
from synth.stages.tool_probe import id_tables, plausible_arguments, primary_key
from synth.toolschema import schema_to_params

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
                id_params = [p.name for p in schema_to_params(tool.parameters)
                             if table in id_tables(tool.name, p.name, tables)]
                if not id_params:
                    continue
                status_params = _status_params(tool, rule.column)
                for row in rows:
                    for wanted in ([t for t in targets if t != state] if status_params else [None]):
                        args = plausible_arguments(conn, tool)
                        args.update({p: row for p in id_params})
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
