"""Task instances from a template, with no model: its query's rows fill its slots.

A slot is `{column}` (or `{column:spec}`, a format spec such as `.2f`) naming a column of the
template's query. In text (instruction, expected answer, facts) a value is written as people read
it (a float without trailing zeros, yes/no for booleans); a tool argument that is exactly
"{column}" gets the row's value itself, converted to the parameter's JSON type. Each instance's
verifier is one line calling the template's function with the row (`params`), so verifiers.py
grows by a line per instance, not by a verifier body.

Two instances are the same task when they make the same state-changing calls (write tasks), or the
same calls and ask for the same facts (read tasks), whatever their wording, or when their instructions
read the same once case and punctuation are ignored: only the first is kept. Instances of one template that differ only in a
name but do the same thing fall out here; instances that act on other records, or ask about them,
differ in meaning even when their sentences differ in one word (which is why this is not an
embedding-similarity test: every instance of a template is a near-paraphrase of the others).
"""

from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass, field
from typing import Any

from synth.artifacts import Fact, Task, TaskTemplate, ToolCall, ToolSpec
from synth.folder.database import open_bytes
from synth.folder.rules import InvariantError, run_query
from synth.use.replay import canonical

MAX_QUERY_ROWS = 2000  # rows of a template's query read at most
# format specs a slot may use (bounded width); 'g' drops a float's needless zeros (6.0 -> "6"), which
# real-model templates used for amounts and hours
_SPEC_RE = re.compile(r"^[<>^]?[+-]?\d{0,2},?(\.\d)?[dfgs%]?$")
_WHOLE_SLOT = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")


class SlotError(ValueError):
    """A template's text names a slot badly or one its row does not have."""


def shown(value: Any) -> str:
    """A value as text reads it: 4.5 -> "4.5", 5.0 -> "5", True -> "yes", None -> ""."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".") if value == value else str(value)
    return str(value)


class _Slots(string.Formatter):
    """str.format over a row with no attribute or index access and bounded format specs."""

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> tuple[Any, str]:
        if field_name not in kwargs:
            raise SlotError(f"{{{field_name}}} is not a column of the query")
        return kwargs[field_name], field_name

    def format_field(self, value: Any, format_spec: str) -> str:
        if not format_spec:
            return shown(value)
        if not _SPEC_RE.match(format_spec):
            raise SlotError(f"format spec {format_spec!r} is not allowed (use .2f, g, d, ',' or none)")
        try:
            return format(value, format_spec)
        except (TypeError, ValueError) as exc:
            raise SlotError(f"format spec {format_spec!r} does not fit the value {value!r}: {exc}") from None

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion:
            raise SlotError("slots take no !conversion")
        return value


def slot_names(text: str) -> list[str]:
    """The columns a text's slots name, in order (raises SlotError for attribute or index access)."""
    names = []
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise SlotError(f"{text[:80]!r}: {exc} (write a literal brace as {{{{ or }}}})") from None
    for _, name, _, _ in parsed:
        if name is None:
            continue
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SlotError(f"{{{name}}}: a slot is one column name, e.g. {{guest_name}}")
        names.append(name)
    return names


def fill(text: str, row: dict[str, Any]) -> str:
    try:
        return _Slots().vformat(text, (), row)
    except (ValueError, KeyError, IndexError) as exc:
        raise SlotError(str(exc)) from None


def _typed(value: Any, prop: dict[str, Any]) -> Any:
    """A row's value as the parameter's JSON type asks (the text of a number for a string parameter)."""
    kind = prop.get("type")
    if kind == "string":
        return value if isinstance(value, str) else shown(value)
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    if kind == "number" and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "boolean" and value in (0, 1):
        return bool(value)
    return value


def fill_argument(value: Any, row: dict[str, Any], prop: dict[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _WHOLE_SLOT.match(value.strip())
        if whole and whole.group(1) in row:
            return _typed(row[whole.group(1)], prop)
        return _typed(fill(value, row), prop) if "{" in value else value
    if isinstance(value, list):
        return [fill_argument(v, row, prop.get("items") or {}) for v in value]
    return value


def fill_calls(actions: list[ToolCall], row: dict[str, Any], tools: dict[str, ToolSpec]) -> list[ToolCall]:
    calls = []
    for action in actions:
        props = (tools[action.tool].parameters.get("properties") or {}) if action.tool in tools else {}
        calls.append(ToolCall(tool=action.tool, arguments={k: fill_argument(v, row, props.get(k) or {})
                                                           for k, v in action.arguments.items()}))
    return calls


def template_slots(template: TaskTemplate) -> set[str]:
    """Every column a template's texts and arguments name."""
    names = set(slot_names(template.instruction)) | set(slot_names(template.expected_answer))
    for fact in template.facts or []:
        names |= set(slot_names(fact.value))

    def walk(value: Any) -> None:
        if isinstance(value, str):
            names.update(slot_names(value))
        elif isinstance(value, list):
            for v in value:
                walk(v)

    for action in template.actions:
        for value in action.arguments.values():
            walk(value)
    return names


def query_rows(db_bytes: bytes, sql: str, limit: int = MAX_QUERY_ROWS) -> list[dict[str, Any]]:
    """The rows of a template's query as dicts (raises InvariantError when it is not one reading query)."""
    conn = open_bytes(db_bytes, readonly=True)
    try:
        names, rows = run_query(conn, sql, limit)
    finally:
        conn.close()
    if len(set(names)) != len(names):
        raise InvariantError(f"the query returns two columns of the same name ({', '.join(names)}); alias them")
    return [dict(zip(names, r)) for r in rows]


def usable(row: dict[str, Any], needed: set[str]) -> str | None:
    """Why a row cannot be an instance's bindings (None when it can)."""
    for name in sorted(needed):
        value = row.get(name)
        if value is None:
            return f"its {name} is NULL"
    for name, value in row.items():
        if isinstance(value, bytes):
            return f"its {name} is a blob"
        if isinstance(value, float) and not math.isfinite(value):
            return f"its {name} is not a finite number"
    return None


def call_line(template: TaskTemplate, row: dict[str, Any]) -> str:
    """An instance's verifier body: its template's function with the instance's bindings."""
    return f"return {template.function}(initial_db, final_db, answer, {row!r})"


def standalone_body(template: TaskTemplate, bindings: dict[str, Any]) -> str:
    """The template's body with an instance's bindings, runnable on its own (for readers and exports
    that take one function per task)."""
    return f"params = {bindings!r}\n{template.verifier_body.strip()}"


def instance(template: TaskTemplate, row: dict[str, Any], number: int, tools: dict[str, ToolSpec]) -> Task:
    """The task that `row` (the query's row `number`, from 1) makes of `template` (raises SlotError)."""
    facts = None
    if template.facts is not None:  # two slots may hold the same value in a row ("3 sessions on 3 boats"): once
        filled = {}
        for f in template.facts:
            value = fill(f.value, row)
            filled.setdefault((value.casefold(), f.kind), Fact(value=value, kind=f.kind))
        facts = list(filled.values())
    return Task(task_id=f"{template.template_id}_{number:03d}", instruction=fill(template.instruction, row),
                kind=template.kind, difficulty=template.difficulty, split=template.split,
                gold=fill_calls(template.actions, row, tools), expected_answer=fill(template.expected_answer, row),
                verifier=f"verify_{template.template_id}_{number:03d}", facts=facts,
                free_columns=list(template.free_columns) if template.free_columns is not None else None,
                template_id=template.template_id, bindings=dict(row))


def meaning_key(task: Task, writes: set[str]) -> str:
    """What a task asks for: a write task, its state-changing calls (the lookups before them are the
    way there, not the request); a read task, its calls and the facts its answer states."""
    if task.kind == "write":
        return canonical(["write", [[c.tool, c.arguments] for c in task.gold if c.tool in writes]])
    return canonical(["read", [[c.tool, c.arguments] for c in task.gold], sorted(f.value for f in task.facts or [])])


def text_key(instruction: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", instruction.lower()))


@dataclass
class Seen:
    """The tasks already kept (the env's own and earlier instances), by meaning and by wording."""

    writes: set[str] = field(default_factory=set)  # the env's state-changing tools
    meanings: dict[str, str] = field(default_factory=dict)  # key -> task id
    texts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: list[Task], tools: dict[str, ToolSpec]) -> "Seen":
        seen = cls(writes={name for name, t in tools.items() if not t.read_only})
        for task in tasks:
            seen.add(task)
        return seen

    def duplicate_of(self, task: Task) -> str | None:
        return self.meanings.get(meaning_key(task, self.writes)) or self.texts.get(text_key(task.instruction))

    def add(self, task: Task) -> None:
        self.meanings.setdefault(meaning_key(task, self.writes), task.task_id)
        self.texts.setdefault(text_key(task.instruction), task.task_id)


@dataclass
class Made:
    """What instantiating one template gave: new instances, and rows it passed over with the reason."""

    tasks: list[Task] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)  # row number -> why
    rows_used: int = 0  # the template's rows_used after this
    error: str | None = None  # the query could not run


def instantiate(template: TaskTemplate, db_bytes: bytes, tools: dict[str, ToolSpec], seen: Seen,
                limit: int) -> Made:
    """Up to `limit` new instances from the rows after the template's `rows_used`; duplicates of
    tasks in `seen` (updated) are passed over."""
    made = Made(rows_used=template.rows_used)
    try:
        rows = query_rows(db_bytes, template.query)
        needed = template_slots(template)
    except (InvariantError, SlotError) as exc:
        made.error = str(exc)
        return made
    for number, row in enumerate(rows[template.rows_used:], template.rows_used + 1):
        if len(made.tasks) >= limit:
            break
        made.rows_used = number
        why = usable(row, needed)
        if why is None:
            try:
                task = instance(template, row, number, tools)
            except SlotError as exc:
                why = str(exc)
            else:
                twin = seen.duplicate_of(task)
                if twin is None:
                    seen.add(task)
                    made.tasks.append(task)
                    continue
                why = f"the same task as {twin}"
        made.skipped[number] = why
    return made
