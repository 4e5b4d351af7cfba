"""AWM export: the dataset files of Snowflake's Agent World Model (the format of
AgentWorldModel-1K), so AWM's own commands (`awm env`, `awm agent`, `awm verify`) and
loaders built for it run synth envs.

One line per env (key "scenario" = env id, the same in every file) in
  gen_scenario.jsonl   {"name", "description", "categories": [...], "system_prompt"} (synth's agent system
                       prompt, with the env's date and acting user, for loaders that start agents themselves)
  gen_tasks.jsonl      {"scenario", "tasks": [instruction, ...]}   (task_idx = position)
  gen_db.jsonl         {"scenario", "db_schema": {"tables": [{"name", "ddl", "indexes"}]}}
  gen_sample.jsonl     {"scenario", "sample_data": {"tables": [{"table_name", "insert_statements"}]}}: the
                       data script in its own order (runs of statements on one table; a table may recur)
  gen_spec.jsonl       {"scenario", "api_spec": {"api_groups": [{"group_name", "endpoints": [...]}]}} with
                       parameter examples and response schemas from real calls (awm_spec.py)
  gen_envs.jsonl       {"scenario", "db_path", "full_code"}: a FastAPI app (POST /api/<tool>, operation_id =
                       tool) reading DATABASE_PATH, with the one `uvicorn.run(app` line AWM's launcher
                       rewrites to mount FastApiMCP; db_path is relative, ./<export folder>/databases/<id>.db,
                       the way AWM writes ./outputs/databases/<name>.db
and one line per task in each verifier file, {"scenario", "task_idx", "task", "verification": {"code"}}:
  gen_verifier.jsonl            AWM's default "sql" mode: verify_task(initial_db_path, final_db_path)
                                returns database facts (row changes, criteria, expected answer), no verdict,
                                for AWM's LLM judge
  gen_verifier.pure_code.jsonl  "code" mode: verify_task_completion(initial_db_path, final_db_path,
                                final_answer) -> {"result": "complete" | "others", "reward", "checks"}
databases/<env_id>.db is each env's initial database.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from synth import __version__
from synth.atomic import write_atomic
from synth.folder.database import split_statements
from synth.folder.files import safe_env_id
from synth.folder.format import VERIFIER_IMPORTS, answer_helpers_source, read_env_draft
from synth.pipeline.prompts import render_template
from synth.pipeline.tasks.instances import standalone_body
from synth.use.agent import system_prompt
from synth.use.export.awm_spec import api_spec, argument_examples, request_fields
from synth.use.export.source import ExportEnv, load_envs, skipped_note

_TABLE_RE = re.compile(r'^\s*CREATE\s+(?:TEMP\w*\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?["`\[]?(\w+)', re.I)
_INDEX_RE = re.compile(r'^\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+.*?\bON\s+["`\[]?(\w+)', re.I | re.S)
_STATEMENT_TABLE_RE = re.compile(
    r'^\s*(?:(?:INSERT|REPLACE)\s+(?:OR\s+\w+\s+)?(?:INTO\s+)?|UPDATE\s+(?:OR\s+\w+\s+)?|DELETE\s+FROM\s+)'
    r'["`\[]?(\w+)', re.I)
SQL_VERIFIERS = "gen_verifier.jsonl"
CODE_VERIFIERS = "gen_verifier.pure_code.jsonl"
FILES = ("gen_scenario.jsonl", "gen_tasks.jsonl", "gen_db.jsonl", "gen_sample.jsonl", "gen_spec.jsonl",
         "gen_envs.jsonl", SQL_VERIFIERS, CODE_VERIFIERS)


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
    """The data script as AWM's per-table statement lists, in execution order: consecutive
    statements on one table share an entry, so an INSERT ... UPDATE ... INSERT script keeps
    its order (AWM runs the entries, and their statements, in order)."""
    tables: list[dict[str, Any]] = []
    for stmt in split_statements(data_sql):
        m = _STATEMENT_TABLE_RE.match(stmt)
        name = m.group(1) if m else "_other"
        if not tables or tables[-1]["table_name"] != name:
            tables.append({"table_name": name, "insert_statements": []})
        tables[-1]["insert_statements"].append(stmt)
    return {"tables": tables}


def full_code(env: ExportEnv, tests: list[dict[str, Any]]) -> str:
    examples = argument_examples(env, tests)
    tools = [{"name": t.name, "model": "".join(w.capitalize() for w in t.name.split("_")) + "Request",
              "fields": request_fields(t, examples.get(t.name, {})), "summary": _summary(t.description),
              "description": t.description, "tag": env.id} for t in env.tools]
    return render_template("export", "awm/server.py.j2", title=env.manifest.title, env_id=env.id,
                           description=env.manifest.scenario, synth_version=__version__,
                           tools_source=env.text("tools.py").rstrip("\n"), tools=tools)


def _summary(text: str) -> str:
    first = text.strip().split(". ")[0].split("\n")[0]
    return first[:120].rstrip(".")


def _doc(instruction: str) -> str:
    return " ".join(instruction.split()).replace("\\", "/").replace('"""', "'''")


def check_names(body: str) -> list[str]:
    """The names of the checks a verifier body makes with literal names (read from its code, not run)."""
    try:
        tree = ast.parse("def _verifier(initial_db, final_db, answer):\n" + "\n".join(
            "    " + line for line in body.splitlines()))
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.append(node.args[0].value)
    return names


def code_verifier(env_id: str, task: Any, body: str) -> str:
    indented = "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())
    return render_template("export", "awm/verifier.py.j2", imports=VERIFIER_IMPORTS, body=indented, env_id=env_id,
                           task_id=task.task_id, instruction_doc=_doc(task.instruction),
                           helpers=answer_helpers_source())


def sql_verifier(env: ExportEnv, task: Any, body: str) -> str:
    return render_template("export", "awm/verifier_sql.py.j2", env_id=env.id, task_id=task.task_id,
                           instruction_doc=_doc(task.instruction), kind=task.kind,
                           expected_json=json.dumps(task.expected_answer, ensure_ascii=False, default=str),
                           criteria_json=json.dumps(check_names(body), ensure_ascii=False),
                           volatile_json=json.dumps(env.manifest.volatile_columns))


def export_awm(root: Path | str, out: Path | str, *, include_rejected: bool = False,
               pass_rate: tuple[float, float] | None = None) -> str:
    envs, skipped = load_envs(root, include_rejected=include_rejected, pass_rate=pass_rate)
    out = Path(out)
    (out / "databases").mkdir(parents=True, exist_ok=True)
    lines: dict[str, list[dict[str, Any]]] = {name: [] for name in FILES}
    n_tasks = 0
    for env in envs:
        draft = read_env_draft(env.path)
        write_atomic(out / "databases" / f"{safe_env_id(env.id)}.db", env.data("db/initial.sqlite"))
        tasks = sorted((t for t in env.tasks if t.task_id in draft.verifier_bodies), key=lambda t: t.task_id)
        category = env.manifest.category
        lines["gen_scenario.jsonl"].append({"name": env.id, "description": env.manifest.scenario,
                                            "title": env.manifest.title, "categories": [category] if category else [],
                                            "system_prompt": system_prompt(env.context)})
        lines["gen_tasks.jsonl"].append({"scenario": env.id, "tasks": [t.instruction for t in tasks],
                                         "task_ids": [t.task_id for t in tasks]})
        lines["gen_db.jsonl"].append({"scenario": env.id, "db_schema": db_schema(draft.schema_sql)})
        lines["gen_sample.jsonl"].append({"scenario": env.id, "sample_data": sample_data(draft.data_sql)})
        lines["gen_spec.jsonl"].append({"scenario": env.id, "api_spec": api_spec(env, draft.tests)})
        lines["gen_envs.jsonl"].append({"scenario": env.id, "db_path": f"./{out.name}/databases/{env.id}.db",
                                        "full_code": full_code(env, draft.tests)})
        templates = {t.template_id: t for t in draft.templates}
        for idx, task in enumerate(tasks):
            body = draft.verifier_bodies[task.task_id]
            if task.template_id in templates:  # an instance's one-line call becomes its template's body
                body = standalone_body(templates[task.template_id], task.bindings or {})
            common = {"scenario": env.id, "task_idx": idx, "task": task.instruction, "task_id": task.task_id,
                      "calibration": env.calibrated(task.task_id)}
            lines[SQL_VERIFIERS].append({**common, "verification": {
                "code": sql_verifier(env, task, body), "function_name": "verify_task"}})
            lines[CODE_VERIFIERS].append({**common, "verification": {
                "code": code_verifier(env.id, task, body), "function_name": "verify_task_completion"}})
            n_tasks += 1
    for name, rows in lines.items():
        write_atomic(out / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    note = skipped_note(skipped)
    return (f"awm: {len(envs)} scenario(s), {n_tasks} task(s) with verifiers in {out} (db_path relative: run awm "
            f"from {out.resolve().parent}){note}")
