"""What an env folder holds: tasks and gold calls, database rules, tools, rewards, the manifest."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from synth.artifacts.base import Frozen, TOOL_NAME_RE


class ToolCall(Frozen):
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


Difficulty = Literal["easy", "medium", "hard"]  # 1-2, 3-5, 6+ tool calls


class TaskDraft(BaseModel):
    instruction: str = Field(description="The request as a real user would phrase it, with concrete values")
    kind: Literal["read", "write"] = Field(description="'read' if it only looks things up, 'write' if it changes state")
    difficulty: Difficulty = Field(description="easy: 1-2 tool calls, medium: 3-5, hard: 6 or more")


class TaskBatch(BaseModel):
    """Answer of the `tasks` stage."""

    tasks: list[TaskDraft]


FactKind = Literal["count", "money", "date", "time", "datetime", "name", "id", "number", "text"]


class Fact(Frozen):
    """A value a correct answer to a read task must state (the context an answer adds is not one)."""

    value: str = Field(description="The value as the data has it: '2', '4.75', '2025-06-05', '09:30', "
                                   "'2025-06-05 09:30', 'Dr. Priya Nair', '555-0104'")
    kind: FactKind = Field(description="count (how many), money, date, time, datetime, name, id (a code, number "
                                       "or reference), number (any other quantity) or text (a status, a word)")


class Task(BaseModel):
    """One line of tasks.jsonl."""

    task_id: str
    instruction: str
    kind: Literal["read", "write"]
    difficulty: Difficulty
    split: Literal["train", "test"] = "train"
    gold: list[ToolCall] = Field(default_factory=list)
    expected_answer: Any = None
    verifier: str = ""
    # What decides the state reward (synth/use/taskfacts.py); None in folders made before them, which
    # fall back to rules computed from the expected answer and the gold solution (README, folder contract).
    facts: list[Fact] | None = None  # read tasks: the facts a correct answer must state
    free_columns: list[str] | None = None  # write tasks: "table.column" the task leaves free (any written value)
    # An instance of a task template (task_templates.jsonl): its template and the query row it was made from.
    template_id: str | None = None
    bindings: dict[str, Any] | None = None


class Invariant(BaseModel):
    """A rule the data must always obey, as a query that returns the rows breaking it."""

    name: str = Field(description="snake_case name, e.g. invoice_total_matches_lines")
    description: str = Field(description="The rule in one sentence")
    sql: str = Field(description="One SQLite SELECT that returns the rows breaking the rule (none when it holds)")


class Transition(BaseModel):
    """One line of rules.json "transitions": which status changes a column allows."""

    table: str
    column: str
    allowed: dict[str, list[str]]  # from state -> states it may change to


class Rules(BaseModel):
    """rules.json: data invariants and status transitions (see the README's folder contract)."""

    invariants: list[Invariant] = Field(default_factory=list)
    transitions: list[Transition] = Field(default_factory=list)


class StateChanges(BaseModel):
    state: str = Field(description="A value of the status column")
    next: list[str] = Field(description="The values it may change to ([] if it is final)")


class TransitionDraft(BaseModel):
    table: str
    column: str = Field(description="The status column")
    allowed: list[StateChanges] = Field(description="For every value of the column, the values it may change to")


class SchemaAnswer(BaseModel):
    """Answer of the `schema` stage."""

    ddl: str = Field(description="SQLite DDL: CREATE TABLE / CREATE INDEX statements only")
    acting_user_table: str | None = Field(
        default=None, description="The table holding the people who use the application (staff or customers), "
        "one of whom is the signed-in user the agent acts for; null only if the application has no users")
    acting_user_role: str = Field(default="", description="That user's role, e.g. 'front-desk receptionist'")
    transitions: list[TransitionDraft] = Field(
        default_factory=list, description="For every status column, the status changes the application allows")
    invariants: list[Invariant] = Field(
        default_factory=list, description="Rules the data must always obey across rows and tables")


class ActingUser(BaseModel):
    """env.json "acting_user": the staff or customer record the agent acts for."""

    table: str
    id: int | str
    name: str
    role: str = ""


class DataAnswer(BaseModel):
    """Answer of the `data` stage (one group of tables)."""

    inserts: str = Field(description="SQLite INSERT statements only, parents before children")
    acting_user_id: int | str | None = Field(
        default=None, description="Only when asked: the id of the row of the signed-in user")
    acting_user_name: str | None = Field(default=None, description="Only when asked: that user's name")


class TableRows(BaseModel):
    table: str
    inserts: str = Field(description="Every INSERT of this table, replacing all its earlier rows")


class RevisedInvariant(Invariant):
    reason: str = Field(description="Why the rule as written was wrong")


class DataFixAnswer(BaseModel):
    """Answer of the `data_fix` step: the data broke invariants."""

    diagnosis: str = Field(description="What was inconsistent, one or two sentences")
    tables: list[TableRows] = Field(default_factory=list, description="Tables whose rows are rewritten")
    revised_invariants: list[RevisedInvariant] = Field(
        default_factory=list, description="Only for a rule that was itself wrong: its corrected version")


PortableType = Literal["string", "integer", "number", "boolean", "array"]


class ToolParam(BaseModel):
    name: str
    type: PortableType
    description: str = ""
    required: bool = True
    enum: list[str | int] | None = None
    items: Literal["string", "integer", "number", "boolean"] | None = Field(
        default=None, description="Element type when type is 'array'"
    )


class ToolSpec(BaseModel):
    """One entry of tools.json (with `parameters` as portable JSON Schema)."""

    name: str
    description: str
    parameters: dict[str, Any]
    read_only: bool

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not TOOL_NAME_RE.match(v):
            raise ValueError(f"tool name {v!r} must match {TOOL_NAME_RE.pattern}")
        return v


class ToolSpecDraft(BaseModel):
    name: str = Field(description="snake_case tool name, e.g. create_booking")
    description: str = Field(description="What the tool does, its effect and what it returns")
    read_only: bool
    params: list[ToolParam]


class ToolSpecAnswer(BaseModel):
    """Answer of the `tool_spec` stage."""

    tools: list[ToolSpecDraft]


class ToolSpecRevision(BaseModel):
    """Answer of the `tool_spec` consolidation turn: edits to the merged list of every part's tools."""

    drop: list[str] = Field(default_factory=list, description="Names of tools to remove (merged into others, "
                            "or not needed)")
    replace: list[ToolSpecDraft] = Field(default_factory=list, description="Tools that replace the tools of the "
                                         "same name (e.g. a search tool widened with the filters of dropped ones)")
    add: list[ToolSpecDraft] = Field(default_factory=list, description="New tools, only if something is missing")


class ToolBody(BaseModel):
    name: str
    body: str = Field(
        description="The indented-free Python body of the function (no def line, no imports). "
        "`db` is a sqlite3.Connection with row_factory=sqlite3.Row; raise ToolError(msg) for user errors; "
        "return JSON-serializable data"
    )


class ToolCodeAnswer(BaseModel):
    """Answer of the `tool_code` stage."""

    functions: list[ToolBody]


class Check(Frozen):
    name: str
    passed: bool
    weight: float = 1.0


class Reward(BaseModel):
    reward: float  # the score of `kind`: the weighted rubric score in [0, 1] by default
    passed: bool  # every check passed
    checks: list[Check] = Field(default_factory=list)  # the verifier's rubric
    error: str | None = None
    kind: str = "rubric"  # which reward `reward` is: rubric | state | both (synth/use/reward.py)
    rubric: float | None = None  # the verifier's rubric score, when both were computed
    state: float | None = None  # the state-equivalence reward (1.0 or 0.0), when computed
    state_checks: list[Check] = Field(default_factory=list)
    state_error: str | None = None

    @classmethod
    def from_checks(cls, checks: list[Check]) -> "Reward":
        total = sum(c.weight for c in checks)
        score = sum(c.weight for c in checks if c.passed) / total if total > 0 else 0.0
        return cls(reward=round(score, 6), passed=bool(checks) and all(c.passed for c in checks), checks=checks)


EnvStatus = Literal["built", "verified", "failed"]


class EnvManifest(BaseModel):
    """env.json."""

    id: str
    title: str
    domain: str
    category: str = ""
    scenario: str
    pipeline_version: str
    model: str
    counts: dict[str, int] = Field(default_factory=dict)
    status: EnvStatus
    initial_db_sha256: str
    report: dict[str, Any] = Field(default_factory=dict)
    failure_reason: str | None = None
    volatile_columns: list[str] = Field(default_factory=list)  # "table.column" ignored by db comparison
    today: str | None = None  # the env's fixed current date, YYYY-MM-DD (None in folders made before it)
    acting_user: ActingUser | None = None  # who the agent acts for (None: nobody in particular, or older folder)
