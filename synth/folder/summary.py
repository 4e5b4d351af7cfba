"""What `synth show` prints about one env folder, gathered without running any env code.

A folder whose env.json cannot be read is an InputError (there is nothing to
show); anything else that is broken (a bad tasks.jsonl line, a missing or
unreadable database, a malformed tools.json or report.json) is listed under
`problems` and the rest is still shown.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from synth.errors import InputError
from synth.folder.database import open_bytes, table_counts
from synth.folder.dirs import static_problems
from synth.folder.files import (EnvFileMissing, env_file_exists, missing_hint, read_env_bytes, read_env_text,
                                read_optional_json)

SCENARIO_CHARS = 600


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary and marked with an ellipsis."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " …"


def _read_json(root: Path, what: str, problems: list[str], default: Any) -> Any:
    try:
        return read_optional_json(root, what, default)
    except InputError as exc:
        problems.append(f"{what} cannot be read ({str(exc).splitlines()[0]})")
        return default


def _manifest(root: Path) -> dict[str, Any]:
    if not root.is_dir():
        raise InputError(f"env folder not found: {root}; pass generated/envs/<env_id>")
    if not env_file_exists(root, "env.json"):
        raise InputError(f"{root} is not an env folder (no env.json); pass generated/envs/<env_id>")
    text = read_env_text(root, "env.json")  # a link, FIFO or oversized file: its own one-line error
    try:
        manifest = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{root}/env.json is not valid JSON ({str(exc).splitlines()[0]}); "
                         "the env folder is damaged, rebuild it") from None
    missing = [k for k in ("id", "title", "status") if not isinstance(manifest, dict) or not manifest.get(k)]
    if missing:
        raise InputError(f"{root}/env.json lacks {', '.join(missing)}; it is not an env manifest, rebuild the env")
    return manifest


def _tables(root: Path, problems: list[str]) -> dict[str, int]:
    try:
        conn = open_bytes(read_env_bytes(root, "db/initial.sqlite"), readonly=True)
        try:
            return table_counts(conn)
        finally:
            conn.close()
    except EnvFileMissing:
        problems.append(f"db/initial.sqlite is missing: the env cannot run; {missing_hint(root, ['db/initial.sqlite'])}")
    except (InputError, sqlite3.Error) as exc:
        problems.append(f"db/initial.sqlite cannot be read ({str(exc).splitlines()[0]})")
    return {}


def _tasks(root: Path, problems: list[str]) -> list[dict[str, Any]]:
    try:
        data = read_env_bytes(root, "tasks.jsonl")
    except EnvFileMissing:
        problems.append("tasks.jsonl is missing")
        return []
    except InputError as exc:
        problems.append(f"tasks.jsonl cannot be read ({str(exc).splitlines()[0]})")
        return []
    tasks = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except ValueError as exc:
            problems.append(f"tasks.jsonl line {number}: not valid JSON ({exc.msg})")
            continue
        if not isinstance(task, dict) or not task.get("task_id"):
            problems.append(f"tasks.jsonl line {number}: not a task object with a task_id")
            continue
        tasks.append(task)
    return tasks


def env_summary(env_dir: Path | str) -> dict[str, Any]:
    root = Path(env_dir)
    manifest = _manifest(root)
    problems: list[str] = []
    report = _read_json(root, "report.json", problems, {})
    if not env_file_exists(root, "tools.json"):
        problems.append("tools.json is missing")
    tools = _read_json(root, "tools.json", problems, [])
    if not isinstance(tools, list) or not all(isinstance(t, dict) and t.get("name") for t in tools):
        problems.append("tools.json is not a list of tools with names")
        tools = []
    report = report if isinstance(report, dict) else {}
    results = (report.get("gates") or {}).get("results") or {}
    gates = [{"name": name, **result} for name, result in results.items() if isinstance(result, dict)]
    tables, tasks = _tables(root, problems), _tasks(root, problems)
    # Every problem at once (tools.py and verifiers.py too), not only the first a loader would hit.
    problems += [p for p in static_problems(root, [t["name"] for t in tools], [t.get("verifier") for t in tasks])
                 if not p.startswith("db/initial.sqlite")]  # _tables reported the database
    return {
        "path": str(root), "id": manifest["id"], "title": manifest["title"], "status": manifest["status"],
        "failure_reason": manifest.get("failure_reason"), "scenario": str(manifest.get("scenario") or ""),
        "tables": tables, "tools": tools, "tasks": tasks, "gates": gates,
        "usage": report.get("verify_usage") or report.get("usage") or {}, "problems": problems,
        "probes": report.get("probes") if isinstance(report.get("probes"), dict) else {},
    }


def probe_line(records: list[dict[str, Any]]) -> str:
    """One task's probe rewards on a line: the highest first, then each probe ("!" marks a probe that
    earned its reward: the verifier is vulnerable to it)."""
    if not records:
        return "-"
    rewards = [float(r.get("reward") or 0) for r in records]
    parts = [f"{r.get('probe')} {float(r.get('reward') or 0):.2f}{'!' if r.get('passed') else ''}" for r in records]
    return f"max {max(rewards):.2f}: " + ", ".join(parts)


def usage_line(usage: dict[str, Any]) -> str:
    parts = []
    if "calls" in usage:
        parts.append(f"{usage['calls']} model calls")
    if "prompt_tokens" in usage or "completion_tokens" in usage:
        parts.append(f"tokens {usage.get('prompt_tokens', 0):,} in / {usage.get('completion_tokens', 0):,} out")
    if "cost" in usage:
        parts.append(f"cost ${float(usage['cost']):.4f}")
    return ", ".join(parts)


def render_env_summary(s: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]{s['title']}[/bold] ({s['id']}) status: [bold]{s['status']}[/bold]", highlight=False)
    if s["failure_reason"]:
        console.print(f"reason: {clip(s['failure_reason'], 400)}", highlight=False)
    console.print(clip(s["scenario"], SCENARIO_CHARS), highlight=False)
    tables = Table(title=f"tables ({len(s['tables'])})")
    tables.add_column("table")
    tables.add_column("rows", justify="right")
    for name, count in s["tables"].items():
        tables.add_row(name, str(count))
    console.print(tables)
    tools = Table(title=f"tools ({len(s['tools'])})")
    tools.add_column("name", no_wrap=True)
    tools.add_column("kind")
    tools.add_column("description")
    for t in s["tools"]:
        tools.add_row(t["name"], "read" if t.get("read_only") else "write", clip(t.get("description", ""), 160))
    console.print(tools)
    tasks = Table(title=f"tasks ({len(s['tasks'])})")
    for col in ("task", "difficulty", "kind", "split", "gold calls", "instruction"):
        tasks.add_column(col, no_wrap=col == "task")
    for t in s["tasks"]:
        tasks.add_row(str(t["task_id"]), str(t.get("difficulty", "")), str(t.get("kind", "")), str(t.get("split", "")),
                      str(len(t.get("gold") or [])), clip(t.get("instruction", ""), 240))
    console.print(tasks)
    if s["gates"]:
        gates = Table(title="gates")
        gates.add_column("gate", no_wrap=True)
        gates.add_column("result")
        gates.add_column("evidence")
        for g in s["gates"]:
            evidence = "; ".join(str(e) for e in (g.get("evidence") or [])[:3])
            gates.add_row(g.get("name", ""), "pass" if g.get("passed") else "FAIL", clip(evidence, 240) or "-")
        console.print(gates)
    if s["probes"]:
        probes = Table(title="probe rewards (exploits the verifiers must not pay for; ! = paid)")
        probes.add_column("task", no_wrap=True)
        probes.add_column("rewards")
        for task_id, records in s["probes"].items():
            probes.add_row(str(task_id), probe_line(records if isinstance(records, list) else []))
        console.print(probes)
    if s["usage"]:
        console.print(f"usage: {usage_line(s['usage'])}", highlight=False)
    for problem in s["problems"]:
        console.print(f"[red]problem:[/red] {problem}", highlight=False)
