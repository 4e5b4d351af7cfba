"""Stage `dedup`: drop scenarios that repeat one already kept.

Two checks, in order, for each candidate:

1. Same name (case, spacing and punctuation ignored) as a kept scenario: drop.
2. Cosine similarity of sentence embeddings (synth.pipeline.embed) to the nearest kept
   scenario, `s`:
   - `s >= threshold`: drop as a near duplicate;
   - `threshold - borderline <= s < threshold` (the borderline band): keep only
     while the candidate's category is under its quota, so near-variants do not
     crowd out other categories; if a judge is given, it is then asked and a
     "duplicate" answer drops the candidate;
   - below the band: keep.

"Kept" includes `existing` scenarios (from earlier runs, in the output
folder): they count toward category quotas and are compared against, but are
never dropped. Decisions are greedy in input order, so the first of two
duplicates wins. Every decision records its rule and the nearest kept
scenario with the similarity.

This is a barrier stage: `dedup()` is a plain function over a list with no
global state. `Deduper` is the same logic as an object for incremental use
(the expansion stage offers scenarios round by round and calls `relax()` when
too few get through).
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from synth.artifacts import Scenario
from synth.config import Settings
from synth.errors import InputError
from synth.pipeline.embed import Embedder
from synth.pipeline.seeds import name_key

# judge(candidate, nearest) -> True if the two are duplicates. Only asked for
# pairs in the borderline band whose category still has room.
Judge = Callable[[Scenario, Scenario], Awaitable[bool]]

Rule = Literal["unique", "borderline_kept", "same_name", "similar", "borderline_quota_full", "judge_duplicate"]
KEPT_RULES = frozenset({"unique", "borderline_kept"})

# relax() bounds. Half the labelled paraphrase pairs score above ~0.77
# (docs/dedup.md), so a threshold relaxed past 0.80 would stop deduplicating.
DEFAULT_RELAX_STEP = 0.02
DEFAULT_MAX_THRESHOLD = 0.80
BLOCK_SIZE = 256  # candidates compared per matrix product


def scenario_text(scenario: Scenario) -> str:
    """What gets embedded: the name carries identity, the description the substance."""
    return f"{scenario.name}: {scenario.description}"


def category_key(category: str) -> str:
    return category.strip().lower()


@dataclass(frozen=True)
class Decision:
    scenario: Scenario
    rule: Rule
    reason: str  # one human-readable line
    nearest: Scenario | None = None  # nearest kept (or existing) scenario when one was compared
    similarity: float | None = None  # cosine similarity to `nearest`

    @property
    def kept(self) -> bool:
        return self.rule in KEPT_RULES

    def to_row(self) -> dict[str, object]:
        """JSON-able summary, e.g. for a .rejected.jsonl line."""
        return {
            "kept": self.kept,
            "rule": self.rule,
            "reason": self.reason,
            "nearest": self.nearest.name if self.nearest else None,
            "similarity": None if self.similarity is None else round(self.similarity, 4),
        }


@dataclass
class DedupResult:
    decisions: list[Decision]  # one per candidate, in input order
    threshold: float  # the threshold in force at the end
    kept: list[Scenario] = field(init=False)
    dropped: list[Decision] = field(init=False)

    def __post_init__(self) -> None:
        self.kept = [d.scenario for d in self.decisions if d.kept]
        self.dropped = [d for d in self.decisions if not d.kept]

    def counts(self) -> Counter[str]:
        return Counter(d.rule for d in self.decisions)


class Deduper:
    """Greedy dedup against everything kept so far (see module docstring).

    quotas: per-category cap in the borderline band (keys compared lower-case);
    categories not listed use `default_quota`; None means no cap.
    """

    def __init__(
        self,
        embedder: Embedder,
        *,
        threshold: float,
        borderline: float,
        quotas: Mapping[str, int] | None = None,
        default_quota: int | None = None,
        judge: Judge | None = None,
        relax_step: float = DEFAULT_RELAX_STEP,
        max_threshold: float = DEFAULT_MAX_THRESHOLD,
    ) -> None:
        if not 0 < threshold <= 1:
            raise InputError(f"dedup threshold must be in (0, 1], got {threshold}")
        if not 0 <= borderline <= threshold:
            raise InputError(f"dedup borderline band must be in [0, threshold={threshold}], got {borderline}")
        if relax_step <= 0:
            raise InputError(f"dedup relax step must be positive, got {relax_step}")
        self.embedder = embedder
        self._threshold = threshold
        self.borderline = borderline
        self.quotas = {category_key(k): v for k, v in (quotas or {}).items()}
        self.default_quota = default_quota
        self.judge = judge
        self.relax_step = relax_step
        self.max_threshold = max(max_threshold, threshold)
        self._matrix = np.zeros((0, 0), dtype=np.float32)  # row i = vector of _rows[i], grown by doubling
        self._rows: list[Scenario] = []  # scenario of each matrix row
        self._names: dict[str, Scenario] = {}  # name_key -> kept scenario
        self._per_category: Counter[str] = Counter()
        self._kept: list[Scenario] = []  # kept by offer*, without existing ones

    # ------------------------------------------------------------------ threshold

    @property
    def threshold(self) -> float:
        return self._threshold

    @property
    def band_floor(self) -> float:
        return self._threshold - self.borderline

    def relax(self) -> bool:
        """Raise the threshold one step (for stalled expansion); False once at the maximum."""
        if self._threshold >= self.max_threshold:
            return False
        self._threshold = round(min(self._threshold + self.relax_step, self.max_threshold), 6)
        return True

    # ------------------------------------------------------------------ state

    @property
    def kept(self) -> list[Scenario]:
        """Scenarios kept by offer/offer_many (existing ones excluded)."""
        return list(self._kept)

    def category_count(self, category: str) -> int:
        """Kept scenarios in a category, existing ones included."""
        return self._per_category[category_key(category)]

    def quota_for(self, category: str) -> int | None:
        return self.quotas.get(category_key(category), self.default_quota)

    def add_existing(self, scenarios: Iterable[Scenario]) -> None:
        """Scenarios from earlier runs: compared against and counted, never dropped."""
        scenarios = list(scenarios)
        if not scenarios:  # nothing to embed: do not load the model for it
            return
        vectors = self.embedder.embed([scenario_text(s) for s in scenarios])
        for scenario, vector in zip(scenarios, vectors):
            self._add(scenario, vector)

    def _add(self, scenario: Scenario, vector: np.ndarray) -> None:
        if not self._rows:  # the first vector fixes the width
            self._matrix = np.zeros((64, vector.shape[0]), dtype=np.float32)
        if len(self._rows) == self._matrix.shape[0]:  # grow by doubling: amortized O(1) appends
            self._matrix = np.concatenate([self._matrix, np.zeros_like(self._matrix)])
        self._matrix[len(self._rows)] = vector
        self._rows.append(scenario)
        self._names.setdefault(name_key(scenario.name), scenario)
        self._per_category[category_key(scenario.category)] += 1

    # ------------------------------------------------------------------ decisions

    async def offer(self, scenario: Scenario) -> Decision:
        """Decide one candidate; a kept one is compared against from then on."""
        return (await self.offer_many([scenario]))[0]

    async def offer_many(self, scenarios: Sequence[Scenario]) -> list[Decision]:
        """Decide candidates in order, as if offered one by one, with batched embedding and matrix products."""
        scenarios = list(scenarios)
        # Candidates whose name is already kept are dropped whatever their text: skip embedding them.
        to_embed = [i for i, s in enumerate(scenarios) if name_key(s.name) not in self._names]
        vectors = np.zeros((len(scenarios), 0), dtype=np.float32)
        if to_embed:
            embedded = self.embedder.embed([scenario_text(scenarios[i]) for i in to_embed])
            vectors = np.zeros((len(scenarios), embedded.shape[1]), dtype=np.float32)
            vectors[to_embed] = embedded
        decisions: list[Decision] = []
        for start in range(0, len(scenarios), BLOCK_SIZE):
            block = scenarios[start : start + BLOCK_SIZE]
            decisions += await self._decide_block(block, vectors[start : start + BLOCK_SIZE])
        return decisions

    async def _decide_block(self, block: list[Scenario], vectors: np.ndarray) -> list[Decision]:
        # Similarities to rows kept before the block, in one product...
        before = len(self._rows)
        best_before = np.full(len(block), -np.inf, dtype=np.float32)
        arg_before = np.zeros(len(block), dtype=np.int64)
        if before and vectors.shape[1]:
            sims = vectors @ self._matrix[:before].T
            arg_before = sims.argmax(axis=1)
            best_before = sims[np.arange(len(block)), arg_before]
        # ...and among the block itself, for candidates kept earlier in it.
        within = vectors @ vectors.T if vectors.shape[1] else None
        kept_in_block: list[int] = []  # block positions kept so far
        kept_rows: list[int] = []  # their matrix rows
        decisions = []
        for i, scenario in enumerate(block):
            same = self._names.get(name_key(scenario.name))
            if same is not None:
                decisions.append(Decision(scenario, "same_name", f"same name as kept {same.name!r}", same))
                continue
            similarity, row = float(best_before[i]), int(arg_before[i])
            if kept_in_block:
                sims_in = within[i, kept_in_block]
                j = int(sims_in.argmax())
                if sims_in[j] > similarity:
                    similarity, row = float(sims_in[j]), kept_rows[j]
            nearest = self._rows[row] if similarity > -np.inf else None
            decision = await self._decide(scenario, nearest, similarity if nearest else None)
            decisions.append(decision)
            if decision.kept:
                kept_in_block.append(i)
                kept_rows.append(len(self._rows))
                self._add(scenario, vectors[i])
                self._kept.append(scenario)
        return decisions

    async def _decide(self, scenario: Scenario, nearest: Scenario | None, similarity: float | None) -> Decision:
        if nearest is None or similarity is None:
            return Decision(scenario, "unique", "nothing kept yet to compare with")
        versus = f"cosine {similarity:.3f} to {nearest.name!r}"
        if similarity >= self._threshold:
            return Decision(scenario, "similar", f"{versus} >= threshold {self._threshold:.3f}", nearest, similarity)
        if similarity < self.band_floor:
            return Decision(scenario, "unique", f"{versus} < {self.band_floor:.3f}", nearest, similarity)
        band = f"{versus} in borderline band [{self.band_floor:.3f}, {self._threshold:.3f})"
        quota = self.quota_for(scenario.category)
        have = self.category_count(scenario.category)
        if quota is not None and have >= quota:
            reason = f"{band}; category {category_key(scenario.category) or '(none)'!r} has {have} of quota {quota}"
            return Decision(scenario, "borderline_quota_full", reason, nearest, similarity)
        if self.judge is not None:
            try:
                duplicate = await self.judge(scenario, nearest)
            except Exception as exc:  # noqa: BLE001 - a failed judge must not stop the stage; the reason says so
                return Decision(scenario, "borderline_kept", f"{band}; judge failed ({exc}), kept", nearest, similarity)
            if duplicate:
                return Decision(scenario, "judge_duplicate", f"{band}; judge: duplicate", nearest, similarity)
            return Decision(scenario, "borderline_kept", f"{band}; judge: distinct", nearest, similarity)
        room = f"category under quota {quota}" if quota is not None else "no category quota"
        return Decision(scenario, "borderline_kept", f"{band}; {room}", nearest, similarity)


# ---------------------------------------------------------------------- batch entry points


def default_quota(categories: Iterable[str], target: int) -> int:
    """ceil(target / number of categories): an even share per category."""
    distinct = {category_key(c) for c in categories}
    return math.ceil(target / max(1, len(distinct)))


async def dedup_async(
    scenarios: Sequence[Scenario],
    embedder: Embedder,
    *,
    existing: Sequence[Scenario] = (),
    threshold: float | None = None,
    borderline: float | None = None,
    target: int | None = None,
    quotas: Mapping[str, int] | None = None,
    judge: Judge | None = None,
) -> DedupResult:
    """Dedup a list of candidates against each other and `existing`.

    threshold / borderline default to the Settings defaults. `target` is the
    total number of scenarios wanted (existing included; default: all of them)
    and sets the quota of categories missing from `quotas`:
    ceil(target / number of categories).
    """
    defaults = Settings.model_fields
    threshold = defaults["dedup_threshold"].default if threshold is None else threshold
    borderline = defaults["dedup_borderline"].default if borderline is None else borderline
    categories = [s.category for s in (*scenarios, *existing)] + list(quotas or {})
    share = default_quota(categories, target if target is not None else len(scenarios) + len(existing))
    deduper = Deduper(
        embedder, threshold=threshold, borderline=borderline, quotas=quotas, default_quota=share, judge=judge
    )
    deduper.add_existing(existing)
    decisions = await deduper.offer_many(scenarios)
    return DedupResult(decisions, deduper.threshold)


def dedup(scenarios: Sequence[Scenario], embedder: Embedder, **options) -> DedupResult:
    """Synchronous `dedup_async` for scripts and the CLI (not callable inside a running event loop)."""
    return asyncio.run(dedup_async(scenarios, embedder, **options))


# ---------------------------------------------------------------------- files


def dedup_file(
    source: Path,
    out: Path,
    settings: Settings,
    *,
    target: int | None = None,
    existing_dir: Path | None = None,
) -> tuple[DedupResult, Path]:
    """Dedup a JSONL of {name, description, category} rows into `out` (kept rows,
    as given) and `out`.rejected.jsonl (dropped rows plus a `dedup` reason).
    Returns the result and the rejected file's path."""
    from synth.pipeline.scenario_files import load_existing, read_scenarios, rejected_path, write_jsonl

    scenarios, rows = read_scenarios(source)
    existing = load_existing(existing_dir) if existing_dir is not None else []
    with Embedder(None if settings.no_cache else settings.cache_dir) as embedder:
        result = dedup(
            scenarios,
            embedder,
            existing=existing,
            threshold=settings.dedup_threshold,
            borderline=settings.dedup_borderline,
            target=target,
        )
    rejected = rejected_path(out)
    write_jsonl(out, (row for row, d in zip(rows, result.decisions) if d.kept))
    write_jsonl(rejected, ({**row, "dedup": d.to_row()} for row, d in zip(rows, result.decisions) if not d.kept))
    return result, rejected
