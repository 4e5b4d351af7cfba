"""Opening synth's own SQLite files (run store, model cache) with ordered migrations.

Each file keeps a `_migrations` table naming the migrations applied, so a
newer synth can open an older file and bring it up to date in order.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import sqlite_utils

Migration = Callable[[sqlite_utils.Database], None]


class LockedDatabase:
    """A sqlite-utils Database shared between threads behind one lock."""

    def __init__(self, path: Path | str, migrations: Sequence[Migration]):
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        self.path = path
        self.db = sqlite_utils.Database(conn)
        self.lock = threading.RLock()
        self._migrate(migrations)

    def _migrate(self, migrations: Sequence[Migration]) -> None:
        with self.lock:
            done = self.db["_migrations"]
            if not done.exists():
                done.create({"name": str}, pk="name")
            applied = {row["name"] for row in done.rows}
            for migration in migrations:
                if migration.__name__ not in applied:
                    migration(self.db)
                    done.insert({"name": migration.__name__})

    def close(self) -> None:
        self.db.conn.close()
