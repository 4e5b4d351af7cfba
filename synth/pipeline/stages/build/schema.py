"""Stage `schema`: SQLite DDL for the scenario and its tasks, with the business
rules (rules.json) and the table of the signed-in user, validated by running them.

Model calls: stage "schema", subject = the scenario's env_id (first answer
and every repair round). The DDL is executed statement by statement on an
empty in-memory database with foreign keys on; each failing statement and
SQLite's message, plus foreign keys that point at missing tables or at columns
that are not a primary key or UNIQUE (SQLite only notices those at the first
INSERT), go back to the model for up to settings.build_repair_rounds repairs.
So do rules that do not fit the schema: an invariant whose SQL does not run,
a status column with no transitions, a transition naming a value its CHECK
constraint does not allow, a signed-in user's table that does not exist.
"""

from __future__ import annotations

import re
import sqlite3

from dataclasses import dataclass

from synth.artifacts import Rules, Scenario, SchemaAnswer, Task, Transition
from synth.folder.database import run_script, split_statements, table_columns, user_tables
from synth.folder.rules import invariant_problems, status_columns, transition_problems
from synth.llm import Gateway
from synth.pipeline.prompts import render_prompt
from synth.pipeline.stages.envcontext import long_date
from synth.pipeline.stages.repair import StageReport, generate_until_valid

STAGE = "schema"
MIN_TABLES = 3
MAX_TABLES = 16  # every table costs data, tools, tests and prompt tokens; the prompt asks for 8-14
_DDL_RE = re.compile(r"^\s*CREATE\s+(TABLE|(UNIQUE\s+)?INDEX)\b", re.IGNORECASE)


def empty_database() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def strip_sql_comments(statement: str) -> str:
    lines = [line for line in statement.splitlines() if not line.strip().startswith("--")]
    return re.sub(r"/\*.*?\*/", " ", "\n".join(lines), flags=re.DOTALL)


def foreign_key_problems(conn: sqlite3.Connection) -> list[str]:
    """Foreign keys SQLite accepts at CREATE time but rejects at the first INSERT."""
    tables = {t.lower(): t for t in user_tables(conn)}
    problems = []
    for table in tables.values():
        for fk in conn.execute(f'PRAGMA foreign_key_list("{table}")').fetchall():
            parent, child_col, parent_col = fk[2], fk[3], fk[4]
            where = f"table {table}: FOREIGN KEY ({child_col}) REFERENCES {parent}"
            if parent.lower() not in tables:
                problems.append(f"{where}: table {parent!r} does not exist")
                continue
            parent = tables[parent.lower()]
            info = conn.execute(f'PRAGMA table_info("{parent}")').fetchall()
            columns = {r[1].lower() for r in info}
            pk = [r[1].lower() for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
            if parent_col is None:
                if not pk:
                    problems.append(f"{where}: {parent} has no PRIMARY KEY to reference; name the column")
                continue
            if parent_col.lower() not in columns:
                problems.append(f"{where}({parent_col}): {parent} has no column {parent_col!r}")
            elif [parent_col.lower()] != pk and not _has_unique_index(conn, parent, parent_col):
                problems.append(f"{where}({parent_col}): {parent}.{parent_col} is neither the PRIMARY KEY nor "
                                "UNIQUE, so SQLite will refuse every insert (foreign key mismatch)")
    return problems


def _has_unique_index(conn: sqlite3.Connection, table: str, column: str) -> bool:
    for index in conn.execute(f'PRAGMA index_list("{table}")').fetchall():
        if index[2]:  # unique
            cols = [r[2] for r in conn.execute(f'PRAGMA index_info("{index[1]}")').fetchall()]
            if [c.lower() for c in cols if c] == [column.lower()]:
                return True
    return False


def schema_problems(ddl: str) -> list[str]:
    """Everything wrong with `ddl`, found by running it on an empty database ([] when clean)."""
    statements = split_statements(ddl)
    problems = [
        f"statement {i}: only CREATE TABLE and CREATE INDEX are allowed here, got: {' '.join(s.split())[:120]}"
        for i, s in enumerate(statements, 1) if not _DDL_RE.match(strip_sql_comments(s))
    ]
    if problems:
        return problems
    conn = empty_database()
    try:
        problems += [str(e) for e in run_script(conn, ddl)]
        tables = user_tables(conn)
        if len(tables) < MIN_TABLES:
            problems.append(f"the schema creates {len(tables)} table(s); model the application with at least "
                            f"{MIN_TABLES} related tables")
        if len(tables) > MAX_TABLES:
            problems.append(f"the schema creates {len(tables)} tables; keep it to at most {MAX_TABLES}: fold small "
                            "lookup tables into CHECK lists and merge tables that describe the same thing")
        problems += foreign_key_problems(conn)
    finally:
        conn.close()
    return problems


def to_rules(answer: SchemaAnswer) -> Rules:
    return Rules(invariants=answer.invariants, transitions=[
        Transition(table=t.table, column=t.column, allowed={c.state: list(c.next) for c in t.allowed})
        for t in answer.transitions])


def answer_problems(answer: SchemaAnswer) -> list[str]:
    """Problems of the DDL and, once it runs, of the rules and the signed-in user's table."""
    problems = schema_problems(answer.ddl)
    if problems:
        return problems
    conn = empty_database()
    try:
        run_script(conn, answer.ddl)
        tables = {t.lower(): t for t in user_tables(conn)}
        if answer.acting_user_table is not None and answer.acting_user_table.lower() not in tables:
            problems.append(f"acting_user_table {answer.acting_user_table!r} is not a table of the schema")
        problems += transition_problems(conn, to_rules(answer).transitions)
        problems += invariant_problems(conn, answer.invariants)
    finally:
        conn.close()
    return problems


@dataclass
class SchemaResult:
    ddl: str
    rules: Rules
    acting_table: str | None  # the table of the signed-in user (its row is picked in the data stage)
    acting_role: str


async def generate_schema(
    scenario: Scenario, tasks: list[Task], gateway: Gateway, *, rounds: int, report: StageReport,
    sample: int = 0, today: str,
) -> SchemaResult:
    """The scenario's DDL and rules, executed clean; raises StageFailed when repairs run out."""
    messages = render_prompt("schema", scenario=scenario, tasks=tasks, today=long_date(today))
    answer = await generate_until_valid(
        gateway, SchemaAnswer, messages, stage=STAGE, subject=scenario.env_id,
        validate=answer_problems, repair_prompt="schema_repair", rounds=rounds,
        report=report, sample=sample,
    )
    conn = empty_database()
    try:
        run_script(conn, answer.ddl)
        tables = {t.lower(): t for t in user_tables(conn)}
        report.details["status_columns"] = [f"{t}.{c}" for t, c, _ in status_columns(conn)]
        report.details["tables"] = {t: len(table_columns(conn, t)) for t in tables.values()}
    finally:
        conn.close()
    rules = to_rules(answer)
    report.details["invariants"] = len(rules.invariants)
    acting = tables.get(answer.acting_user_table.lower()) if answer.acting_user_table else None
    return SchemaResult(answer.ddl.strip() + "\n", rules, acting, answer.acting_user_role.strip())
