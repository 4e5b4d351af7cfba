"""Gate `database`: the shipped initial database is sound and reproducible.

- PRAGMA integrity_check and foreign_key_check are clean on db/initial.sqlite;
- db/schema.sql + db/data.sql rebuild (foreign keys on) to the same bytes, and
  env.json's initial_db_sha256 names those bytes, so what a trainer loads is
  exactly what the reviewed SQL says.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from synth.artifacts import GateResult
from synth.errors import InputError
from synth.folder.database import DatabaseError, build_database, check_database, db_sha256, open_bytes
from synth.folder.files import read_env_bytes, read_env_text

from .common import Findings, read_folder

NAME = "database"


def run(env_dir: Path | str, env=None) -> GateResult:  # noqa: ARG001 - same signature as every gate
    folder = read_folder(env_dir)
    found = Findings(NAME)
    root = folder.root
    try:  # no symlink, no special file, no size beyond the limit (synth.folder.files)
        initial = read_env_bytes(root, "db/initial.sqlite")
    except InputError as exc:
        initial = None
        found.env(f"db/initial.sqlite: {exc}")
    if initial is not None:
        try:
            conn = open_bytes(initial, readonly=True)
            try:
                for problem in check_database(conn):
                    found.env(f"db/initial.sqlite: {problem}")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            found.env(f"db/initial.sqlite is not a readable SQLite database: {exc}")
    sql = {}
    for rel in ("db/schema.sql", "db/data.sql"):
        try:
            sql[rel] = read_env_text(root, rel)
        except InputError as exc:
            found.env(f"{rel}: {exc}")
    rebuilt_sha = None
    if len(sql) == 2:
        try:
            rebuilt_sha = db_sha256(build_database(sql["db/schema.sql"], sql["db/data.sql"]))
        except DatabaseError as exc:
            for problem in exc.problems[:10]:
                found.env(f"rebuilding from db/schema.sql + db/data.sql: {problem}")
    initial_sha = db_sha256(initial) if initial is not None else None
    if rebuilt_sha and initial_sha and rebuilt_sha != initial_sha:
        found.env("db/schema.sql + db/data.sql do not rebuild to db/initial.sqlite "
                  f"(sha256 {rebuilt_sha[:12]} != {initial_sha[:12]})")
    declared = folder.manifest.get("initial_db_sha256")
    if initial_sha and declared != initial_sha:
        found.env(f"env.json initial_db_sha256 {str(declared)[:12]!r} does not match db/initial.sqlite "
                  f"({initial_sha[:12]})")
    return found.result(initial_sha256=initial_sha, rebuilt_sha256=rebuilt_sha)
