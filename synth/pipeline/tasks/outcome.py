"""What `synth tasks` reports: per template (report.json `templates`) and per run (`tasks_step`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from synth.pipeline.stages.repair import clip

MAX_DROPPED_SHOWN = 12  # dropped instances listed per template, with their first problem


class TemplateOutcome(BaseModel):
    """report.json `templates[<template_id>]`."""

    template_id: str
    kind: str
    difficulty: str
    split: str = "train"
    status: Literal["kept", "dropped", "exhausted"] = "kept"  # exhausted: --more found no rows left
    reason: str | None = None  # why it was dropped (or exhausted)
    candidates: int = 0  # instances made from its rows (this run)
    kept: int = 0  # instances that passed every check (this run)
    instances: int = 0  # instances of it in tasks.jsonl, all runs
    dropped: dict[str, str] = Field(default_factory=dict)  # instance -> its first problem (a few)
    skipped_rows: int = 0  # rows that made no instance (NULL slots, duplicates of other tasks)
    repairs: list[dict[str, Any]] = Field(default_factory=list)  # {"stage", "problems", "diagnosis"}
    agents: dict[str, Any] = Field(default_factory=dict)  # sampled instance -> agent -> what it found

    def note_dropped(self, task_id: str, problems: list[str]) -> None:
        if len(self.dropped) < MAX_DROPPED_SHOWN and problems:
            self.dropped[task_id] = clip(problems[0], 300)


class TasksResult(BaseModel):
    """What one `synth tasks` run did to one env (report.json `tasks_step`)."""

    env_id: str
    path: str
    more: bool = False  # --more: new instances of the templates the env has, no model
    added: int = 0
    tasks: int = 0  # tasks in the env after the run
    templates: list[TemplateOutcome] = Field(default_factory=list)
    instances_checked: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_tokens: int = 0  # answers from the cache, at what they cost when first asked
    calls: int = 0
    seconds: dict[str, float] = Field(default_factory=dict)  # ask, instantiate, check, agents, repair, final_check
    errors: list[str] = Field(default_factory=list)
    status: str = "verified"
    skipped: bool = False  # an earlier run of the same command already did it

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def tokens_per_task(self) -> float | None:
        """What a new task cost, cached answers counted at their first cost (the step's cost from scratch)."""
        return round((self.tokens + self.reused_tokens) / self.added, 1) if self.added else None

    def kept_templates(self) -> list[TemplateOutcome]:
        return [t for t in self.templates if t.status == "kept" and t.kept]

    def summary(self) -> dict[str, Any]:
        """report.json `tasks_step`: this run's figures (the per-template records go to `templates`)."""
        data = self.model_dump(mode="json", exclude={"templates", "skipped"})
        data.update(tokens_per_task=self.tokens_per_task, templates_kept=len(self.kept_templates()),
                    templates_tried=len(self.templates))
        return data
