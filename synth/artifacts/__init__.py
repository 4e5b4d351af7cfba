"""Pydantic models of every artifact that flows between pipeline stages.

Two kinds live here: *records* (what synth stores and writes into env folders)
and *answers* (the shapes a model is asked to return; their field descriptions
become the JSON schema the model sees). Keep answers small and flat: every
provider must be able to produce them with JSON-schema output.

The models live in submodules by concern (base, scenarios, env, verification,
use); every name is re-exported here, so `from synth.artifacts import Task` works.
"""

from __future__ import annotations

from synth.artifacts.base import Frozen, SLUG_RE, TOOL_NAME_RE, slugify  # noqa: F401
from synth.artifacts.scenarios import (CrudJudgement, DuplicateJudgement, RejectedScenario, RejectionStage, Scenario,
    ScenarioBatch, ScenarioDraft, Seed)  # noqa: F401
from synth.artifacts.env import (ActingUser, Check, DataAnswer, DataFixAnswer, Difficulty, EnvManifest, EnvStatus,
    Fact, FactKind, Invariant, PortableType, RevisedInvariant, Reward, Rules, SchemaAnswer, StateChanges, TableRows,
    Task, TaskBatch, TaskDraft, ToolBody, ToolCall, ToolCodeAnswer, ToolParam, ToolSpec, ToolSpecAnswer, ToolSpecDraft,
    ToolSpecRevision, Transition,
    TransitionDraft)  # noqa: F401
from synth.artifacts.verification import (CaseVerdict, Expectation, GateResult, GoldAction, GoldAnswer, GoldBatch,
    GoldTaskAnswer, JudgeVerdict, Observation, PASSING_VERDICTS, ParaphraseAnswer, ParaphraseSet, RedTeamAnswer,
    RedTeamAttempt, RedTeamSet, RepairRecord, RewardJudgement, RewardVerdict, SolverStep, SolverTurn, ToolJudgement,
    ToolRepair, ToolTest, ToolTestBatch, ToolTestDraft, ToolTestSet, Verdict, VerifierCase)  # noqa: F401
from synth.artifacts.templates import TaskTemplate, TemplateBatch, TemplateDraft, TemplateRepair  # noqa: F401
from synth.artifacts.use import EnvBug, RolloutCall, StopReason, Trajectory, TrajectoryStep, WindowSample  # noqa: F401
