"""Stage `data`: INSERT statements that make the tasks possible and obey the rules,
validated by building the database and running the invariants.

The tables are filled in groups, parents before children, each group sized so
its answer fits the stage's output budget (an answer cut off anyway is split
in two and asked again, never parsed). Model calls: stage "data", subject =
the env_id when one group holds every table, else "<env_id>/<t1>+<t2>+..."
(one conversation per group, with its repair rounds); stage "data_fix",
subject = the env_id, when the built data breaks an invariant.

A group's INSERTs run after the DDL and the earlier groups' rows with PRAGMA
foreign_keys=ON; foreign_key_check and integrity_check must be clean. Failing
statements with SQLite's message go back to the model, and a foreign-key
failure is explained row by row (SQLite itself only says "FOREIGN KEY
constraint failed"). The group holding the signed-in user's table also names
that user's row. Then every invariant of the rules runs on the whole database;
the rows breaking one go to a data_fix call that rewrites the tables at fault
(or, with a reason, corrects a rule that was itself wrong).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field

from synth.artifacts import ActingUser, DataAnswer, DataFixAnswer, Invariant, Rules, Scenario, Task
from synth.folder.database import (DatabaseError, build_database, open_bytes, run_script, split_statements,
                                   table_columns, table_counts, user_tables)
from synth.folder.rules import check_invariants
from synth.llm import Gateway
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.envcontext import EnvContext, data_dump, tables_in_code
from synth.pipeline.stages.repair import StageFailed, StageReport, clip, generate_until_valid, in_pieces, problem_list
from synth.pipeline.stages.build.schema import strip_sql_comments

STAGE = "data"
FIX_STAGE = "data_fix"
MAX_FK_DETAILS = 15
ROWS_PLANNED = 12  # rows a main table is expected to get, for sizing groups (the prompt asks for 8-15)
INVARIANT_TURNS = 1  # repair turns a part gets for the invariants its rows break (the final data_fix does the rest)
_INSERT_RE = re.compile(r"^\s*(INSERT|REPLACE)\b", re.IGNORECASE)
_TARGET_RE = re.compile(r"^\s*(?:INSERT|REPLACE)\s+(?:OR\s+\w+\s+)?INTO\s+[\"`\[]?([A-Za-z_][A-Za-z0-9_]*)", re.I)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def foreign_key_details(schema_sql: str, data_sql: str) -> list[str]:
    """Which rows break which foreign key, found by loading everything with foreign keys off."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        run_script(conn, schema_sql)
        run_script(conn, data_sql)
        details = []
        for table, rowid, parent, fkid in conn.execute("PRAGMA foreign_key_check").fetchall()[:MAX_FK_DETAILS]:
            pairs = [(r[3], r[4]) for r in conn.execute(f"PRAGMA foreign_key_list({_quote(table)})").fetchall()
                     if r[0] == fkid]
            cols = [child for child, _ in pairs]
            values = conn.execute(
                f"SELECT {', '.join(_quote(c) for c in cols)} FROM {_quote(table)} WHERE rowid = ?",
                (rowid,)).fetchone() if cols and rowid is not None else None
            shown = ", ".join(f"{c}={v!r}" for c, v in zip(cols, values or []))
            targets = ", ".join(p or "its primary key" for _, p in pairs)
            details.append(f"foreign key: {table} row {rowid} ({shown}) references {parent}({targets}), "
                           f"but no such {parent} row exists; insert that {parent} row first or fix the value")
        return details
    finally:
        conn.close()


def data_problems(schema_sql: str, data_sql: str) -> tuple[list[str], bytes | None]:
    """Problems of building the database from `data_sql`, and its bytes when there are none."""
    statements = split_statements(data_sql)
    if not statements:
        return ["there are no INSERT statements"], None
    problems = [
        f"statement {i}: only INSERT statements are allowed here, got: {' '.join(s.split())[:120]}"
        for i, s in enumerate(statements, 1) if not _INSERT_RE.match(strip_sql_comments(s))
    ]
    if problems:
        return problems, None
    try:
        return [], build_database(schema_sql, data_sql)
    except DatabaseError as exc:
        problems = list(exc.problems)
    if any("FOREIGN KEY constraint failed" in p or "references a missing row" in p for p in problems):
        # The row-level causes first: one bad row fails its whole INSERT and then its children.
        problems = foreign_key_details(schema_sql, data_sql) + problems
    return problems, None


# Columns that date something that already happened (booked_at, created_on, date_paid, ...): never after today.
_PAST_COLUMN_RE = re.compile(
    r"^(?:(?:created|booked|recorded|submitted|paid|issued|received|signed|logged|completed|approved|registered|"
    r"enrolled|requested|cancelled|canceled|returned|attended|placed|ordered|filed|reported|verified|closed|"
    r"resolved|last_updated|updated|modified|changed)_(?:at|on|date|time)|date_(?:created|booked|paid|issued|"
    r"received|submitted|filed|placed|ordered|completed|recorded|reported))$", re.IGNORECASE)
_ISO_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}")
MAX_DATE_PROBLEMS = 8


def future_records(db_bytes: bytes, today: str, tables: list[str] | None = None) -> list[str]:
    """Rows dating something that already happened (a booking's booked_at, a payment's paid_on)
    after the application's today: a record cannot have been made in the future."""
    conn = open_bytes(db_bytes, readonly=True)
    problems: list[str] = []
    try:
        for table in tables if tables is not None else user_tables(conn):
            for column in table_columns(conn, table):
                if not _PAST_COLUMN_RE.match(column):
                    continue
                rows = conn.execute(f"SELECT rowid, {_quote(column)} FROM {_quote(table)} WHERE "
                                    f"typeof({_quote(column)}) = 'text' AND substr({_quote(column)}, 1, 10) > ?",
                                    (today,)).fetchall()
                for rowid, value in rows:
                    if _ISO_DATE_RE.match(value) and len(problems) < MAX_DATE_PROBLEMS:
                        problems.append(f"table {table} row {rowid}: {column} = {value!r} is after today ({today}); "
                                        f"{column} records something that already happened, so it is on or "
                                        "before today (upcoming events go in their own date column)")
    finally:
        conn.close()
    return problems


def sparse_tables(db_bytes: bytes, minimum: int = 3) -> list[str]:
    """Tables with fewer than `minimum` rows (a note for the report, not a failure)."""
    conn = open_bytes(db_bytes, readonly=True)
    try:
        return [f"table {t} has {n} row(s)" for t, n in table_counts(conn).items() if n < minimum]
    finally:
        conn.close()


# --------------------------------------------------------------------------- tables and groups


def table_order(schema_sql: str) -> tuple[list[str], dict[str, int], dict[str, set[str]]]:
    """Tables parents-first (schema order breaks ties), their column counts, and each table's parents."""
    conn = sqlite3.connect(":memory:")
    try:
        run_script(conn, schema_sql)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                            "'sqlite_%' ORDER BY rowid")]
        lower = {n.lower(): n for n in names}
        parents = {n: {lower[r[2].lower()] for r in conn.execute(f"PRAGMA foreign_key_list({_quote(n)})")
                       if r[2].lower() in lower and r[2].lower() != n.lower()} for n in names}
        columns = {n: len(conn.execute(f"PRAGMA table_info({_quote(n)})").fetchall()) for n in names}
    finally:
        conn.close()
    order: list[str] = []
    placing: set[str] = set()

    def place(name: str) -> None:
        if name in order or name in placing:  # placed, or a cycle: schema order decides
            return
        placing.add(name)
        for parent in sorted(parents[name], key=names.index):
            place(parent)
        placing.discard(name)
        order.append(name)

    for name in names:
        place(name)
    return order, columns, parents


def table_cost(columns: int) -> int:
    """Output tokens the INSERTs of one table are expected to take."""
    return 40 + ROWS_PLANNED * (5 * columns + 3)


def statements_by_table(sql: str) -> tuple[dict[str, list[str]], list[str]]:
    """INSERT statements grouped by target table (in order), and statements with no readable target."""
    grouped: dict[str, list[str]] = {}
    unknown = []
    for statement in split_statements(sql):
        match = _TARGET_RE.match(strip_sql_comments(statement))
        if match:
            grouped.setdefault(match.group(1).lower(), []).append(statement.strip().rstrip(";") + ";")
        else:
            unknown.append(statement)
    return grouped, unknown


@dataclass
class DataResult:
    data_sql: str
    db_bytes: bytes
    rules: Rules
    acting_user: ActingUser | None = None
    groups: list[list[str]] = field(default_factory=list)


class DataStage:
    """Fill one env's tables group by group, then hold its invariants."""

    def __init__(self, scenario: Scenario, tasks: list[Task], schema_sql: str, gateway: Gateway, *, rounds: int,
                 report: StageReport, sample: int, rules: Rules, today: str, acting_table: str | None,
                 acting_role: str):
        self.scenario, self.tasks, self.schema_sql, self.gateway = scenario, tasks, schema_sql, gateway
        self.rounds, self.report, self.sample, self.rules = rounds, report, sample, rules
        self.acting_table, self.acting_role = acting_table, acting_role
        self.context = EnvContext(scenario=scenario, today=today, schema_sql=schema_sql, rules=rules)
        self.order, self.columns, self.parents = table_order(schema_sql)
        self.rows: dict[str, list[str]] = {}  # table (lower) -> its INSERT statements
        self.acting_user: ActingUser | None = None

    @property
    def data_sql(self) -> str:
        return "\n".join(s for t in self.order for s in self.rows.get(t.lower(), [])) + "\n"

    async def run(self) -> DataResult:
        limit = planned_tokens(STAGE, self.gateway.settings.max_tokens)
        groups = pack(self.order, {t: table_cost(self.columns[t]) for t in self.order}, limit)
        done = await in_pieces(groups, self._fill, stage=STAGE, report=self.report, what="table rows")
        self.report.details["groups"] = done
        db_bytes = await self._hold_invariants()
        self.report.notes += [clip(n) for n in sparse_tables(db_bytes)]
        if self.acting_table and self.acting_user is None:
            raise StageFailed(STAGE, [f"no signed-in user was named in table {self.acting_table}"], self.report)
        return DataResult(self.data_sql, db_bytes, self.rules, self.acting_user, done)

    # ------------------------------------------------------------------ one group

    def _subject(self, group: list[str], single: bool) -> str:
        return self.scenario.env_id if single else f"{self.scenario.env_id}/{'+'.join(group)}"

    def _partners(self, group: list[str]) -> list[str]:
        """Filled tables the group's rows must agree with: their parents, and the tables an invariant
        ties to the group's tables."""
        wanted = {p for t in group for p in self.parents[t]}
        for inv in self.rules.invariants:
            tables = tables_in_code(inv.sql, self.order)
            if any(t in group for t in tables):
                wanted |= set(tables)
        return sorted((t for t in wanted if t not in group and t.lower() in self.rows), key=self.order.index)

    def _ready_invariants(self, group: list[str]) -> list[Invariant]:
        """The invariants that involve the group and whose tables are all filled once it lands."""
        filled = {t.lower() for t in self.rows} | {t.lower() for t in group}
        out = []
        for inv in self.rules.invariants:
            tables = tables_in_code(inv.sql, self.order)
            if any(t in group for t in tables) and all(t.lower() in filled for t in tables):
                out.append(inv)
        return out

    async def _fill(self, group: list[str], single: bool) -> None:
        partners = self._partners(group)
        before = self.data_sql
        before_bytes = build_database(self.schema_sql, before) if partners else None
        wants_user = self.acting_table in group
        ready = self._ready_invariants(group)
        messages = self.context.messages(
            "data", tasks=self.tasks, group=group, single=single, all_tables=self.order,
            filled=[t for t in self.order if t.lower() in self.rows],
            earlier=data_dump(before_bytes, partners) if before_bytes else "",
            acting_table=self.acting_table if wants_user else None, acting_role=self.acting_role,
            rows_per_table=ROWS_PLANNED, chars=planned_tokens(STAGE, self.gateway.settings.max_tokens) * 4)
        invariant_turns = [0]

        def validate(answer: DataAnswer) -> list[str]:
            grouped, unknown = statements_by_table(answer.inserts)
            wanted = {t.lower() for t in group}
            problems = [f"statement is not an INSERT INTO a table: {' '.join(s.split())[:100]}" for s in unknown]
            problems += [f"insert only into {', '.join(group)} here; table {t} is not one of them"
                         + (" (its rows were given before)" if t in self.rows else "")
                         for t in grouped if t not in wanted]
            if problems:
                return problems
            found, db_bytes = data_problems(self.schema_sql, before + answer.inserts)
            if found:
                return found
            found = future_records(db_bytes, self.context.today, group)
            if ready and invariant_turns[0] < INVARIANT_TURNS:
                broken = [v.text() + "; fix it in the rows of " + ", ".join(group)
                          for v in check_invariants(db_bytes, ready)]
                if broken:
                    invariant_turns[0] += 1
                    found += broken
            if wants_user:
                found += self._acting_problems(answer, db_bytes)
            return found

        answer = await generate_until_valid(
            self.gateway, DataAnswer, messages, stage=STAGE, subject=self._subject(group, single), validate=validate,
            repair_prompt="data_repair", rounds=self.rounds, report=self.report, sample=self.sample, grow=False)
        grouped, _ = statements_by_table(answer.inserts)
        for table in group:
            self.rows[table.lower()] = grouped.get(table.lower(), [])

    def _acting_problems(self, answer: DataAnswer, db_bytes: bytes | None) -> list[str]:
        table = self.acting_table
        if answer.acting_user_id is None or not (answer.acting_user_name or "").strip():
            return [f"give acting_user_id and acting_user_name: the row of {table} of the signed-in user "
                    f"({self.acting_role or 'a user of the application'})"]
        conn = open_bytes(db_bytes, readonly=True) if db_bytes else None
        try:
            pk = [r[1] for r in conn.execute(f"PRAGMA table_info({_quote(table)})") if r[5]] if conn else []
            row = conn.execute(f"SELECT * FROM {_quote(table)} WHERE {_quote(pk[0])} = ?",
                               (answer.acting_user_id,)).fetchone() if conn and len(pk) == 1 else None
        finally:
            if conn:
                conn.close()
        if row is None:
            return [f"acting_user_id {answer.acting_user_id!r}: {table} has no row with that id"]
        # Every word of the name (titles such as "Dr." aside) appears in the row's text.
        words = [w for w in re.findall(r"[^\W\d_]+", answer.acting_user_name.lower()) if len(w) > 2]
        text = " ".join(str(v) for v in dict(row).values() if isinstance(v, str)).lower()
        if not words or not all(w in text for w in words):
            return [f"acting_user_name {answer.acting_user_name!r} does not match {table} row "
                    f"{answer.acting_user_id!r} ({dict(row)})"]
        self.acting_user = ActingUser(table=table, id=answer.acting_user_id, name=answer.acting_user_name.strip(),
                                      role=self.acting_role)
        return []

    # ------------------------------------------------------------------ invariants

    async def _hold_invariants(self) -> bytes:
        """The built database once every invariant holds; data_fix rewrites tables at fault."""
        convo: list[dict[str, str]] | None = None
        fixes = 0
        while True:
            problems, db_bytes = data_problems(self.schema_sql, self.data_sql)
            violations = check_invariants(db_bytes, self.rules.invariants) if db_bytes else []
            problems += [v.text() for v in violations]
            dated = future_records(db_bytes, self.context.today) if db_bytes else []
            problems += dated
            if db_bytes is not None and not problems:
                return db_bytes
            self.report.add_problems(problems)
            if fixes >= self.rounds:
                raise StageFailed(STAGE, problems, self.report)
            fixes += 1
            self.report.repairs += 1
            involved = sorted({t for v in violations for inv in self.rules.invariants if inv.name == v.name
                               for t in tables_in_code(inv.sql, self.order)}
                              | {t for t in self.order for p in dated if p.startswith(f"table {t} row ")},
                              key=self.order.index)
            shown = data_dump(db_bytes, involved) if db_bytes else ""
            if convo is None:
                convo = self.context.messages("data_fix", problems=problem_list(problems), dump=shown)
            else:
                convo += [{"role": "user", "content": "Rebuilding after your fix found these problems:\n"
                           + "\n".join(f"- {p}" for p in problem_list(problems))
                           + "\n\nCurrent rows of the tables involved:\n" + shown}]
            answer = await self.gateway.structured(DataFixAnswer, convo, stage=FIX_STAGE,
                                                   subject=self.scenario.env_id, sample=self.sample,
                                                   check=lambda a: self._fix_problems(a))
            convo.append({"role": "assistant", "content": answer.model_dump_json()})
            self._apply_fix(answer)

    def _fix_problems(self, answer: DataFixAnswer) -> list[str]:
        tables = {t.lower() for t in self.order}
        names = {i.name for i in self.rules.invariants}
        problems = [f"tables: {t.table!r} is not a table of the schema" for t in answer.tables
                    if t.table.lower() not in tables]
        for t in answer.tables:
            grouped, unknown = statements_by_table(t.inserts)
            if unknown or any(name != t.table.lower() for name in grouped):
                problems.append(f"tables: the inserts given for {t.table} must all be INSERT INTO {t.table}")
        problems += [f"revised_invariants: {r.name!r} is not one of the invariants" for r in answer.revised_invariants
                     if r.name not in names]
        problems += [f"revised_invariants: give the reason {r.name!r} was wrong" for r in answer.revised_invariants
                     if not r.reason.strip()]
        if not answer.tables and not answer.revised_invariants:
            problems.append("rewrite the rows at fault (tables) or correct a wrong rule (revised_invariants)")
        return problems

    def _apply_fix(self, answer: DataFixAnswer) -> None:
        for t in answer.tables:
            grouped, _ = statements_by_table(t.inserts)
            self.rows[t.table.lower()] = grouped.get(t.table.lower(), [])
        revised = {r.name: r for r in answer.revised_invariants}
        for name, r in revised.items():
            self.report.notes.append(clip(f"invariant {name} corrected: {r.reason}"))
        self.rules = self.rules.model_copy(update={"invariants": [
            Invariant(name=i.name, description=revised[i.name].description, sql=revised[i.name].sql)
            if i.name in revised else i for i in self.rules.invariants]})
        self.context.rules = self.rules
        self.report.notes.append(clip(f"data fix: {answer.diagnosis}"))


async def generate_data(
    scenario: Scenario, tasks: list[Task], schema_sql: str, gateway: Gateway, *, rounds: int,
    report: StageReport, sample: int = 0, rules: Rules | None = None, today: str, acting_table: str | None = None,
    acting_role: str = "",
) -> DataResult:
    """INSERTs that build cleanly over `schema_sql` and obey `rules`, the initial database's bytes,
    the (possibly corrected) rules and the signed-in user. Raises StageFailed when repairs run out."""
    stage = DataStage(scenario, tasks, schema_sql, gateway, rounds=rounds, report=report, sample=sample,
                      rules=rules or Rules(), today=today, acting_table=acting_table, acting_role=acting_role)
    return await stage.run()
