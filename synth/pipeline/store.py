"""The run store: a run folder with its resolved config and a run database.

generated/runs/<run_id>/
  config.json   resolved settings (no secrets)
  run.sqlite    items (stage, item id, status, attempts, error, output) and model calls

Rerunning the same command opens the same run: items marked done are skipped,
failed ones are retried while attempts remain. Completion markers live in the
database; files are written atomically so a kill -9 leaves no half file.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from synth.atomic import write_json_atomic
from synth.errors import InputError
from synth.folder.sqlitedb import LockedDatabase

Status = Literal["pending", "running", "done", "failed"]
RUN_DB = "run.sqlite"


def derive_run_id(parts: dict[str, Any]) -> str:
    """Same inputs -> same run id, so rerunning the same command resumes it."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"run-{digest[:12]}"


# ---------------------------------------------------------------------------- migrations


def m001_items(db: sqlite_utils.Database) -> None:
    db["items"].create(
        {
            "stage": str, "item_id": str, "status": str, "attempts": int,
            "error": str, "output": str, "updated": float,
        },
        pk=("stage", "item_id"),
    )
    db["items"].create_index(["stage", "status"])


def m002_calls(db: sqlite_utils.Database) -> None:
    db["calls"].create(
        {
            "id": int, "stage": str, "subject": str, "provider": str, "model": str, "cached": int,
            "prompt_tokens": int, "completion_tokens": int, "cost": float, "latency": float,
            "status": str, "error": str, "time": float,
        },
        pk="id",
    )
    db["calls"].create_index(["stage"])


def m003_cached_tokens(db: sqlite_utils.Database) -> None:
    """Prompt tokens the provider served from its prompt cache (priced at the cached rate)."""
    db["calls"].add_column("cached_tokens", int, not_null_default=0)


def m004_reused_tokens(db: sqlite_utils.Database) -> None:
    """For an answer served from the cache: the tokens it cost when it was first asked (a resumed or
    repeated run reuses it for nothing, but it is part of what the env cost)."""
    db["calls"].add_column("reused_prompt_tokens", int, not_null_default=0)
    db["calls"].add_column("reused_completion_tokens", int, not_null_default=0)


MIGRATIONS = [m001_items, m002_calls, m003_cached_tokens, m004_reused_tokens]


RUN_STAGES = frozenset({"ping", "expand", "classify", "dedup_judge"})  # about the run's scenarios, not one env


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def check_output_folder(out: Path | str) -> Path:
    """An output folder given as a file is one error line before anything is started."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; pass a folder (it will hold envs/, runs/ and .cache/)")
    return out


class RunStore:
    def __init__(self, run_dir: Path):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._store = LockedDatabase(self.dir / RUN_DB, MIGRATIONS)

    @classmethod
    def open(cls, out: Path, run_id: str) -> "RunStore":
        return cls(check_output_folder(out) / "runs" / run_id)

    @property
    def run_id(self) -> str:
        return self.dir.name

    def write_config(self, config: dict[str, Any]) -> None:
        write_json_atomic(self.dir / "config.json", config)

    # ------------------------------------------------------------------ items

    def get(self, stage: str, item_id: str) -> dict[str, Any] | None:
        with self._store.lock:
            rows = list(self._store.db["items"].rows_where("stage = ? and item_id = ?", [stage, item_id]))
        if not rows:
            return None
        row = rows[0]
        row["output"] = json.loads(row["output"]) if row["output"] else None
        return row

    def is_done(self, stage: str, item_id: str) -> bool:
        row = self.get(stage, item_id)
        return bool(row and row["status"] == "done")

    def should_run(self, stage: str, item_id: str, max_attempts: int) -> bool:
        """Not done, and (if failed before) attempts remain."""
        row = self.get(stage, item_id)
        if row is None:
            return True
        if row["status"] == "done":
            return False
        return row["attempts"] < max_attempts

    def start(self, stage: str, item_id: str) -> int:
        """Mark running and count the attempt; returns the attempt number."""
        with self._store.lock:
            row = self.get(stage, item_id)
            attempts = (row["attempts"] if row else 0) + 1
            self._upsert(stage, item_id, status="running", attempts=attempts, error=None)
        return attempts

    def finish(self, stage: str, item_id: str, output: Any = None) -> None:
        self._upsert(stage, item_id, status="done", error=None, output=json.dumps(output, default=str))

    def fail(self, stage: str, item_id: str, error: str) -> None:
        self._upsert(stage, item_id, status="failed", error=error)

    def _upsert(self, stage: str, item_id: str, **fields: Any) -> None:
        with self._store.lock:
            self._store.db["items"].upsert(
                {"stage": stage, "item_id": item_id, "updated": time.time(), **fields}, pk=("stage", "item_id")
            )

    def items(self, stage: str | None = None, status: Status | None = None) -> list[dict[str, Any]]:
        where, args = [], []
        if stage:
            where.append("stage = ?")
            args.append(stage)
        if status:
            where.append("status = ?")
            args.append(status)
        with self._store.lock:
            rows = list(self._store.db["items"].rows_where(" and ".join(where) or None, args, order_by="rowid"))
        for row in rows:
            row["output"] = json.loads(row["output"]) if row["output"] else None
        return rows

    def export_items(self, item_id: str, stages: tuple[str, ...]) -> list[dict[str, Any]]:
        """The raw rows of one item in the given stages, for another store to take over (a Ray worker's)."""
        marks = ", ".join("?" for _ in stages)
        with self._store.lock:
            return list(self._store.db["items"].rows_where(f"item_id = ? and stage in ({marks})", [item_id, *stages]))

    def import_items(self, rows: list[dict[str, Any]]) -> None:
        """Take over rows as `export_items` gave them (replacing this store's rows for those items)."""
        with self._store.lock:
            for row in rows:
                self._store.db["items"].upsert(row, pk=("stage", "item_id"))

    def counts(self) -> dict[str, dict[str, int]]:
        """{stage: {status: n}}."""
        with self._store.lock:
            rows = self._store.db.execute("select stage, status, count(*) from items group by stage, status").fetchall()
        out: dict[str, dict[str, int]] = {}
        for stage, status, n in rows:
            out.setdefault(stage, {})[status] = n
        return out

    # ------------------------------------------------------------------ model calls

    def record_call(self, record: dict[str, Any]) -> None:
        with self._store.lock:
            self._store.db["calls"].insert({**record, "cached": int(bool(record.get("cached")))})

    def usage(self) -> dict[str, Any]:
        """Totals over the run's model calls, overall and per stage."""
        with self._store.lock:
            rows = self._store.db.execute(
                "select stage, count(*), sum(cached), sum(prompt_tokens), sum(completion_tokens), sum(cost), "
                "sum(cached_tokens), sum(reused_prompt_tokens + reused_completion_tokens) from calls "
                "where status != 'error' group by stage"
            ).fetchall()
        stages = {  # reused_tokens: what the answers taken from the cache cost when first asked
            s: {"calls": n, "cached": c or 0, "prompt_tokens": p or 0, "completion_tokens": o or 0, "cost": k or 0.0,
                "cached_tokens": ct or 0, "reused_tokens": r or 0}
            for s, n, c, p, o, k, ct, r in rows
        }
        total = {key: sum(v[key] for v in stages.values()) for key in
                 ("calls", "cached", "prompt_tokens", "completion_tokens", "cost", "cached_tokens", "reused_tokens")}
        return {"total": total, "stages": stages}

    def usage_by_env(self, until: str | None = None) -> dict[str, dict[str, Any]]:
        """Model usage per env (the subject's part before "/"): calls, cached calls, tokens (and
        `reused_tokens`, what the cached answers cost when first asked), cost, and
        `busy_seconds`, the time at least one of its calls was in flight (its critical path through the
        model, however many calls ran at once). Stages about the run as a whole (ping, expand) have
        no env subject and are left out. `until` (a stage, e.g. "verify"): each env's calls only up to
        the end of its item of that stage, so what the env cost to verify is not mixed with the tasks
        step after it."""
        with self._store.lock:
            rows = self._store.db.execute(
                "select subject, stage, cached, prompt_tokens, completion_tokens, cost, latency, time, "
                "reused_prompt_tokens, reused_completion_tokens from calls where status != 'error'").fetchall()
            ends = dict(self._store.db.execute(
                "select item_id, updated from items where stage = ? and status in ('done', 'failed')",
                [until]).fetchall()) if until else {}
        out: dict[str, dict[str, Any]] = {}
        spans: dict[str, list[tuple[float, float]]] = {}
        for subject, stage, cached, prompt, completion, cost, latency, when, reused_p, reused_c in rows:
            if stage in RUN_STAGES or not subject:
                continue
            env = str(subject).split("/", 1)[0]
            if env in ends and when is not None and float(when) > float(ends[env]):
                continue
            row = out.setdefault(env, {"calls": 0, "cached": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                       "reused_tokens": 0, "cost": 0.0, "busy_seconds": 0.0})
            row["calls"] += 1
            row["cached"] += int(bool(cached))
            row["prompt_tokens"] += prompt or 0
            row["completion_tokens"] += completion or 0
            row["reused_tokens"] += (reused_p or 0) + (reused_c or 0)
            row["cost"] += cost or 0.0
            if not cached and when is not None:
                spans.setdefault(env, []).append((float(when) - float(latency or 0), float(when)))
        for env, intervals in spans.items():
            out[env]["busy_seconds"] = round(_covered(intervals), 1)
        return out

    def close(self) -> None:
        self._store.close()
