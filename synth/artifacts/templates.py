"""Task templates: one instruction with {slots}, a query over the initial data whose rows fill the
slots, gold calls and a verifier written once for every row (task_templates.jsonl)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from synth.artifacts.env import Difficulty, Fact, ToolCall
from synth.artifacts.verification import GoldAction

HARD_CALLS = 3  # a hard template chains at least this many calls (synth/pipeline/tasks/ask.py checks it)


class TemplateDraft(BaseModel):
    """One template as the `templates` stage asks for it."""

    name: str = Field(description="snake_case name, unique in the env, e.g. cancel_desk_booking")
    kind: Literal["read", "write"] = Field(description="'read' if it only looks things up, 'write' if it changes "
                                           "state")
    difficulty: Difficulty = Field(description=f"easy: a lookup or a change in 1-2 tool calls; medium: a few "
                                   f"calls; hard: chained operations (look up, then act on what was found), at "
                                   f"least {HARD_CALLS} calls")
    instruction: str = Field(description="The request as a real user would phrase it, with {slot} placeholders "
                             "named after the query's columns")
    query: str = Field(description="One SQLite SELECT over the initial data; each row is one valid binding: a "
                       "column per slot, plus any value the gold calls, the expected answer or the facts need")
    actions: list[GoldAction] = Field(description="The tool calls that solve any instance, in order; an argument "
                                      "may be \"{column}\" (the row's value, its type kept) or text with {column}s")
    expected_answer: str = Field(description="Read: the answer with {column}s stating the facts asked for. Write: a "
                                 "one-line report of what was done, with {column}s")
    facts: list[Fact] | None = Field(default=None, description="Read: the values a correct answer must state, each "
                                     "value a \"{column}\"; write: null")
    free_columns: list[str] | None = Field(default=None, description="Write: 'table.column' the actions write whose "
                                           "text the task leaves open ([] when none); read: null")
    verifier_body: str = Field(description="Python body (no def line) of template_<name>(initial_db, final_db, "
                               "answer, params) returning check(...) items; params is the row as a dict")


class TemplateBatch(BaseModel):
    """Answer of the `templates` stage."""

    templates: list[TemplateDraft]


class TemplateRepair(TemplateDraft):
    """Answer of a `templates` repair turn: the whole template again, corrected."""

    diagnosis: str = Field(default="", description="What was wrong with the earlier version, one or two sentences")


class TaskTemplate(BaseModel):
    """One line of task_templates.jsonl: everything needed to make more instances with no model."""

    template_id: str
    kind: Literal["read", "write"]
    difficulty: Difficulty
    split: Literal["train", "test"] = "train"
    instruction: str
    query: str
    actions: list[ToolCall]
    expected_answer: str
    facts: list[Fact] | None = None
    free_columns: list[str] | None = None
    verifier_body: str
    rows_used: int = 0  # query rows made into instances so far (`synth tasks --more` starts after them)

    @property
    def function(self) -> str:
        """Its verifier function in verifiers.py; each instance's verifier calls it with its bindings."""
        return f"template_{self.template_id}"
