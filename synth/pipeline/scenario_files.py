"""Scenario files: JSONL rows of {name, description, category}, and scenarios
already present in an output folder (from earlier runs), for dedup.

Every malformed input raises InputError with one line naming the file and line.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from synth.artifacts import Scenario
from synth.atomic import file_mode
from synth.errors import InputError
from synth.folder.files import read_env_json

SCENARIO_FIELDS = ("name", "description", "category", "seed")
REQUIRED_FIELDS = ("name", "description")


def scenario_from_row(row: Any, where: str) -> Scenario:
    """Validate one {name, description, category[, seed]} row; other keys are ignored."""
    if not isinstance(row, dict):
        raise InputError(f"{where}: expected a JSON object with name, description, category; got {type(row).__name__}")
    values: dict[str, str] = {}
    for key in SCENARIO_FIELDS:
        value = row.get(key, "")
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise InputError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
        values[key] = value.strip()
    for key in REQUIRED_FIELDS:
        if not values[key]:
            raise InputError(f"{where}: missing or empty {key!r}; each row needs name, description, category")
    return Scenario(**values)


def read_jsonl_rows(path: Path | str) -> list[tuple[int, Any]]:
    """(line number, parsed JSON value) for each non-blank line of a JSONL file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{number}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    return rows


def read_scenarios(path: Path | str) -> tuple[list[Scenario], list[dict[str, Any]]]:
    """Scenarios of a JSONL file and the original rows they came from (same order)."""
    numbered = read_jsonl_rows(path)
    scenarios = [scenario_from_row(row, f"{path}:{number}") for number, row in numbered]
    return scenarios, [row for _, row in numbered]


def load_existing(out: Path | str) -> list[Scenario]:
    """Scenarios an output folder already holds: <out>/envs/*/env.json and <out>/scenarios*.jsonl.

    env.json gives name <- "title", description <- "scenario", "category"
    and seed <- "domain". A missing folder holds nothing.
    """
    out = Path(out)
    found: list[Scenario] = []
    for manifest in sorted(out.glob("envs/*/env.json")):
        try:
            data = read_env_json(manifest.parent, "env.json")
        except InputError as exc:
            raise InputError(f"{exc}; fix or remove this env folder") from None
        row = {
            "name": data.get("title") if isinstance(data, dict) else None,
            "description": data.get("scenario") if isinstance(data, dict) else None,
            "category": data.get("category", "") if isinstance(data, dict) else None,
            "seed": data.get("domain", "") if isinstance(data, dict) else None,
        }
        found.append(scenario_from_row(row, str(manifest)))
    for jsonl in sorted(out.glob("scenarios*.jsonl")):
        if jsonl.name.endswith(".rejected.jsonl"):  # rejects are not scenarios the folder holds
            continue
        found += read_scenarios(jsonl)[0]
    return found


def write_jsonl(path: Path | str, rows: Iterable[dict[str, Any]]) -> None:
    """Write atomically (temp file + rename): a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, file_mode(path))  # mkstemp's 0600 would make the file private
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def rejected_path(out: Path | str) -> Path:
    """Where the dropped rows of OUT go: OUT with suffix .rejected.jsonl."""
    return Path(out).with_suffix(".rejected.jsonl")
