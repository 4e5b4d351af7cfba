"""Verification: gold answers, tool tests and verdicts, repairs, reward agents' answers, gate results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from synth.artifacts.env import Fact, ToolCall


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
    facts: list[Fact] | None = Field(
        default=None, description="Read tasks: the values a correct answer must state (only what the question asks "
        "for, not the context the expected answer adds), each as the data has it, with its kind. Write tasks: null")
    free_columns: list[str] | None = Field(
        default=None, description="Write tasks: the 'table.column' your actions write whose text the task leaves "
        "open (a reason or note in your own words, a name the user did not give); [] when the task fixes every "
        "value written. Read tasks: null")


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
    description_fix: str = Field(
        default="", description="Only when the tool refused (or limited) the call on a rule its description "
        "does not state: one sentence stating that rule, to add to the tool's description; else \"\"")


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

    kind: Literal["tool", "verifier", "description"]  # description: a rule the tool enforces, now stated
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
