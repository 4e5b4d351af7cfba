"""What decides a task's state reward: the facts a read task's answer must state, and the columns a
write task leaves free.

Read tasks carry `Task.facts` (the gold stage names them): the values the question asks for, each
with its kind, apart from the context the expected answer adds ("2 copies can be borrowed (the
library has 3)": the fact is 2). Folders made before them fall back to the facts the expected
answer gives (datafacts.answer_facts: the database texts it quotes and its numbers), less those a
recorded correct answer of the task (verifier_tests.jsonl, "expect": "pass") leaves out.

Write tasks carry `Task.free_columns` ("table.column"): columns the task does not determine (a
reason or note in the agent's own words, a name the user did not give), compared for having been
written where the gold wrote them, not for their text. Without it, a column is free when the gold
wrote into it a text argument of its own: no enum of the tool, not stated in the instruction, not a
value the column already holds, and not a number, date or time.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from typing import Any, Iterable

from synth.artifacts import Fact, Task, ToolSpec
from synth.errors import SynthError
from synth.folder.database import build_database, open_bytes, table_columns, user_tables
from synth.use.datafacts import DataIndex, answer_facts, decimal_of, word_in

SMALL_NUMBERS = 50  # a count may not come with other numbers in 0..this written as digits
FACT_FORMS = {
    "count": (re.compile(r"^\d+$"), "a whole number such as '2'"),
    "money": (re.compile(r"^[-+]?[$\u20ac\u00a3]?\s?\d[\d,]*(?:\.\d+)?$"), "an amount such as '4.75'"),
    "number": (re.compile(r"^[-+]?\d[\d,]*(?:\.\d+)?$"), "a number such as '3.5'"),
    "date": (re.compile(r"^\d{4}-\d{2}-\d{2}$"), "YYYY-MM-DD"),
    "time": (re.compile(r"^\d{2}:\d{2}$"), "HH:MM (24-hour)"),
    "datetime": (re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$"), "YYYY-MM-DD HH:MM"),
}


def fact_problems(facts: list[Fact] | None, expected: str | None, helpers: Any) -> list[str]:
    """What is wrong with a read task's facts: missing, a value not in its kind's form, or not stated
    by the expected answer (checked with the verifiers' own helpers)."""
    if facts is None:
        return ["this is a read task: list in facts the values a correct answer must state ([] only when the "
                "answer states no value, e.g. 'none are overdue')"]
    problems, seen = [], set()
    for fact in facts:
        value = fact.value.strip()
        form = FACT_FORMS.get(fact.kind)
        if not value:
            problems.append(f"fact {fact.kind!r}: the value is empty")
        elif form is not None and not form[0].match(value):
            problems.append(f"fact {value!r}: a {fact.kind} is written as {form[1]}")
        elif fact.kind in ("name", "text") and helpers._kind(value)[0] != "text":
            problems.append(f"fact {value!r}: a {fact.kind} must not be a bare number, date or time; give its kind "
                            f"(count, money, number, date, time or datetime)")
        elif not helpers.mentions(expected, value):
            problems.append(f"fact {value!r}: the expected_answer does not state it; a fact is a value the "
                            "expected_answer gives")
        if value.casefold() in seen:
            problems.append(f"fact {value!r} is listed twice")
        seen.add(value.casefold())
    return problems


def free_column_problems(columns: list[str] | None, schema_sql: str) -> list[str]:
    """free_columns that name no column of the schema."""
    known = schema_columns(schema_sql)
    return [f"free_columns: {c!r} is not a 'table.column' of the schema" for c in columns or []
            if known and c not in known]


@lru_cache(maxsize=8)
def schema_columns(schema_sql: str) -> frozenset[str]:
    """Every "table.column" the DDL creates (none when it does not build)."""
    try:
        conn = open_bytes(build_database(schema_sql, ""), readonly=True)
    except SynthError:
        return frozenset()
    try:
        return frozenset(f"{t}.{c}" for t in user_tables(conn) for c in table_columns(conn, t))
    finally:
        conn.close()


def derived_facts(expected: str, instruction: str, index: DataIndex, correct: Iterable[str],
                  helpers: Any) -> list[Fact]:
    """Facts of a task made before `Task.facts`: what the expected answer gives, less any value a
    recorded correct answer leaves out (incidental context)."""
    out = []
    answers = [a for a in correct if a and a.strip()]
    for value, _ in answer_facts(expected, instruction, index):
        if all(helpers.mentions(a, value) for a in answers):
            number = decimal_of(value)
            kind = "text" if number is None else "money" if re.fullmatch(r"[\d,]+\.\d{2}", value) else \
                "count" if number == number.to_integral_value() else "number"
            out.append(Fact(value=value, kind=kind))
    return out


def _columns_holding(index: DataIndex, value: str, numeric: bool) -> list[tuple[str, str]]:
    if numeric:
        number = decimal_of(re.sub(r"[\s$\u20ac\u00a3+]", "", value))
        if number is None:
            return []
        return [w for w, values in index.columns.items()
                if any(isinstance(v, (int, float)) and not isinstance(v, bool) and Decimal(str(v)) == number
                       for v in values)]
    value = value.strip()
    return [w for w, values in index.columns.items() if any(isinstance(v, str) and v.strip() == value for v in values)]


def wrong_values(facts: list[Fact], expected: str, instruction: str, index: DataIndex, helpers: Any) -> list[Any]:
    """Values an answer may not assert (unless it denies them), the expected answer's own aside:
    - for a count, the other small numbers written as digits ("1 2 3"; "one of 2 copies" is fine);
    - for an amount, the other values of the columns holding it, written as amounts ("$2.00", not "2 fines");
    - for a date, time, name, id or text, the other values of the columns holding it;
    - for every database text the expected answer quotes (the context too), the other values of its columns,
      so listing every candidate fails.
    A plain number (a computed quantity) adds none: hedges and dumps of numbers are caught apart."""
    wrong: list[Any] = []
    for fact in facts:
        if fact.kind == "count":
            number = decimal_of(fact.value)
            wrong += [{"value": n, "kind": "count"} for n in range(SMALL_NUMBERS + 1) if n != number]
        elif fact.kind == "money":
            wrong += [{"value": v, "kind": "money"} for c in _columns_holding(index, fact.value, True)
                      for v in index.columns[c]]
        elif fact.kind != "number":
            wrong += [v for c in _columns_holding(index, fact.value, False) for v in index.columns[c]]
    for value, where in answer_facts(expected, instruction, index):
        if decimal_of(value) is None:
            wrong += [v for c in where for v in index.columns[c]]
    right = [f.value for f in facts]
    shown = {str(v).strip().casefold() for v in right}
    candidates = [w for w in wrong if str(w.get("value") if isinstance(w, dict) else w).strip().casefold() not in shown]
    said = helpers.answer_facts(expected, right, candidates)["wrong"]  # what the expected answer itself asserts
    out: list[Any] = []
    for w in candidates:
        if w not in said and w not in out:
            out.append(w)
    return out


def written_columns(diff: dict[str, Any]) -> dict[str, list[Any]]:
    """{"table.column": [values written]} of a state diff (synth.use.replay.state_diff)."""
    out: dict[str, list[Any]] = {}
    for table, change in diff.items():
        for row in change.get("added", []):
            for column, value in row.items():
                out.setdefault(f"{table}.{column}", []).append(value)
        for row in change.get("changed", []):
            for column in row["columns"]:
                out.setdefault(f"{table}.{column}", []).append(row["after"].get(column))
    return out


def default_free_columns(task: Task, tools: list[ToolSpec], index: DataIndex, diff: dict[str, Any],
                         helpers: Any) -> list[str]:
    """The columns a write task of a folder without `free_columns` leaves free (see the module's doc)."""
    specs = {t.name: t for t in tools}
    invented = set()
    for call in task.gold:
        enums = (specs[call.tool].parameters.get("properties", {}) if call.tool in specs else {})
        for name, value in call.arguments.items():
            if isinstance(value, str) and value.strip() and not (enums.get(name) or {}).get("enum") \
                    and helpers._kind(value)[0] == "text" and not word_in(value.strip(), task.instruction):
                invented.add(value.strip())
    free = []
    for column, values in written_columns(diff).items():
        table, name = column.split(".", 1)
        before = index.columns.get((table, name), [])
        if values and all(isinstance(v, str) and v.strip() in invented and v not in before for v in values):
            free.append(column)
    return sorted(free)
