"""The env list: one summary row per env folder, read once and cached by file mtimes.

A row costs two small JSON files (env.json, report.json) plus review.json when
present; a warm request only stats those files. A folder that cannot be read
becomes a row with its error, so one broken env never breaks the page.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.errors import InputError
from synth.folder.files import EnvFileMissing, read_env_bytes, read_env_json, read_optional_json
from synth.folder.review import read_review
from synth.view.sources import Sources

_WATCHED = ("env.json", "report.json", "review.json", "tools.json", "tasks.jsonl", "tests.jsonl")
COUNT_KEYS = ("tables", "rows", "tools", "tasks", "tests")


@dataclass
class EnvRow:
    key: str
    path: Path
    id: str
    title: str = ""
    domain: str = ""
    category: str = ""
    status: str = "error"
    location: str = ""  # envs | failed | the parent folder's name
    failure_reason: str | None = None
    counts: dict[str, int | None] = field(default_factory=dict)
    cost: float | None = None
    tokens: int | None = None
    gates: dict[str, bool] = field(default_factory=dict)
    decision: str = ""  # approved | rejected | "" (undecided)
    review: dict[str, Any] | None = None
    error: str | None = None  # why this folder could not be read
    search_text: str = ""

    @property
    def gates_failed(self) -> list[str]:
        return [name for name, ok in self.gates.items() if not ok]


def files_signature(path: Path, names: tuple[str, ...] = _WATCHED) -> tuple:
    """(mtime, size) of each named file of a folder, None where missing: changes when any of them does."""
    sig = []
    for name in names:
        try:
            st = os.lstat(path / name)  # a file swapped for a link changes the signature too
            sig.append((st.st_mtime_ns, st.st_size))
        except OSError:
            sig.append(None)
    return tuple(sig)


def _line_count(path: Path, rel: str) -> int | None:
    try:
        return sum(1 for line in read_env_bytes(path, rel).splitlines() if line.strip())
    except InputError:
        return None


def _why(exc: Exception, path: Path, rel: str) -> str:
    return str(exc).removeprefix(f"{path / rel}: ")


def read_row(path: Path, key: str) -> EnvRow:
    row = EnvRow(key=key, path=path, id=path.name, location=path.parent.name)
    try:
        manifest = read_env_json(path, "env.json")
        if not isinstance(manifest, dict):
            raise ValueError("env.json is not a JSON object")
    except EnvFileMissing:
        row.error = "no env.json: not an env folder, or its build never finished"
        return row
    except (InputError, ValueError) as exc:
        row.error = f"env.json is unreadable: {_why(exc, path, 'env.json')}"
        return row
    row.id = str(manifest.get("id") or path.name)
    row.title = str(manifest.get("title") or "")
    row.domain = str(manifest.get("domain") or "")
    row.category = str(manifest.get("category") or "")
    row.status = str(manifest.get("status") or "unknown")
    row.failure_reason = manifest.get("failure_reason")
    counts = manifest.get("counts") if isinstance(manifest.get("counts"), dict) else {}
    row.counts = {k: counts.get(k) for k in COUNT_KEYS}
    if row.counts["tools"] is None:
        try:
            tools = read_optional_json(path, "tools.json")
            row.counts["tools"] = len(tools) if isinstance(tools, list) else None
        except InputError:
            pass
    for k, name in (("tasks", "tasks.jsonl"), ("tests", "tests.jsonl")):
        if row.counts[k] is None:
            row.counts[k] = _line_count(path, name)
    problems = []
    try:
        report = read_optional_json(path, "report.json", {})
        if not isinstance(report, dict):
            raise ValueError("report.json is not a JSON object")
    except (InputError, ValueError) as exc:
        report = {}
        problems.append(f"report.json is unreadable: {_why(exc, path, 'report.json')}")
    usage = report.get("verify_usage") or report.get("usage") or {}
    if isinstance(usage, dict):
        row.cost = usage.get("cost")
        if usage.get("prompt_tokens") is not None:
            row.tokens = int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
    results = (report.get("gates") or {}).get("results") or {}
    if isinstance(results, dict):
        row.gates = {str(name): bool(r.get("passed")) for name, r in results.items() if isinstance(r, dict)}
    try:
        row.review = read_review(path)
        row.decision = row.review["decision"] if row.review else ""
    except InputError as exc:
        problems.append(str(exc))
    row.error = "; ".join(problems) or None
    row.search_text = " ".join([row.id, row.title, row.domain, row.category, str(manifest.get("scenario") or ""),
                                row.failure_reason or "", row.review.get("note", "") if row.review else ""]).lower()
    return row


class EnvIndex:
    """Rows for every env folder of `sources`, re-read only when a watched file changes."""

    def __init__(self, sources: Sources):
        self.sources = sources
        self._cache: dict[Path, tuple[tuple, EnvRow]] = {}
        self._lock = threading.Lock()

    def rows(self) -> list[EnvRow]:
        paths = self.sources.envs()
        keys = url_keys(paths)
        rows = []
        with self._lock:
            for path in paths:
                sig = files_signature(path)
                cached = self._cache.get(path)
                if cached is None or cached[0] != sig or cached[1].key != keys[path]:
                    cached = (sig, read_row(path, keys[path]))
                    self._cache[path] = cached
                rows.append(cached[1])
            for gone in set(self._cache) - set(paths):
                del self._cache[gone]
        return rows

    def get(self, key: str) -> EnvRow | None:
        return next((r for r in self.rows() if r.key == key), None)

    def by_env_id(self) -> dict[str, EnvRow]:
        return {r.id: r for r in self.rows()}


def url_keys(paths: list[Path]) -> dict[Path, str]:
    """URL keys: the folder name, with the parent's name prefixed when two folders share a name."""
    names: dict[str, int] = {}
    for p in paths:
        names[p.name] = names.get(p.name, 0) + 1
    keys, used = {}, set()
    for p in paths:
        key = p.name if names[p.name] == 1 else f"{p.parent.name}~{p.name}"
        n = 2
        base = key
        while key in used:
            key, n = f"{base}~{n}", n + 1
        used.add(key)
        keys[p] = key
    return keys


def filter_rows(rows: list[EnvRow], *, status: str = "", category: str = "", gate_failed: str = "",
                decision: str = "", q: str = "") -> list[EnvRow]:
    out = rows
    if status:
        out = [r for r in out if r.status == status]
    if category:
        out = [r for r in out if r.category == category]
    if gate_failed:
        out = [r for r in out if gate_failed in r.gates_failed]
    if decision:
        wanted = "" if decision == "undecided" else decision
        out = [r for r in out if r.decision == wanted]
    for word in q.lower().split():
        out = [r for r in out if word in r.search_text]
    return out


SORTS = {
    "id": lambda r: r.id, "status": lambda r: r.status, "domain": lambda r: r.domain.lower(),
    "category": lambda r: r.category, "cost": lambda r: r.cost or 0.0, "decision": lambda r: r.decision,
    "gates": lambda r: len(r.gates_failed), **{k: (lambda r, k=k: r.counts.get(k) or 0) for k in COUNT_KEYS},
}


def sort_rows(rows: list[EnvRow], sort: str = "id", desc: bool = False) -> list[EnvRow]:
    key = SORTS.get(sort, SORTS["id"])
    return sorted(rows, key=lambda r: (key(r), r.id), reverse=desc)
