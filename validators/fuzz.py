"""Seeded random tool calls with arguments that pass each tool's schema, drawn
from the values in the initial database so that many calls reach real rows
(a `book_id` parameter gets ids of the books table, a `status` parameter the
statuses in use), with a few arbitrary values mixed in.
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections import defaultdict
from typing import Any

from synth.artifacts import ToolCall, ToolParam, ToolSpec
from synth.folder.database import open_bytes, table_columns, user_tables
from synth.folder.toolschema import schema_to_params

_MAX_VALUES = 60  # distinct values kept per column
_WORDS = ("alpha", "test", "none", "2025-06-02", "unknown", "x")


class ValuePool:
    """Distinct values of the initial database, by column name and by table."""

    def __init__(self, initial_db: bytes):
        self.by_column: dict[str, list[Any]] = defaultdict(list)
        self.by_table_pk: dict[str, list[Any]] = {}
        self.by_type: dict[type, list[Any]] = defaultdict(list)
        conn = open_bytes(initial_db, readonly=True)
        try:
            for table in user_tables(conn):
                self._collect(conn, table)
        finally:
            conn.close()

    def _collect(self, conn: sqlite3.Connection, table: str) -> None:
        quoted = '"' + table.replace('"', '""') + '"'
        info = conn.execute(f"PRAGMA table_info({quoted})").fetchall()
        pk = [r[1] for r in info if r[5] > 0]
        for column in table_columns(conn, table):
            qc = '"' + column.replace('"', '""') + '"'
            rows = conn.execute(f"SELECT DISTINCT {qc} FROM {quoted} WHERE {qc} IS NOT NULL LIMIT {_MAX_VALUES}")
            values = [r[0] for r in rows if isinstance(r[0], (int, float, str))]
            self.by_column[column.lower()] += values
            for v in values:
                self.by_type[type(v)].append(v)
            if len(pk) == 1 and column == pk[0]:
                self.by_table_pk[table.lower()] = values

    def _candidates(self, name: str) -> list[Any]:
        name = name.lower()
        found = list(self.by_column.get(name, []))
        match = re.match(r"^(.*)_ids?$", name)
        if match:
            stem = match.group(1)
            for table in (stem, stem + "s", stem + "es", stem[:-1] + "ies" if stem.endswith("y") else stem):
                found += self.by_table_pk.get(table, [])
        return found

    def sample(self, rng: random.Random, param: ToolParam) -> Any:
        if param.type == "array":
            item = param.model_copy(update={"type": param.items or "string", "items": None})
            return [self.sample(rng, item) for _ in range(rng.randint(0, 2))]
        if param.enum:
            return rng.choice(list(param.enum))
        typed = [v for v in self._candidates(param.name) if _fits(v, param.type)]
        if typed and rng.random() < 0.85:
            return rng.choice(typed)
        if param.type == "boolean":
            return rng.random() < 0.5
        if param.type == "integer":
            pool = [v for v in self.by_type[int] if not isinstance(v, bool)]
            return rng.choice(pool) if pool and rng.random() < 0.5 else rng.randint(-1, 20)
        if param.type == "number":
            pool = self.by_type[float] + self.by_type[int]
            return float(rng.choice(pool)) if pool and rng.random() < 0.5 else round(rng.uniform(-5, 500), 2)
        pool = self.by_type[str]
        return rng.choice(pool) if pool and rng.random() < 0.6 else rng.choice(_WORDS)


def _fits(value: Any, type_: str) -> bool:
    if type_ == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "string":
        return isinstance(value, str)
    return isinstance(value, bool)


def random_call(rng: random.Random, tools: list[ToolSpec], pool: ValuePool) -> ToolCall:
    """One call of a random tool: every required parameter, each optional one half the time."""
    tool = rng.choice(tools)
    arguments = {}
    for param in schema_to_params(tool.parameters):
        if param.required or rng.random() < 0.5:
            arguments[param.name] = pool.sample(rng, param)
    return ToolCall(tool=tool.name, arguments=arguments)
