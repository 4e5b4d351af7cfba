"""Seeds and scenarios: what expansion, classification and dedup read and return."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from synth.artifacts.base import Frozen, slugify


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
