"""The context every model call about one env shares, and the data it is shown.

`EnvContext.messages(prompt, ...)` puts the env's shared context (scenario,
today's date, the signed-in user, the schema, the business rules, the tool
list) in the system message, rendered from templates/prompts/env_context.j2,
and the stage's own request in the user message. The system message is
byte-identical across an env's calls once those facts exist, so provider
prompt caching (OpenAI prefix caching, Anthropic cache_control) serves it.

Data shown to a model is cut by rows, never mid-value or mid-JSON, every table
is represented, and a cut says what was left out.
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass, field
from typing import Any

from synth.artifacts import ActingUser, Rules, Scenario, ToolSpec
from synth.folder.database import open_bytes, split_statements, table_columns, user_tables
from synth.folder.format import DEFAULT_TODAY, TOOL_IMPORTS, EnvDraft, render_tools_py
from synth.folder.toolschema import PY_TYPES, schema_to_params
from synth.pipeline.prompts import render_prompt, render_template

MAX_VALUE_CHARS = 160  # a longer text value (a note) is shortened with '...'
DUMP_ROWS = 40  # rows per table in a data dump
DUMP_CHARS = 24_000  # a whole dump; past it, tables keep fewer rows (at least SAMPLE_MIN)
SAMPLE_MIN = 1


def long_date(iso: str) -> str:
    """'2025-06-02' -> '2025-06-02 (Monday)'."""
    try:
        return f"{iso} ({datetime.date.fromisoformat(iso):%A})"
    except ValueError:
        return iso


@dataclass
class EnvContext:
    scenario: Scenario
    today: str = DEFAULT_TODAY
    schema_sql: str = ""
    acting_user: ActingUser | None = None
    rules: Rules | None = None
    tools: list[ToolSpec] = field(default_factory=list)

    @classmethod
    def of(cls, draft: EnvDraft, *, tools: bool = True) -> "EnvContext":
        return cls(scenario=draft.scenario, today=draft.today, schema_sql=draft.schema_sql.strip(),
                   acting_user=draft.acting_user, rules=draft.rules, tools=list(draft.tools) if tools else [])

    def system(self) -> str:
        return render_template("prompts", "env_context.j2", scenario=self.scenario, today=long_date(self.today),
                               acting_user=self.acting_user, schema_sql=tables_only(self.schema_sql),
                               transitions=transition_lines(self.rules), invariants=self.rules.invariants
                               if self.rules else [], tools=[tool_line(t) for t in self.tools]).strip()

    def messages(self, prompt: str, **variables: Any) -> list[dict[str, str]]:
        """[system: the shared env context, user: templates/prompts/<prompt>.j2]."""
        user = render_prompt(prompt, today=long_date(self.today), today_iso=self.today,
                             acting_user=self.acting_user, **variables)
        text = "\n\n".join(m["content"] for m in user)
        return [{"role": "system", "content": self.system()}, {"role": "user", "content": text}]


def tables_only(schema_sql: str) -> str:
    """The DDL without its CREATE INDEX statements (indexes change no answer a model gives)."""
    kept = [st.strip().rstrip(";") + ";" for st in split_statements(schema_sql)
            if not re.match(r"\s*CREATE\s+(UNIQUE\s+)?INDEX\b", st, re.I)]
    return "\n".join(kept)


def transition_lines(rules: Rules | None) -> list[str]:
    lines = []
    for rule in (rules.transitions if rules else []):
        moves = "; ".join(f"{state} -> {', '.join(nxt) if nxt else '(final)'}" for state, nxt in rule.allowed.items())
        lines.append(f"{rule.table}.{rule.column}: {moves}")
    return lines


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of a description (the shared context lists every tool; code shows the rest)."""
    text = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(\s|$)", text)
    head = match.group(1) if match else text
    return head if len(head) <= limit else head[: limit - 3].rstrip() + "..."


def tool_line(tool: ToolSpec) -> str:
    params = []
    for p in schema_to_params(tool.parameters):
        kind = PY_TYPES[p.type] + (f"[{PY_TYPES[p.items]}]" if p.type == "array" and p.items else "")
        enum = f" in {p.enum}" if p.enum else ""
        params.append(f"{p.name}{'' if p.required else '?'}: {kind}{enum}")
    mode = "read-only" if tool.read_only else "changes data"
    return f"{tool.name}({', '.join(params)}) [{mode}]: {first_sentence(tool.description)}"


# --------------------------------------------------------------------------- data shown to models


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 3] + "..."


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def data_dump(db_bytes: bytes, tables: list[str] | None = None, *, rows: int = DUMP_ROWS,
              limit: int = DUMP_CHARS, prefer: dict[str, list[int]] | None = None) -> str:
    """Tables as `table (n rows): col | col` and rows `  v | v`, cut by rows, never mid-row.

    `tables` picks which tables get rows (default: all); the others are listed with their
    columns and row count only. `prefer` ({table: rowids}, e.g. the rows a task names) are shown
    first and are never cut; the other rows fill up to `rows` per table. When the dump would pass
    `limit` characters, every table keeps fewer of its other rows (never fewer than SAMPLE_MIN),
    and each cut says how many rows were left out."""
    prefer = prefer or {}
    conn = open_bytes(db_bytes, readonly=True)
    try:
        names = user_tables(conn)
        shown = set(names if tables is None else tables) | {t for t in prefer if t in names}
        blocks: dict[str, tuple[str, list[str], int, int]] = {}
        for table in names:
            count = conn.execute(f"SELECT count(*) FROM {_quoted(table)}").fetchone()[0]
            head = f"{table} ({count} rows): " + " | ".join(table_columns(conn, table))
            body: list[str] = []
            first = 0
            if table in shown:
                wanted = ", ".join(str(int(i)) for i in prefer.get(table, []))
                picked = conn.execute(f"SELECT * FROM {_quoted(table)} WHERE rowid IN ({wanted}) ORDER BY rowid"
                                      ).fetchall() if wanted else []
                others = conn.execute(f"SELECT * FROM {_quoted(table)}" + (f" WHERE rowid NOT IN ({wanted})"
                                      if wanted else "") + f" LIMIT {max(0, rows - len(picked))}").fetchall()
                body = ["  " + " | ".join(_cell(v) for v in r) for r in [*picked, *others]]
                first = len(picked)
            blocks[table] = (head, body, count, first)
    finally:
        conn.close()
    keep = rows
    while keep > SAMPLE_MIN and _size(blocks, keep) > limit:
        keep = max(SAMPLE_MIN, keep // 2)
    parts = []
    for table in names:
        head, body, count, first = blocks[table]
        if table not in shown:
            parts.append(head + "  (rows not shown here)")
            continue
        kept = body[:max(keep, first)]
        lines = [head, *kept]
        if count > len(kept):
            lines.append(f"  ... {count - len(kept)} more rows not shown")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _size(blocks: dict[str, tuple[str, list[str], int, int]], keep: int) -> int:
    return sum(len(h) + sum(len(r) + 1 for r in b[:max(keep, first)]) for h, b, _, first in blocks.values())


def sample_rows(db_bytes: bytes, per_table: int = 3, limit: int = 6000) -> str:
    """A few rows of every table as JSON (values as stored), cut by rows: every table keeps
    at least one row; long text values are shortened inside their JSON string."""
    conn = open_bytes(db_bytes, readonly=True)
    try:
        tables = {t: (conn.execute(f"SELECT count(*) FROM {_quoted(t)}").fetchone()[0],
                      [dict(r) for r in conn.execute(f"SELECT * FROM {_quoted(t)} LIMIT {per_table}")])
                  for t in user_tables(conn)}
    finally:
        conn.close()

    def render(keep: int) -> str:
        lines = []
        for table, (count, rows) in tables.items():
            shown = [{k: (v[:MAX_VALUE_CHARS] + "..." if isinstance(v, str) and len(v) > MAX_VALUE_CHARS else v)
                      for k, v in r.items()} for r in rows[:keep]]
            lines.append(f"{table} ({count} rows): " + json.dumps(shown, ensure_ascii=False))
        return "\n".join(lines)

    keep = per_table
    text = render(keep)
    while keep > 1 and len(text) > limit:
        keep -= 1
        text = render(keep)
    return text


# --------------------------------------------------------------------------- what a task or a tool touches


def tables_in_code(code: str, tables: list[str]) -> list[str]:
    """Tables whose name appears as a word in `code` (a tool body's SQL)."""
    return [t for t in tables if re.search(rf"(?<![A-Za-z0-9_]){re.escape(t)}(?![A-Za-z0-9_])", code, re.I)]


def foreign_neighbours(db_bytes: bytes, tables: set[str]) -> set[str]:
    """`tables` plus the tables they reference and the tables that reference them."""
    conn = open_bytes(db_bytes, readonly=True)
    try:
        names = user_tables(conn)
        links = [(t, r[2]) for t in names for r in conn.execute(f"PRAGMA foreign_key_list({_quoted(t)})")]
    finally:
        conn.close()
    lowered = {t.lower() for t in tables}
    out = set(tables)
    for child, parent in links:
        if child.lower() in lowered:
            out.add(next((n for n in names if n.lower() == parent.lower()), parent))
        if parent.lower() in lowered:
            out.add(child)
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower())}


def tables_for_text(db_bytes: bytes, text: str) -> set[str]:
    """Tables a request is about: named in it (singular or plural), or holding a value it quotes
    (a name, code, email or date of at least 3 characters)."""
    words = _words(text)
    lowered = text.lower()
    conn = open_bytes(db_bytes, readonly=True)
    try:
        found = set()
        for table in user_tables(conn):
            parts = table.lower().split("_")
            stems = {p.rstrip("s") for p in parts} | set(parts)
            if any(w in words or w.rstrip("s") in {x.rstrip("s") for x in words} for w in stems if len(w) > 2):
                found.add(table)
                continue
            for column in table_columns(conn, table):
                rows = conn.execute(f"SELECT DISTINCT {_quoted(column)} FROM {_quoted(table)} "
                                    f"WHERE typeof({_quoted(column)}) = 'text' LIMIT 500").fetchall()
                if any(len(v) >= 3 and v.lower() in lowered for (v,) in rows if isinstance(v, str)):
                    found.add(table)
                    break
        return found
    finally:
        conn.close()


def tools_source(draft: EnvDraft, names: list[str] | None = None) -> str:
    """tools.py of the draft, or of the named tools only (the module frame included)."""
    tools = draft.tools if names is None else [t for t in draft.tools if t.name in set(names)]
    bodies = {t.name: draft.tool_bodies.get(t.name, "") for t in tools}
    return render_tools_py(draft.env_id, draft.title, tools, bodies)


def tool_source(draft: EnvDraft, name: str, body: str | None = None) -> str:
    """The rendered function of one tool (def line, docstring, body), without the module frame."""
    tool = next(t for t in draft.tools if t.name == name)
    bodies = {name: draft.tool_bodies.get(name, "") if body is None else body}
    module = render_tools_py(draft.env_id, draft.title, [tool], bodies)
    return module[module.index(f"def {name}("):].rstrip() + "\n"


def imports_line() -> str:
    return ", ".join(line.split()[-1] for line in TOOL_IMPORTS if line.startswith("import "))
