"""Pydantic models of every artifact that flows between pipeline stages.

Two kinds live here: *records* (what synth stores and writes into env folders)
and *answers* (the shapes a model is asked to return; their field descriptions
become the JSON schema the model sees). Keep answers small and flat: every
provider must be able to produce them with JSON-schema output.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SLUG_RE = re.compile(r"[^a-z0-9]+")


def slugify(text: str, max_len: int = 48) -> str:
    """Lower-case ascii slug used for env ids and file names."""
    slug = SLUG_RE.sub("_", text.lower()).strip("_")
    return (slug[:max_len].rstrip("_")) or "item"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- seeds and scenarios


class Seed(Frozen):
    name: str
    description: str = ""
    category: str = ""


class Scenario(Frozen):
    """A concrete application an environment will simulate."""

    name: str
    description: str
    category: str
    seed: str = ""

    @property
    def env_id(self) -> str:
        return slugify(self.name)


class ScenarioDraft(BaseModel):
    name: str = Field(description="Short product-style name of the application, 2-6 words")
    description: str = Field(
        description="150-300 words: what the application does, who uses it, what data it keeps "
        "and what users do with that data"
    )
    category: str = Field(description="One category word or short phrase, e.g. 'healthcare'")


class ScenarioBatch(BaseModel):
    """Answer of the `expand` stage."""

    scenarios: list[ScenarioDraft]


class CrudJudgement(BaseModel):
    """Answer of the `classify` stage."""

    crud_able: bool = Field(
        description="True if the application's state fits a relational database that tools "
        "read and write, its data can be synthesized, and it needs no live external service"
    )
    reason: str = Field(description="One or two sentences justifying the judgement")


# --------------------------------------------------------------------------- tasks and gold solutions


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


# --------------------------------------------------------------------------- database


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


# --------------------------------------------------------------------------- tools

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


# --------------------------------------------------------------------------- rewards


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


# --------------------------------------------------------------------------- env manifest

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


# --------------------------------------------------------------------------- scenarios: expansion, classification, model-judged dedup


class DuplicateJudgement(BaseModel):
    """Answer of the `dedup_judge` stage (borderline pairs only)."""

    is_duplicate: bool = Field(
        description="True if both applications would yield essentially the same environment: same users, "
        "same operations on the same kinds of records"
    )
    reason: str = Field(description="One sentence justifying the judgement")


RejectionStage = Literal["classify", "dedup", "surplus"]


class RejectedScenario(BaseModel):
    """One line of <out>.rejected.jsonl: a candidate that was not kept, and why."""

    candidate_id: str  # "<seed slug>/r<round>/<index>": stable across reruns
    stage: RejectionStage
    reason: str
    scenario: Scenario
    nearest: str | None = None  # dedup: name of the nearest kept scenario
    similarity: float | None = None  # dedup: cosine similarity to it


# --------------------------------------------------------------------------- verification: gold solutions, check loop, gates


class GoldAction(BaseModel):
    tool: str = Field(description="Name of the tool to call, exactly as in the tool list")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="The call's arguments object: every required parameter, real values"
    )


class GoldAnswer(BaseModel):
    """Answer of the `gold` stage: how one task is solved and how its outcome is checked."""

    diagnosis: str = Field(default="", description="When fixing an earlier attempt: what was wrong with it")
    actions: list[GoldAction] = Field(description="The tool calls that solve the task, in order")
    expected_answer: str | None = Field(
        default=None,
        description="Read tasks: the short final answer the user should get, stating the facts asked for. "
        "Write tasks: a one-line report of what was done",
    )
    verifier_body: str = Field(
        description="Python body (no def line, no imports) of verify(initial_db, final_db, answer) that "
        "returns a list of check(name, passed, weight) items"
    )


class GoldTaskAnswer(GoldAnswer):
    task_id: str = Field(description="The task's id, as given")


class GoldBatch(BaseModel):
    """Answer of the `gold` stage for several tasks at once."""

    tasks: list[GoldTaskAnswer]


class ToolTestDraft(BaseModel):
    purpose: str = Field(description="What the test checks, one sentence")
    setup: list[GoldAction] = Field(
        default_factory=list, description="Calls made first (any tools) to reach the state the test needs; "
        "[] when the initial data is enough")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments object for one call of the tool")
    expect: Literal["success", "error"] = Field(
        description="'success' if the call should work, 'error' if the tool should refuse it with a ToolError"
    )
    expected_error: str = Field(default="", description="For 'error': what the refusal should say")
    expected_change: str = Field(
        description="The change the call should make to the database, in words ('none' for reads and errors)"
    )
    changed_tables: list[str] = Field(
        default_factory=list, description="Tables whose rows the call should add, change or delete"
    )


class ToolTestSet(BaseModel):
    tool: str = Field(description="The tool under test")
    tests: list[ToolTestDraft]
    no_refusal_path: str = Field(
        default="", description="Only if no schema-valid arguments should make this tool refuse (e.g. a search "
        "that returns an empty list): why. Otherwise leave empty and write a refusal test")
    no_success_path: str = Field(
        default="", description="Only if no call can succeed from this data, even after setup calls: why. "
        "Otherwise leave empty and write a success test")


class ToolTestBatch(BaseModel):
    """Answer of the `check_tests` stage (the testing agent) for a batch of tools."""

    tools: list[ToolTestSet]


# What a test's recorded verdict says. "warning" is only read from folders made before
# the judge had to choose between the tool and the test's expectation.
Verdict = Literal["pass", "test_wrong", "warning", "fail"]
JudgeVerdict = Literal["pass", "test_wrong", "fail"]
PASSING_VERDICTS = frozenset({"pass", "test_wrong", "warning"})  # the tool is not blamed


class CaseVerdict(BaseModel):
    test_id: str = Field(description="The id of the judged test, as given")
    verdict: JudgeVerdict = Field(
        description="pass: the tool behaved correctly and as the test expected; test_wrong: the tool behaved "
        "correctly but the test's expectation was wrong; fail: the tool is wrong (any flaw in its result, "
        "refusal or database change, minor ones included)"
    )
    reason: str = Field(description="One or two sentences: what happened and why it is right or wrong")


class ToolJudgement(BaseModel):
    """Answer of the `check_judge` stage (the checking agent) for a batch of tools' tests."""

    verdicts: list[CaseVerdict]


class ToolRepair(BaseModel):
    """Answer of the `check_repair` stage: a corrected tool body."""

    diagnosis: str = Field(description="What was wrong with the function, one or two sentences")
    body: str = Field(
        description="The complete corrected Python body of the function (no def line, no imports); "
        "raise ToolError(msg) for user errors; return JSON-serializable data"
    )


class Expectation(BaseModel):
    outcome: Literal["success", "error"]
    error: str = ""
    change: str = ""
    tables: list[str] = Field(default_factory=list)


class Observation(BaseModel):
    """What one test call did on a fresh episode (volatile columns stripped from the diff)."""

    ok: bool
    kind: str  # "ok", "tool_error", "setup_failed", or the runtime's bug kind (exception, timeout, ...)
    result: Any = None  # the tool's result (a clipped preview when it is large)
    result_sha256: str | None = None  # of the full result's canonical JSON, for replay comparison
    error: str | None = None
    diff: dict[str, Any] = Field(default_factory=dict)  # from the state after the setup calls
    broken: list[str] = Field(default_factory=list)  # invariants of rules.json the call broke


class ToolTest(BaseModel):
    """One line of tests.jsonl: a tool call, what it should do, what it did, and the verdict."""

    test_id: str
    tool: str
    setup: list[ToolCall] = Field(default_factory=list)  # calls made first, on the same episode
    arguments: dict[str, Any] = Field(default_factory=dict)
    purpose: str = ""
    expectation: Expectation
    observed: Observation | None = None
    verdict: Verdict | None = None
    reason: str = ""


class RepairRecord(BaseModel):
    """One repair the check loop made (report.json check_loop.rounds[i].repairs)."""

    kind: Literal["tool", "verifier"]
    name: str  # tool name or task id
    diagnosis: str = ""
    before: str = ""  # the function's code before the repair
    after: str = ""
    evidence: list[str] = Field(default_factory=list)
    tests: list[dict[str, Any]] = Field(default_factory=list)  # tests.jsonl records that failed


class ParaphraseSet(BaseModel):
    task_id: str = Field(description="The task's id, as given")
    paraphrases: list[str] = Field(description="Other correct replies stating exactly the same facts")


class ParaphraseAnswer(BaseModel):
    """Answer of the `paraphrase` stage: other wordings of read tasks' expected answers."""

    tasks: list[ParaphraseSet]


class SolverStep(BaseModel):
    task_id: str = Field(description="The request's id, as given")
    calls: list[GoldAction] = Field(default_factory=list, description="Tool calls to make now, in order")
    answer: str | None = Field(default=None, description="The final reply to the user, once the request is done "
                               "(made after this turn's calls, if any); null while results are still needed")


class SolverTurn(BaseModel):
    """One turn of the `solve` stage's agent over several requests."""

    tasks: list[SolverStep]


class RedTeamAttempt(BaseModel):
    idea: str = Field(description="How the attempt tries to earn the reward without doing the task")
    calls: list[GoldAction] = Field(default_factory=list, description="Tool calls, in order")
    answer: str | None = Field(default=None, description="The final reply graded with the calls' result")


class RedTeamSet(BaseModel):
    task_id: str = Field(description="The task's id, as given")
    attempts: list[RedTeamAttempt]


class RedTeamAnswer(BaseModel):
    """Answer of the `red_team` stage."""

    tasks: list[RedTeamSet]


class RewardVerdict(BaseModel):
    item_id: str = Field(description="The item's id, as given")
    verdict: Literal["correct", "wrong", "too_loose", "ambiguous", "acceptable"]
    reason: str = Field(description="One or two sentences naming the facts or rows that decide it")
    clarified_instruction: str = Field(default="", description="For 'ambiguous': the request rewritten so that "
                                       "only the reference solution's outcome is right")


class RewardJudgement(BaseModel):
    """Answer of the `reward_judge` stage (the checking agent on the reward agents' findings)."""

    verdicts: list[RewardVerdict]


class VerifierCase(BaseModel):
    """One line of verifier_tests.jsonl: a trajectory the check loop's agents found and the verdict
    the task's verifier must keep giving it (regression cases, replayed by the reward_cases gate).
    "pass": full reward (a correct answer in other words, a correct solution by another path);
    "fail": below the probe threshold (an exploit, a wrong solution the verifier once paid for)."""

    case_id: str  # "<task_id>.<source>.<n>"
    task_id: str
    source: Literal["paraphrase", "solver", "red_team", "probe"]
    use_gold: bool = False  # play the task's gold calls (a paraphrase of its answer) instead of `calls`
    calls: list[ToolCall] = Field(default_factory=list)
    answer: str | None = None
    expect: Literal["pass", "fail"]
    note: str = ""  # why: the agent's idea, the judge's reason
    found_reward: float | None = None  # what the verifier gave when the case was found


class GateResult(BaseModel):
    """Result of one model-free quality gate; evidence lines name the task or tool."""

    name: str
    passed: bool
    evidence: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)


# --------------------------------------------------------------------------- runtime


class TrajectoryStep(BaseModel):
    """One tool call of an episode, as the agent made it and as it was answered."""

    tool: str
    arguments: Any  # what the agent sent: a dict, or the raw string when it was not valid JSON
    observation: dict[str, Any]  # {"ok": true, "result": ...} or {"ok": false, "error": "..."}
    duration: float  # seconds, including validation and the sandbox round trip


class EnvBug(BaseModel):
    """An env failure seen at run time that is not the agent's fault: a tool or verifier
    raising unexpectedly, timing out, returning non-JSON, or crashing its worker."""

    env_id: str
    episode_id: str
    task_id: str | None = None
    tool: str  # tool name, or the verifier's function name
    arguments: dict[str, Any] | None = None
    kind: str  # exception | timeout | killed | crash | bad_return | missing | violation | internal
    message: str
    traceback: str = ""


# --------------------------------------------------------------------------- use: rollouts and training samples


StopReason = Literal["answered", "max_turns", "error"]


class RolloutCall(BaseModel):
    """One tool call an agent made during a rollout, with the observation it got."""

    turn: int  # 1-based assistant turn that made the call
    id: str
    name: str
    arguments: Any  # a dict, or the raw string when the model sent invalid JSON
    observation: dict[str, Any]


class Trajectory(BaseModel):
    """One line of the trajectories JSONL `synth rollout` writes."""

    env_id: str
    task_id: str
    instruction: str
    model: str
    messages: list[dict[str, Any]]  # OpenAI chat shape, tool-call arguments as JSON strings
    tools: list[dict[str, Any]]  # OpenAI function schemas the agent was given
    tool_calls: list[RolloutCall] = Field(default_factory=list)
    final_answer: str | None = None
    reward: float | None = None  # None when the rollout failed before it could be evaluated
    passed: bool = False
    checks: list[Check] = Field(default_factory=list)
    reward_error: str | None = None
    reward_kind: str = "rubric"  # which reward `reward` is (synth rollout --reward)
    rubric: float | None = None  # the verifier's rubric score
    state: float | None = None  # the state-equivalence reward
    turns: int = 0
    stop_reason: StopReason = "answered"
    usage: dict[str, int] = Field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None  # why the rollout failed (model error, budget, sandbox)


class WindowSample(BaseModel):
    """One per-turn training sample with AWM-style history alignment: the system prompt,
    the task, the first exchange and only the last W turns before the trained turn."""

    env_id: str
    task_id: str
    model: str
    turn: int  # 1-based assistant turn that is the training target (the last message)
    window: int
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    reward: float | None
    passed: bool
