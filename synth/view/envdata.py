"""Everything the env page shows, read from the folder's files without running any of its code.

Each file is read on its own: a missing or malformed one adds a line to
`problems` and leaves its section empty instead of failing the page. Sections
that newer pipeline versions add (rules.json, report.json `probes`, check-loop
`repairs`, env.json `today` / `acting_user`) are shown when present.
"""

from __future__ import annotations

import ast
import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.errors import InputError
from synth.folder.files import EnvFileMissing, env_file_exists, read_env_text
from synth.folder.review import read_review
from synth.view.dbread import TableInfo, schema


@dataclass
class EnvDetail:
    path: Path
    manifest: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    scenario: str = ""
    review: dict[str, Any] | None = None
    rules: dict[str, Any] = field(default_factory=dict)
    tools: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    tables: list[TableInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)  # task_templates.jsonl
    calibration: dict[str, Any] = field(default_factory=dict)  # calibration.json

    @property
    def id(self) -> str:
        return str(self.manifest.get("id") or self.path.name)

    def task(self, task_id: str) -> dict[str, Any] | None:
        return next((t for t in self.tasks if t.get("task_id") == task_id), None)

    def gates(self) -> list[dict[str, Any]]:
        results = (self.report.get("gates") or {}).get("results") or {}
        return [{"name": name, **r} for name, r in results.items() if isinstance(r, dict)]

    def check_rounds(self) -> list[dict[str, Any]]:
        """check_loop.rounds, each repair with its code diff computed from before/after."""
        rounds = []
        for r in (self.report.get("check_loop") or {}).get("rounds") or []:
            if not isinstance(r, dict):
                continue
            repairs = [{**rep, "diff": code_diff(rep.get("before") or "", rep.get("after") or "")}
                       for rep in r.get("repairs") or [] if isinstance(rep, dict)]
            rounds.append({**r, "repairs": repairs})
        return rounds

    def pass_rate(self, task_id: str) -> float | None:
        record = (self.calibration.get("tasks") or {}).get(task_id)
        return record.get("pass_rate") if isinstance(record, dict) else None

    def pass_rates(self) -> dict[str, Any]:
        """The calibrated pass rates' distribution over the env's tasks and per template (by task kind of source:
        each template, and the tasks written one by one)."""
        groups: dict[str, list[float]] = {}
        unknown = 0
        for task in self.tasks:
            rate = self.pass_rate(str(task.get("task_id")))
            if rate is None:
                unknown += 1
                continue
            groups.setdefault("all tasks", []).append(rate)
            groups.setdefault(task.get("template_id") or "(written one by one)", []).append(rate)
        rows = [{"group": name, "tasks": len(rates), "mean": sum(rates) / len(rates),
                 "bins": rate_bins(rates), "signal": sum(0 < r < 1 for r in rates)} for name, rates in groups.items()]
        return {"rows": rows, "uncalibrated": unknown}

    def probes(self, task_id: str) -> list[dict[str, Any]]:
        found = (self.report.get("probes") or {}).get(task_id) or []
        return [p for p in found if isinstance(p, dict)]


RATE_BINS = ("0", "(0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1)", "1")


def rate_bins(rates: list[float]) -> list[tuple[str, int]]:
    """How many pass rates fall in each bin: never solved, sometimes (four quarters), always."""
    counts = dict.fromkeys(RATE_BINS, 0)
    for r in rates:
        key = "0" if r <= 0 else "1" if r >= 1 else RATE_BINS[1 + min(3, int(r * 4))]
        counts[key] += 1
    return list(counts.items())


def _read(root: Path, rel: str, problems: list[str], parse: Any, default: Any) -> Any:
    try:
        return parse(read_env_text(root, rel))
    except EnvFileMissing:
        return default
    except InputError as exc:  # a link, a FIFO, a device or an oversized file: refused, never followed
        problems.append(f"{rel}: {str(exc).removeprefix(str(root / rel) + ': ').splitlines()[0]}")
        return default
    except (ValueError, SyntaxError, RecursionError) as exc:
        problems.append(f"{rel}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return default


def _jsonl(text: str) -> list[dict[str, Any]]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError as exc:
                raise ValueError(f"line {n}: {exc}") from None
    return [r for r in rows if isinstance(r, dict)]


def function_sources(src: str) -> dict[str, str]:
    """Top-level function name -> its source text (decorators included), parsed, never executed."""
    tree = ast.parse(src)
    lines = src.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "\n".join(lines[start - 1:node.end_lineno])
    return out


def code_diff(before: str, after: str) -> list[tuple[str, str]]:
    """Unified diff lines as (kind, text), kind one of hunk / add / del / ctx."""
    out = []
    for line in list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3))[2:]:
        kind = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "ctx")
        out.append((kind, line))
    return out


def load_detail(path: Path) -> EnvDetail:
    d = EnvDetail(path=path)
    p = d.problems
    d.manifest = _read(path, "env.json", p, json.loads, {})
    if not isinstance(d.manifest, dict):
        p.append("env.json: not a JSON object")
        d.manifest = {}
    if not env_file_exists(path, "env.json"):
        p.append("env.json: missing (not an env folder, or its build never finished)")
    d.report = _read(path, "report.json", p, json.loads, {})
    d.report = d.report if isinstance(d.report, dict) else {}
    d.scenario = _read(path, "scenario.md", p, str, "") or str(d.manifest.get("scenario") or "")
    d.rules = _read(path, "rules.json", p, json.loads, {})
    d.rules = d.rules if isinstance(d.rules, dict) else {}
    try:
        d.review = read_review(path)
    except InputError as exc:
        p.append(str(exc))
    tools = _read(path, "tools.json", p, json.loads, [])
    tool_src = _read(path, "tools.py", p, function_sources, {})
    tests = _read(path, "tests.jsonl", p, _jsonl, [])
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict):
            name = t.get("name")
            d.tools.append({**t, "source": tool_src.get(name, ""),
                            "tests": [x for x in tests if x.get("tool") == name]})
    verifier_src = _read(path, "verifiers.py", p, function_sources, {})
    gold = ((d.report.get("gold") or {}).get("tasks")) or {}
    for task in _read(path, "tasks.jsonl", p, _jsonl, []):
        tid = task.get("task_id")
        verifier = task.get("verifier") or f"verify_{tid}"
        source = verifier_src.get(verifier, "")
        if task.get("template_id"):  # an instance calls its template's function: show both
            source += "\n\n\n" + verifier_src.get(f"template_{task['template_id']}", "")
        d.tasks.append({**task, "verifier_source": source,
                        "gold_report": gold.get(tid) if isinstance(gold, dict) else None})
    d.templates = _read(path, "task_templates.jsonl", p, _jsonl, [])
    calibration = _read(path, "calibration.json", p, json.loads, {})
    d.calibration = calibration if isinstance(calibration, dict) and isinstance(calibration.get("tasks"), dict) else {}
    try:
        d.tables = schema(path)
    except EnvFileMissing:
        p.append("db/initial.sqlite: missing")
    except Exception as exc:  # noqa: BLE001 - any sqlite failure on an untrusted file is shown, not raised
        p.append(f"db/initial.sqlite: {exc}")
    return d
