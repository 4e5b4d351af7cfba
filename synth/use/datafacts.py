"""Facts of the initial data that rewards and probes share: distinct values per column, the
columns a record can be found by, and the facts an expected answer gives (the database texts it
quotes and its numbers), found with no model and no env code."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from synth.folder.database import open_bytes, table_columns, user_tables


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def number_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if value != int(value) else f"{int(value)}"
    return str(value)


@dataclass
class DataIndex:
    """Distinct values of the initial data by column, and the keys a record can be found by."""

    columns: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    keys: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # column name -> [(table, column)]
    pk: dict[str, str] = field(default_factory=dict)  # table -> single-column primary key

    @classmethod
    def of(cls, db: bytes) -> "DataIndex":
        index = cls()
        conn = open_bytes(db, readonly=True)
        try:
            for table in user_tables(conn):
                info = conn.execute(f"PRAGMA table_info({_q(table)})").fetchall()
                pk = [r[1] for r in info if r[5] > 0]
                unique = [c for c in pk if len(pk) == 1]
                for idx in conn.execute(f"PRAGMA index_list({_q(table)})").fetchall():
                    if idx[2]:  # unique
                        cols = [r[2] for r in conn.execute(f"PRAGMA index_info({_q(idx[1])})").fetchall()]
                        if len(cols) == 1:
                            unique.append(cols[0])
                if len(pk) == 1:
                    index.pk[table] = pk[0]
                for column in table_columns(conn, table):
                    values = [r[0] for r in conn.execute(
                        f"SELECT DISTINCT {_q(column)} FROM {_q(table)} WHERE {_q(column)} IS NOT NULL "
                        f"ORDER BY {_q(column)}")]
                    index.columns[(table, column)] = values
                    if column in unique:
                        index.keys.setdefault(column.lower(), []).append((table, column))
        finally:
            conn.close()
        return index

    def record_column(self, name: str, value: Any) -> tuple[str, str] | None:
        """The (table, column) an argument names a record by: a unique column of that name holding the
        value, or for `<thing>_id` the primary key of the table of things."""
        for table, column in self.keys.get(name.lower(), []):
            if value in self.columns[(table, column)]:
                return table, column
        m = re.fullmatch(r"(.*?)_?id", name.lower())
        if m is None or isinstance(value, bool) or not isinstance(value, int):
            return None
        stem = m.group(1)
        for table in (stem, stem + "s", stem + "es", stem[:-1] + "ies" if stem.endswith("y") else stem):
            column = self.pk.get(table)
            if column and value in self.columns[(table, column)]:
                return table, column
        return None

    def others(self, where: tuple[str, str], value: Any) -> list[Any]:
        """Other values of the column, nearest first (by distance for numbers, by order for text)."""
        values = [v for v in self.columns[where] if v != value]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return sorted((v for v in values if isinstance(v, (int, float))), key=lambda v: (abs(v - value), v))
        ordered = sorted(self.columns[where], key=str)
        pos = ordered.index(value) if value in ordered else 0
        return sorted(values, key=lambda v: (abs(ordered.index(v) - pos), str(v)))


def word_in(value: str, text: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(value.lower())}(?![A-Za-z0-9])", text.lower()) is not None


_NUMBER = re.compile(r"(?<![\w.-])\d+(?:,\d{3})*(?:\.\d+)?(?![\w-]|\.\d)")


def decimal_of(text: str) -> Decimal | None:
    try:
        return Decimal(text.replace(",", ""))
    except InvalidOperation:
        return None


def answer_facts(expected: str, instruction: str, index: DataIndex) -> list[tuple[str, list[tuple[str, str]]]]:
    """The facts an expected answer gives that the instruction does not: database texts it quotes
    (with the columns holding them, longest first) and its numbers (with the numeric columns holding
    them, or none for computed numbers)."""
    facts: list[tuple[str, list[tuple[str, str]]]] = []
    texts: dict[str, list[tuple[str, str]]] = {}
    for where, values in index.columns.items():
        for v in values:
            if isinstance(v, str) and len(v.strip()) >= 3 and not v.strip().isdigit() and word_in(v.strip(), expected) \
                    and not word_in(v.strip(), instruction):
                texts.setdefault(v.strip(), []).append(where)
    for text in sorted(texts, key=lambda t: (-len(t), t)):
        if not any(word_in(text, f) for f, _ in facts):  # "Nair" is part of "Dr. Priya Nair"
            facts.append((text, texts[text]))
    covered = " ".join(f for f, _ in facts)
    for m in _NUMBER.finditer(expected):
        number = decimal_of(m.group(0))
        if number is None or word_in(m.group(0), instruction) or word_in(m.group(0), covered):
            continue
        if any(m.start() >= s and m.end() <= e for s, e in _date_spans(expected)):
            continue
        where = [w for w, values in index.columns.items()
                 if any(isinstance(v, (int, float)) and not isinstance(v, bool) and Decimal(str(v)) == number
                        for v in values)]
        if not any(f == m.group(0) for f, _ in facts):
            facts.append((m.group(0), where))
    return facts


def _date_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2})?|\d{1,2}:\d{2}", text)]


def as_number(text: str) -> Any:
    number = decimal_of(text)
    if number is None:
        return text
    return int(number) if number == number.to_integral_value() else float(number)


