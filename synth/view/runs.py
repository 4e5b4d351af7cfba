"""A run folder for the viewer: summary.json (funnel, failures, usage) and run.sqlite
(items and model calls), opened read-only. A run that has not finished has no
summary.json yet; its page is built from run.sqlite alone."""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FUNNEL = ("seeds", "candidates", "crud_able", "unique", "built", "verified")
CALLS_PAGE = 100


@dataclass
class RunInfo:
    path: Path
    id: str
    summary: dict[str, Any]
    config: dict[str, Any]
    error: str | None = None

    @property
    def funnel(self) -> dict[str, int]:
        f = self.summary.get("funnel") or {}
        return {k: f.get(k) for k in FUNNEL if k in f}

    @property
    def total_usage(self) -> dict[str, Any]:
        return ((self.summary.get("usage") or {}).get("total")) or {}


def _read_json(path: Path) -> tuple[dict[str, Any], str | None]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return (data, None) if isinstance(data, dict) else ({}, f"{path.name} is not a JSON object")
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"{path.name} is unreadable: {exc}"


def load_run(path: Path) -> RunInfo:
    summary, err1 = _read_json(path / "summary.json")
    config, err2 = _read_json(path / "config.json")
    errors = [e for e in (err1, err2) if e]
    if not summary and not err1:
        errors.append("no summary.json yet (the run has not finished); figures come from run.sqlite")
    return RunInfo(path=path, id=summary.get("run_id") or path.name, summary=summary, config=config,
                   error="; ".join(errors) or None)


def _connect(path: Path) -> sqlite3.Connection | None:
    db = path / "run.sqlite"
    if not db.is_file():
        return None
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    return conn


def _query(path: Path, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
    conn = _connect(path)
    if conn is None:
        return []
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error:
        return []  # an old or damaged run database: the page shows what summary.json has
    finally:
        conn.close()


def stage_usage(path: Path) -> list[dict[str, Any]]:
    """Per stage: calls, cached, tokens, cost and model time (sum of call latencies), in pipeline order."""
    rows = _query(path, "SELECT stage, count(*) AS calls, sum(cached) AS cached, "
                        "sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens, "
                        "sum(cost) AS cost, sum(latency) AS seconds, min(time) AS first FROM calls GROUP BY stage "
                        "ORDER BY first")
    return [{**dict(r), "tokens": (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)} for r in rows]


def item_counts(path: Path) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    for r in _query(path, "SELECT stage, status, count(*) AS n FROM items GROUP BY stage, status"):
        counts[r["stage"]][r["status"]] = r["n"]
    return dict(counts)


def env_costs(path: Path) -> dict[str, dict[str, float]]:
    """Tokens and cost per env, from the model calls whose subject is the env id (or env_id/...)."""
    out: dict[str, dict[str, float]] = {}
    for r in _query(path, "SELECT subject, count(*) AS calls, sum(prompt_tokens + completion_tokens) AS tokens, "
                          "sum(cost) AS cost FROM calls GROUP BY subject"):
        env_id = str(r["subject"] or "").split("/")[0]
        e = out.setdefault(env_id, {"calls": 0, "tokens": 0, "cost": 0.0})
        e["calls"] += r["calls"]
        e["tokens"] += r["tokens"] or 0
        e["cost"] += r["cost"] or 0.0
    return out


CALL_FILTERS = ("stage", "status", "subject", "cached")


def calls(path: Path, filters: dict[str, str], page: int = 1) -> tuple[list[dict[str, Any]], int]:
    """One page of model calls matching the filters, and how many match in all."""
    where, params = [], []
    if filters.get("stage"):
        where.append("stage = ?")
        params.append(filters["stage"])
    if filters.get("status"):
        where.append("status = ?")
        params.append(filters["status"])
    if filters.get("subject"):
        where.append("subject LIKE ?")
        params.append(f"%{filters['subject']}%")
    if filters.get("cached") in ("0", "1"):
        where.append("cached = ?")
        params.append(int(filters["cached"]))
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    total = _query(path, f"SELECT count(*) AS n FROM calls{clause}", tuple(params))
    rows = _query(path, f"SELECT * FROM calls{clause} ORDER BY id LIMIT ? OFFSET ?",
                  (*params, CALLS_PAGE, (max(page, 1) - 1) * CALLS_PAGE))
    return [dict(r) for r in rows], (total[0]["n"] if total else 0)


def call_choices(path: Path) -> dict[str, list[str]]:
    return {col: [r[0] for r in _query(path, f"SELECT DISTINCT {col} FROM calls ORDER BY {col}") if r[0] is not None]
            for col in ("stage", "status")}


def failure_groups(run: RunInfo) -> list[dict[str, Any]]:
    """summary.json's failures grouped by reason, each with its count and up to five example items
    (env ids for build and verify failures, scenario names or items for earlier stages)."""
    groups = []
    for reason, info in (run.summary.get("failures") or {}).items():
        info = info if isinstance(info, dict) else {}
        groups.append({"reason": reason, "count": info.get("count", 0), "examples": list(info.get("examples") or [])})
    return groups
