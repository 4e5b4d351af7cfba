"""Token usage, cost and the budget.

Prices live in a JSON data file (bundled prices.json, or the user's own via
--prices-file) so users can edit them without touching code.
"""

from __future__ import annotations

import fnmatch
import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Protocol

from synth.config import ConfigError
from synth.llm.errors import BudgetExceeded, RunHalted


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M prompt tokens
    output: float  # USD per 1M completion tokens
    cached_input: float | None = None  # USD per 1M prompt tokens read from the provider's cache (default: input)
    cache_write: float | None = None  # USD per 1M prompt tokens written to it (default: input)


def _price(entry: dict) -> Price:
    optional = {k: float(entry[k]) for k in ("cached_input", "cache_write") if entry.get(k) is not None}
    return Price(float(entry["input"]), float(entry["output"]), **optional)


class PriceTable:
    def __init__(self, entries: dict[str, Price]):
        self.entries = entries

    @classmethod
    def load(cls, path: Path | None = None) -> "PriceTable":
        if path is None:
            raw = resources.files("synth.llm").joinpath("prices.json").read_text()
            where = "bundled prices.json"
        else:
            if not Path(path).exists():
                raise ConfigError(f"price file {path} not found; pass an existing JSON file to --prices-file")
            raw, where = Path(path).read_text(), str(path)
        try:
            data = json.loads(raw)
            entries = {k: _price(v) for k, v in data.items() if not k.startswith("_")}
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{where}: expected {{\"provider/model\": {{\"input\": usd, \"output\": usd, "
                              f"\"cached_input\": usd (optional)}}}} ({exc})") from exc
        return cls(entries)

    def price(self, model: str) -> Price:
        if model in self.entries:
            return self.entries[model]
        for pattern, price in self.entries.items():
            if fnmatch.fnmatchcase(model, pattern):
                return price
        return Price(0.0, 0.0)

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int, *, cached_tokens: int = 0,
             cache_write_tokens: int = 0) -> float:
        """USD for one call; `cached_tokens` and `cache_write_tokens` are parts of `prompt_tokens`
        priced at the provider's cache rates."""
        p = self.price(model)
        cached = min(cached_tokens, prompt_tokens)
        written = min(cache_write_tokens, prompt_tokens - cached)
        plain = prompt_tokens - cached - written
        usd = plain * p.input + completion_tokens * p.output
        usd += cached * (p.input if p.cached_input is None else p.cached_input)
        usd += written * (p.input if p.cache_write is None else p.cache_write)
        return usd / 1_000_000


@dataclass
class Totals:
    calls: int = 0
    cached: int = 0  # answers served from synth's own cache
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the provider served from its prompt cache
    cost: float = 0.0
    invalid: int = 0  # answers that failed validation (each repair turn counts)
    reused_tokens: int = 0  # what the answers served from synth's cache cost when first asked

    def add(self, *, cached: bool, prompt_tokens: int, completion_tokens: int, cost: float,
            cached_tokens: int = 0) -> None:
        self.calls += 1
        self.cached += int(cached)
        if cached:
            self.reused_tokens += prompt_tokens + completion_tokens
        else:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cached_tokens += cached_tokens
            self.cost += cost


class Ledger(Protocol):
    """Spending shared by several processes (the Ray executor's driver and workers)."""

    def add(self, cost: float) -> None: ...

    def total(self) -> float: ...


@dataclass
class UsageMeter:
    """Running totals (overall and per stage) and the budget check.

    `spent_before` carries cost from an earlier, interrupted attempt of the
    same run so a resumed run honours the budget it was started with. With a
    `ledger`, the budget is checked against the ledger's total instead (which
    includes `spent_before` and what other processes spent), and every cost
    recorded here is added to it.
    """

    max_cost: float | None = None
    spent_before: float = 0.0
    total: Totals = field(default_factory=Totals)
    by_stage: dict[str, Totals] = field(default_factory=lambda: defaultdict(Totals))
    # per env (a subject's part before "/"): envs in flight share the meter, so a step's own figures come from
    # its env's totals, not from the overall ones (which count every env's calls of the same minutes)
    by_env: dict[str, Totals] = field(default_factory=lambda: defaultdict(Totals))
    ledger: Ledger | None = None
    max_invalid_streak: int = 0  # 0: never halt; else halt once a stage has this many invalid answers in a row
    halted: str | None = None  # why no new call may start, though budget remains
    _streaks: dict[str, int] = field(default_factory=lambda: defaultdict(int), repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def spent(self) -> float:
        if self.ledger is not None:
            return self.ledger.total()
        return self.spent_before + self.total.cost

    @property
    def budget_reached(self) -> bool:
        """No new call may start: the budget is spent, or the run was halted (see `answer`)."""
        return self.halted is not None or (self.max_cost is not None and self.spent >= self.max_cost)

    def env(self, env_id: str) -> Totals:
        """A copy of one env's totals so far (subtract two to get a step's own figures)."""
        with self._lock:
            return Totals(**vars(self.by_env[env_id])) if env_id in self.by_env else Totals()

    def check_budget(self) -> None:
        if self.halted is not None:
            raise RunHalted(self.halted)
        if self.budget_reached:
            raise BudgetExceeded(
                f"budget of ${self.max_cost:.2f} reached (spent ${self.spent:.4f}); "
                "no new model calls start; raise --max-cost and rerun the same command to continue"
            )

    def answer(self, stage: str, *, valid: bool, problems: str = "") -> None:
        """Count a structured answer's validation. A stage whose last `max_invalid_streak` answers all
        failed (none valid in between) halts the run: a model that answers in the wrong shape would
        otherwise spend every seed's repair turns before anyone is told."""
        with self._lock:
            if valid:
                self._streaks[stage] = 0
                return
            self.total.invalid += 1
            self.by_stage[stage].invalid += 1
            self._streaks[stage] += 1
            limit = self.max_invalid_streak
            if limit and self._streaks[stage] >= limit and self.halted is None:
                latest = " ".join(problems.split())
                latest = latest if len(latest) <= 160 else latest[:160].rsplit(" ", 1)[0] + " ..."
                self.halted = (f"stopped: the last {self._streaks[stage]} answers of stage {stage} all failed "
                               f"validation (latest: {latest}); the model does not answer in the shape asked: "
                               "check --model and --base-url with `synth ping`, or use a stronger model, then "
                               "rerun the same command to resume")

    def record(self, stage: str, *, cached: bool, prompt_tokens: int, completion_tokens: int, cost: float,
               cached_tokens: int = 0, spend: bool = True, subject: str = "") -> None:
        """Count one answer; `spend=False` for a cost already in the ledger (another process's call)."""
        with self._lock:
            env = [self.by_env[subject.split("/", 1)[0]]] if subject else []
            for t in (self.total, self.by_stage[stage], *env):
                t.add(cached=cached, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost,
                      cached_tokens=cached_tokens)
        if spend and self.ledger is not None and cost and not cached:
            self.ledger.add(cost)
