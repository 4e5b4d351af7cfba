"""The model-call cache: canonical request hash -> validated response, in SQLite.

Only answers that passed validation are stored (a failed validation or a
refusal never is), so a rerun repeats exactly the calls that did not succeed.
Timeouts, concurrency and retry settings are not part of the key.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

import sqlite_utils

from synth.folder.sqlitedb import LockedDatabase

CACHE_FILE = "llm-cache.sqlite"


def request_key(request: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a request (sorted keys, no whitespace)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def m001_responses(db: sqlite_utils.Database) -> None:
    db["responses"].create(
        {
            "key": str,
            "provider": str,
            "model": str,
            "stage": str,
            "subject": str,
            "response": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "created": float,
        },
        pk="key",
    )
    db["responses"].create_index(["stage"])


class ResponseCache:
    def __init__(self, directory: Path):
        self.path = Path(directory) / CACHE_FILE
        self._store = LockedDatabase(self.path, [m001_responses])

    def get(self, key: str) -> dict[str, Any] | None:
        with self._store.lock:
            rows = list(self._store.db["responses"].rows_where("key = ?", [key]))
        return json.loads(rows[0]["response"]) if rows else None

    def put(self, key: str, *, provider: str, model: str, stage: str, subject: str, response: dict[str, Any]) -> None:
        with self._store.lock:
            self._store.db["responses"].insert(
                {
                    "key": key,
                    "provider": provider,
                    "model": model,
                    "stage": stage,
                    "subject": subject,
                    "response": json.dumps(response),
                    "prompt_tokens": response.get("prompt_tokens", 0),
                    "completion_tokens": response.get("completion_tokens", 0),
                    "created": time.time(),
                },
                replace=True,
            )

    def stats(self) -> dict[str, Any]:
        with self._store.lock:
            rows = self._store.db.execute(
                "select stage, model, count(*), sum(prompt_tokens), sum(completion_tokens) "
                "from responses group by stage, model order by stage, model"
            ).fetchall()
        groups = [
            {"stage": s, "model": m, "entries": n, "prompt_tokens": p or 0, "completion_tokens": c or 0}
            for s, m, n, p, c in rows
        ]
        size = self.path.stat().st_size if self.path.exists() else 0
        return {"path": str(self.path), "entries": sum(g["entries"] for g in groups), "bytes": size, "groups": groups}

    def clear(self, stage: str | None = None) -> int:
        with self._store.lock:
            table = self._store.db["responses"]
            where, args = ("stage = ?", [stage]) if stage else ("1 = 1", [])
            n = table.count_where(where, args)
            self._store.db.execute(f"delete from responses where {where}", args)
        self._store.db.execute("VACUUM")
        return n

    def close(self) -> None:
        self._store.close()
