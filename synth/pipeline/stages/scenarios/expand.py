"""Stage `expand`: self-instruct expansion of one seed domain into concrete scenarios.

One round is one model call that proposes a few applications for a seed. Rounds
differ on purpose, for diversity: a rotating focus category, rotating few-shot
examples taken from scenarios accepted earlier (any seed), and the most recent
accepted scenarios (name and one line each) listed as ones to avoid; with none
kept yet the prompt does not mention any. The round loop itself (what counts as
accepted, stalls, the budget) lives in `synth.pipeline.scenarios`; this module owns the
per-seed state, the prompt and the answer check.

Model calls: stage "expand", subject = slug of the seed name (e.g. "hotel_booking"),
sample = round number (1, 2, ...), so every round has its own cache key even when
its prompt happens to repeat. Answer model: `ScenarioBatch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from synth.artifacts import ScenarioBatch, Scenario, Seed, slugify
from synth.llm import Gateway
from synth.pipeline.prompts import render_prompt

STAGE = "expand"
MIN_WORDS, MAX_WORDS = 150, 300
MAX_PER_ROUND = 5  # a small batch keeps each answer well inside max_tokens
N_EXAMPLES = 2
N_AVOID = 40  # most recent accepted names shown as taken

# Broad categories the focus rotates through after the seed's own category.
FOCUS_CATEGORIES = (
    "healthcare", "education", "logistics", "retail", "finance", "hospitality", "government",
    "manufacturing", "real estate", "nonprofit", "agriculture", "entertainment", "transportation",
    "human resources", "legal", "sports and fitness",
)


@dataclass
class SeedProgress:
    """Where expansion of one seed stands."""

    seed: Seed
    index: int  # position in the seed list: offsets the focus rotation between seeds
    target: int
    accepted: list[Scenario] = field(default_factory=list)
    rounds: int = 0
    stall: int = 0  # rounds in a row with no new accepted scenario
    exhausted: str | None = None  # why this seed can give no more (stalled), else None

    @property
    def slug(self) -> str:
        return slugify(self.seed.name)

    @property
    def room(self) -> int:
        return max(0, self.target - len(self.accepted))

    @property
    def active(self) -> bool:
        return self.exhausted is None and self.room > 0

    def round_id(self, round_no: int) -> str:
        return f"{self.slug}/r{round_no:02d}"


def word_count(text: str) -> int:
    return len(text.split())


def check_batch(batch: ScenarioBatch) -> list[str]:
    """Problems fed back to the model by the gateway (empty when the batch is fine)."""
    if not batch.scenarios:
        return ["the answer has no scenarios; propose at least one"]
    problems = []
    for i, draft in enumerate(batch.scenarios):
        label = f"scenarios[{i}] ({draft.name.strip() or 'unnamed'})"
        if not draft.name.strip():
            problems.append(f"scenarios[{i}]: name is empty")
        if not draft.category.strip():
            problems.append(f"{label}: category is empty")
        words = word_count(draft.description)
        if not MIN_WORDS <= words <= MAX_WORDS:
            problems.append(f"{label}: description has {words} words; it must have {MIN_WORDS}-{MAX_WORDS}")
    return problems


def focus_for(progress: SeedProgress, round_no: int) -> str:
    """The seed's own category first, then the broad categories, shifted per seed."""
    others = [c for c in FOCUS_CATEGORIES if c != progress.seed.category.lower()]
    shift = progress.index % len(others)
    cycle = ([progress.seed.category] if progress.seed.category else []) + others[shift:] + others[:shift]
    return cycle[(round_no - 1) % len(cycle)]


def pick_examples(pool: Sequence[Scenario], round_no: int, k: int = N_EXAMPLES) -> list[Scenario]:
    """A window of k earlier scenarios that moves on every round."""
    if not pool:
        return []
    k = min(k, len(pool))
    start = ((round_no - 1) * k) % len(pool)
    return [pool[(start + i) % len(pool)] for i in range(k)]


def one_line(text: str, limit: int = 140) -> str:
    """The first sentence of a description, shortened to `limit` characters."""
    text = " ".join(text.split())
    end = next((i + 1 for i, ch in enumerate(text) if ch in ".!?" and (i + 1 == len(text) or text[i + 1] == " ")),
               len(text))
    head = text[:end]
    return head if len(head) <= limit else head[: limit - 3].rstrip() + "..."


def avoid_list(pool: Sequence[Scenario], progress: SeedProgress, limit: int = N_AVOID) -> list[dict[str, str]]:
    """The scenarios already kept that a round must not repeat: this seed's own plus the most recent
    ones overall, newest last, no repeats; each as its name and one line of its description."""
    seen: dict[str, dict[str, str]] = {}
    for s in [*pool[-limit:], *progress.accepted]:
        seen.setdefault(s.name, {"name": s.name, "line": one_line(s.description)})
    return list(seen.values())


def expand_messages(
    progress: SeedProgress, round_no: int, *, pool: Sequence[Scenario], count: int
) -> list[dict[str, str]]:
    return render_prompt(
        "expand",
        seed=progress.seed,
        count=count,
        focus=focus_for(progress, round_no),
        examples=pick_examples(pool, round_no),
        avoid=avoid_list(pool, progress),
        min_words=MIN_WORDS,
        max_words=MAX_WORDS,
    )


async def propose(
    progress: SeedProgress, round_no: int, gateway: Gateway, *, pool: Sequence[Scenario]
) -> list[Scenario]:
    """One self-instruct round: ask for up to MAX_PER_ROUND new scenarios for this seed.

    `pool` is every scenario accepted so far (existing ones first), in order.
    Raises the gateway's errors (ModelError and subclasses) to the caller.
    """
    count = max(1, min(MAX_PER_ROUND, progress.room))
    batch = await gateway.structured(
        ScenarioBatch,
        expand_messages(progress, round_no, pool=pool, count=count),
        stage=STAGE,
        subject=progress.slug,
        check=check_batch,
        sample=round_no,
    )
    return [
        Scenario(name=d.name.strip(), description=d.description.strip(), category=d.category.strip().lower(),
                 seed=progress.seed.name)
        for d in batch.scenarios
    ]
