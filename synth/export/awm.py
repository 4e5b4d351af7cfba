"""AWM export: the dataset files of Snowflake's Agent World Model (the format of
AgentWorldModel-1K), so AWM's own tooling and loaders built for it can run synth envs.

One line per env (key "scenario" = env id, the same in every file) in
  gen_scenario.jsonl   {"name", "description"}
  gen_tasks.jsonl      {"scenario", "tasks": [instruction, ...]}   (task_idx = position)
  gen_db.jsonl         {"scenario", "db_schema": {"tables": [{"name", "ddl", "indexes"}]}}
  gen_sample.jsonl     {"scenario", "sample_data": {"tables": [{"table_name", "insert_statements"}]}}
  gen_spec.jsonl       {"scenario", "api_spec": {"api_groups": [{"group_name", "endpoints": [...]}]}}
  gen_envs.jsonl       {"scenario", "db_path", "full_code"}: a FastAPI app (POST /api/<tool>, operation_id =
                       tool) reading DATABASE_PATH, with the one `uvicorn.run(app` line AWM's launcher
                       rewrites to mount FastApiMCP
and one line per task in gen_verifier.jsonl (also written as gen_verifier.pure_code.jsonl,
the name AWM's released data uses): {"scenario", "task_idx", "task", "verification": {"code"}}
where the code defines verify_task_completion(initial_db_path, final_db_path, final_answer)
-> {"result": "complete" | "others", ...}. databases/<env_id>.db is each env's initial database.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from synth import __version__
from synth.database import split_statements
from synth.envfiles import safe_env_id
from synth.envfolder import VERIFIER_IMPORTS, read_env_draft
from synth.export.source import ExportEnv, load_envs
from synth.prompts import render_template
from synth.store import write_atomic
from synth.toolschema import schema_to_params

_TABLE_RE = re.compile(r'^\s*CREATE\s+(?:TEMP\w*\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?["`\[]?(\w+)', re.I)
_INDEX_RE = re.compile(r'^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+.*?\bON\s+["`\[]?(\w+)', re.I | re.S)
_INSERT_RE = re.compile(r'^\s*(?:INSERT|REPLACE)\s+(?:OR\s+\w+\s+)?(?:INTO\s+)?["`\[]?(\w+)', re.I)
_PY = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
FILES = ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_spec.jsonl",
         "gen_envs.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl")


def db_schema(schema_sql: str) -> dict[str, Any]:
    tables: list[dict[str, Any]] = []
    by_name: dict[str, dict[str, Any]] = {}
    later: list[str] = []  # triggers, views: run after every table exists
    for stmt in split_statements(schema_sql):
        if m := _TABLE_RE.match(stmt):
            table = {"name": m.group(1), "ddl": stmt, "indexes": []}
            tables.append(table)
            by_name[m.group(1).lower()] = table
        elif (m := _INDEX_RE.match(stmt)) and m.group(1).lower() in by_name:
            by_name[m.group(1).lower()]["indexes"].append(stmt)
        else:
            later.append(stmt)
    if tables:
        tables[-1]["indexes"] += later
    return {"tables": tables}


def sample_data(data_sql: str) -> dict[str, Any]:
    tables: dict[str, list[str]] = {}
    for stmt in split_statements(data_sql):
        m = _INSERT_RE.match(stmt)
        tables.setdefault(m.group(1) if m else "_other", []).append(stmt)
    return {"tables": [{"table_name": name, "insert_statements": stmts} for name, stmts in tables.items()]}


def _endpoint(env_id: str, tool: Any) -> dict[str, Any]:
    params = {}
    for p in schema_to_params(tool.parameters):
        spec: dict[str, Any] = {"type": p.type, "param_type": "body", "required": p.required,
                                "description": p.description}
        if p.enum is not None:
            spec["enum"] = list(p.enum)
        if p.items is not None:
            spec["items"] = {"type": p.items}
        params[p.name] = spec
    return {"path": f"/api/{tool.name}", "method": "POST", "summary": _summary(tool.description),
            "description": tool.description, "operation_id": tool.name, "tags": [env_id],
            "request_params": params, "response": {}, "read_only": tool.read_only}


def _summary(text: str) -> str:
    first = text.strip().split(". ")[0].split("\n")[0]
    return first[:120].rstrip(".")


def api_spec(env: ExportEnv) -> dict[str, Any]:
    groups = [("Queries", [t for t in env.tools if t.read_only]),
              ("Actions", [t for t in env.tools if not t.read_only])]
    return {"api_groups": [{"group_name": name, "endpoints": [_endpoint(env.id, t) for t in tools]}
                           for name, tools in groups if tools]}


def _field(p: Any) -> str:
    if p.type == "array":
        inner = _PY[p.items or "string"]
        if p.enum is not None:
            inner = f"Literal[{', '.join(json.dumps(v) for v in p.enum)}]"
        annotation = f"List[{inner}]"
    elif p.enum is not None:
        annotation = f"Literal[{', '.join(json.dumps(v) for v in p.enum)}]"
    else:
        annotation = _PY[p.type]
    return f"{p.name}: {annotation}" if p.required else f"{p.name}: Optional[{annotation}] = None"


def full_code(env: ExportEnv) -> str:
    tools = [{"name": t.name, "model": "".join(w.capitalize() for w in t.name.split("_")) + "Request",
              "fields": [_field(p) for p in schema_to_params(t.parameters)], "summary": _summary(t.description),
              "description": t.description, "tag": env.id} for t in env.tools]
    return render_template("export", "awm/server.py.j2", title=env.manifest.title, env_id=env.id,
                           description=env.manifest.scenario, synth_version=__version__,
                           tools_source=env.text("tools.py").rstrip("\n"), tools=tools)


def verifier_code(env_id: str, task: Any, body: str) -> str:
    indented = "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())
    doc = " ".join(task.instruction.split()).replace("\\", "/").replace('"""', "'''")
    return render_template("export", "awm/verifier.py.j2", imports=VERIFIER_IMPORTS, body=indented, env_id=env_id,
                           task_id=task.task_id, instruction_doc=doc)


def export_awm(root: Path | str, out: Path | str) -> str:
    envs, skipped = load_envs(root)
    out = Path(out)
    (out / "databases").mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    n_tasks = 0
    for env in envs:
        draft = read_env_draft(env.path)
        db_path = (out / "databases" / f"{safe_env_id(env.id)}.db").resolve()
        shutil.copyfile(env.path / "db" / "initial.sqlite", db_path)
        tasks = sorted((t for t in env.tasks if t.task_id in draft.verifier_bodies), key=lambda t: t.task_id)
        lines["gen_scenario.jsonl"].append({"name": env.id, "description": env.manifest.scenario,
                                            "title": env.manifest.title, "category": env.manifest.category})
        lines["gen_tasks.jsonl"].append({"scenario": env.id, "tasks": [t.instruction for t in tasks],
                                         "task_ids": [t.task_id for t in tasks]})
        lines["gen_db.jsonl"].append({"scenario": env.id, "db_schema": db_schema(draft.schema_sql)})
        lines["gen_sample.jsonl"].append({"scenario": env.id, "sample_data": sample_data(draft.data_sql)})
        lines["gen_spec.jsonl"].append({"scenario": env.id, "api_spec": api_spec(env)})
        lines["gen_envs.jsonl"].append({"scenario": env.id, "db_path": str(db_path), "full_code": full_code(env)})
        for idx, task in enumerate(tasks):
            code = verifier_code(env.id, task, draft.verifier_bodies[task.task_id])
            lines["gen_verifier.jsonl"].append({"scenario": env.id, "task_idx": idx, "task": task.instruction,
                                                "task_id": task.task_id, "verification": {"code": code}})
            n_tasks += 1
    lines["gen_verifier.pure_code.jsonl"] = lines["gen_verifier.jsonl"]
    for name, rows in lines.items():
        write_atomic(out / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    note = f"; skipped {len(skipped)} env(s)" if skipped else ""
    return f"awm: {len(envs)} scenario(s), {n_tasks} task(s) with verifiers in {out}{note}"
