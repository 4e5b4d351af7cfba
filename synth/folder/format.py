"""The environment folder: render an EnvDraft into the files of the contract
(DESIGN.md, "The environment folder"), write them atomically, and read a folder
back into an EnvDraft so a repair stage can rewrite one function and re-render.

The model writes only function bodies; the def lines, imports, ToolError and
the verifier helper come from templates/env/*.j2, so every env has the same
frame and the bodies can be parsed back out of the rendered files.
"""

from __future__ import annotations

import ast
import builtins
import functools
import json
import keyword
import os
import re
import shutil
import textwrap
import uuid
from importlib.resources import files
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, Field

from synth import __version__
from synth.artifacts import ActingUser, EnvManifest, EnvStatus, Rules, Scenario, Task, TaskTemplate, ToolSpec, ToolTest
from synth.errors import InputError, SynthError
from synth.folder.database import DatabaseError, build_database, db_sha256, open_bytes, table_columns, table_counts
from synth.folder.files import env_file_exists, missing_hint, parse_json, read_env_text, read_optional_text
from synth.folder.toolschema import PY_TYPES, check_portable_schema, schema_to_params
from synth.runtime.codecheck import parse_source

# The imports every rendered tools.py / verifiers.py starts with (prompts may show these).
TOOL_IMPORTS = [
    "import collections",
    "import datetime",
    "import decimal",
    "import json",
    "import math",
    "import re",
    "import sqlite3",
    "import uuid",
    "from typing import Any, Optional",
]
VERIFIER_IMPORTS = TOOL_IMPORTS
# Names a tool or verifier function may not take: they would shadow the frame.
RESERVED_NAMES = frozenset(
    set(keyword.kwlist) | set(dir(builtins)) | {"collections", "datetime", "decimal", "json", "math", "re"}
    | {"sqlite3", "uuid", "Any", "Optional", "ToolError", "check", "db"}
)
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
FILES = ("env.json", "scenario.md", "tools.py", "tools.json", "tasks.jsonl", "verifiers.py", "tests.jsonl",
         "report.json", "README.md", "db/schema.sql", "db/data.sql")
RULES_FILE = "rules.json"  # optional: folders made before it have none
VERIFIER_TESTS_FILE = "verifier_tests.jsonl"  # optional: the check loop's verifier regression cases
TEMPLATES_FILE = "task_templates.jsonl"  # optional: the task templates whose instances tasks.jsonl holds
DEFAULT_TODAY = "2025-06-02"  # the current date of envs that do not say otherwise


class EnvFolderError(SynthError):
    """A draft that cannot be rendered into a valid folder; the message lists why."""


class EnvDraft(BaseModel):
    """Everything an env folder holds, before rendering. Bodies are keyed by tool name
    (tool_bodies) and by task id (verifier_bodies)."""

    env_id: str
    title: str
    scenario: Scenario
    schema_sql: str
    data_sql: str
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_bodies: dict[str, str] = Field(default_factory=dict)
    tasks: list[Task] = Field(default_factory=list)
    verifier_bodies: dict[str, str] = Field(default_factory=dict)
    tests: list[dict[str, Any]] = Field(default_factory=list)
    model: str = ""
    status: EnvStatus = "built"
    report: dict[str, Any] = Field(default_factory=dict)
    failure_reason: str | None = None
    volatile_columns: list[str] = Field(default_factory=list)  # "table.column" that vary run to run
    today: str = DEFAULT_TODAY  # the env's fixed current date (YYYY-MM-DD): tools never read the clock
    acting_user: ActingUser | None = None  # the staff or customer record the agent acts for
    rules: Rules | None = None  # rules.json; None for folders made before it
    verifier_tests: list[dict[str, Any]] = Field(default_factory=list)  # verifier_tests.jsonl (VerifierCase)
    templates: list[TaskTemplate] = Field(default_factory=list)  # task_templates.jsonl; each a function in verifiers.py

    def tool_tests(self) -> list[ToolTest]:
        """tests.jsonl as ToolTests; a malformed line from an older run is left out."""
        out = []
        for raw in self.tests:
            try:
                out.append(ToolTest.model_validate(raw))
            except ValueError:
                continue
        return out


# --------------------------------------------------------------------------- rendering


@functools.lru_cache(maxsize=1)
def _jinja() -> jinja2.Environment:
    root = files("synth_templates").joinpath("env")
    loader = jinja2.FunctionLoader(lambda name: root.joinpath(name).read_text(encoding="utf-8"))
    return jinja2.Environment(loader=loader, keep_trailing_newline=True, autoescape=False,
                              undefined=jinja2.StrictUndefined)


def normalize_body(body: str) -> str:
    """Dedent a body, expand tabs in its indentation and drop blank edge lines."""
    lines = []
    for line in body.splitlines():
        stripped = line.lstrip(" \t")
        lines.append(line[: len(line) - len(stripped)].expandtabs(4) + stripped)
    return textwrap.dedent("\n".join(lines)).strip("\n")


def _indent(body: str) -> str:
    body = normalize_body(body) or 'raise NotImplementedError("no body was generated for this function")'
    return "\n".join(("    " + line) if line.strip() else "" for line in body.splitlines())


def _docstring(text: str) -> str:
    text = text.strip().replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if text.endswith('"'):
        text = text[:-1] + '\\"'
    return '"""' + text.replace("\n", "\n    ") + '"""'


def _signature(tool: ToolSpec) -> str:
    params = schema_to_params(tool.parameters)
    parts = [f"{p.name}: {PY_TYPES[p.type]}" for p in params if p.required]
    parts += [f"{p.name}: {PY_TYPES[p.type]} | None = None" for p in params if not p.required]
    return "db: sqlite3.Connection" + (", *, " + ", ".join(parts) if parts else "")


def _check_name(kind: str, name: str) -> list[str]:
    if not IDENT_RE.match(name) or name in RESERVED_NAMES:
        return [f"{kind} name {name!r} is not a usable Python function name"]
    return []


def render_tools_py(env_id: str, title: str, tools: list[ToolSpec], bodies: dict[str, str]) -> str:
    """tools.py for `tools` (tools.json order); a tool without a body raises NotImplementedError."""
    problems = []
    for tool in tools:
        problems += _check_name("tool", tool.name)
        problems += [f"tool {tool.name}: {p}" for p in check_portable_schema(tool.parameters)]
    names = [t.name for t in tools]
    problems += [f"tool {n!r} is listed twice" for n in sorted({n for n in names if names.count(n) > 1})]
    problems += [f"body for unknown tool {n!r}" for n in sorted(set(bodies) - set(names))]
    if problems:
        raise EnvFolderError("cannot render tools.py: " + "; ".join(problems))
    rendered = [
        {"name": t.name, "signature": _signature(t), "docstring": _docstring(t.description),
         "body": _indent(bodies.get(t.name, ""))}
        for t in tools
    ]
    text = _jinja().get_template("tools.py.j2").render(env_id=env_id, title=title, imports=TOOL_IMPORTS, tools=rendered)
    return text.rstrip("\n") + "\n"


@functools.lru_cache(maxsize=1)
def answer_helpers_source() -> str:
    """templates/env/answers.py: the answer and database helpers every verifiers.py starts with."""
    return files("synth_templates").joinpath("env", "answers.py").read_text(encoding="utf-8").strip("\n")


def verifier_name(task: Task) -> str:
    return task.verifier or f"verify_{task.task_id}"


def render_verifiers_py(env_id: str, title: str, tasks: list[Task], bodies: dict[str, str],
                        templates: list[TaskTemplate] = ()) -> str:
    """verifiers.py: one function per task template (`params`: an instance's bindings), then one per task
    that has a body in `bodies` (keyed by task id; an instance's calls its template's)."""
    problems = []
    functions = [t.function for t in templates]
    problems += [f"template {n!r} is listed twice" for n in sorted({n for n in functions if functions.count(n) > 1})]
    for template in templates:
        problems += _check_name("template", template.function)
    ids = [t.task_id for t in tasks]
    problems += [f"task id {i!r} is listed twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    problems += [f"verifier body for unknown task {i!r}" for i in sorted(set(bodies) - set(ids))]
    for task in tasks:
        if not IDENT_RE.match(task.task_id):
            problems.append(f"task id {task.task_id!r} is not an identifier")
        problems += _check_name("verifier", verifier_name(task))
    if problems:
        raise EnvFolderError("cannot render verifiers.py: " + "; ".join(problems))
    rendered = [
        {"name": verifier_name(t), "body": _indent(bodies[t.task_id]),
         "docstring": _docstring(f"{t.task_id} ({t.kind}, {t.difficulty}): {t.instruction}")}
        for t in tasks
        if t.task_id in bodies
    ]
    shared = [{"name": t.function, "body": _indent(t.verifier_body),
               "docstring": _docstring(f"template {t.template_id} ({t.kind}, {t.difficulty}): {t.instruction}")}
              for t in templates]
    text = _jinja().get_template("verifiers.py.j2").render(
        env_id=env_id, title=title, imports=VERIFIER_IMPORTS, verifiers=rendered, templates=shared,
        helpers=answer_helpers_source()
    )
    return text.rstrip("\n") + "\n"


def _md(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _render_readme(draft: EnvDraft, db_bytes: bytes | None) -> str:
    tables = []
    if db_bytes is not None:
        conn = open_bytes(db_bytes, readonly=True)
        try:
            tables = [{"name": t, "rows": n, "columns": table_columns(conn, t)} for t, n in table_counts(conn).items()]
        finally:
            conn.close()
    tools = []
    for t in draft.tools:
        params = ", ".join(f"{p.name}{'' if p.required else '?'}: {p.type}" for p in schema_to_params(t.parameters))
        tools.append({"name": t.name, "read_only": t.read_only, "params": _md(params) or "-",
                      "description": _md(t.description)})
    tasks = [{**t.model_dump(), "instruction": _md(t.instruction)} for t in draft.tasks]
    return _jinja().get_template("README.md.j2").render(
        title=_md(draft.title), env_id=draft.env_id, status=draft.status, pipeline_version=__version__,
        model=draft.model or "-", scenario=draft.scenario.description.strip(), tables=tables, tools=tools, tasks=tasks,
    )


def _report_summary(report: dict[str, Any]) -> dict[str, Any]:
    """env.json keeps scalars and each gate's `passed`; report.json keeps everything."""
    summary: dict[str, Any] = {}
    for key, value in report.items():
        if isinstance(value, dict) and "passed" in value:
            summary[key] = value["passed"]
        elif value is None or isinstance(value, (str, int, float, bool)):
            summary[key] = value
    return summary


# --------------------------------------------------------------------------- writing


def render_files(draft: EnvDraft, db_bytes: bytes | None = None) -> dict[str, str | bytes]:
    """Every file of the folder, by relative path. Builds the database unless given;
    a failed draft whose database does not build is rendered without initial.sqlite."""
    if db_bytes is None:
        try:
            db_bytes = build_database(draft.schema_sql, draft.data_sql)
        except DatabaseError:
            if draft.status != "failed":
                raise
    tasks = [t.model_copy(update={"verifier": verifier_name(t)}) if t.task_id in draft.verifier_bodies else t
             for t in draft.tasks]
    counts = {"tools": len(draft.tools), "tasks": len(tasks), "tests": len(draft.tests)}
    if db_bytes is not None:
        conn = open_bytes(db_bytes, readonly=True)
        try:
            rows = table_counts(conn)
        finally:
            conn.close()
        counts.update(tables=len(rows), rows=sum(rows.values()))
    manifest = EnvManifest(
        id=draft.env_id, title=draft.title, domain=draft.scenario.seed, category=draft.scenario.category,
        scenario=draft.scenario.description, pipeline_version=__version__, model=draft.model, counts=counts,
        status=draft.status, initial_db_sha256=db_sha256(db_bytes) if db_bytes is not None else "",
        report=_report_summary(draft.report), failure_reason=draft.failure_reason,
        today=draft.today, acting_user=draft.acting_user,
    )
    env_json = {**manifest.model_dump(mode="json"), "volatile_columns": draft.volatile_columns}
    out: dict[str, str | bytes] = {
        "env.json": _json(env_json),
        "scenario.md": f"# {draft.scenario.name}\n\n{draft.scenario.description.strip()}\n",
        "db/schema.sql": draft.schema_sql.rstrip("\n") + "\n",
        "db/data.sql": draft.data_sql.rstrip("\n") + "\n",
        "tools.json": _json([t.model_dump(mode="json") for t in draft.tools]),
        "tools.py": render_tools_py(draft.env_id, draft.title, draft.tools, draft.tool_bodies),
        "tasks.jsonl": "".join(t.model_dump_json() + "\n" for t in tasks),
        "verifiers.py": render_verifiers_py(draft.env_id, draft.title, tasks, draft.verifier_bodies, draft.templates),
        "tests.jsonl": "".join(json.dumps(t, sort_keys=True) + "\n" for t in draft.tests),
        "report.json": _json(draft.report),
        "README.md": _render_readme(draft, db_bytes),
    }
    if draft.rules is not None:
        out[RULES_FILE] = _json(draft.rules.model_dump(mode="json"))
    if draft.templates:
        out[TEMPLATES_FILE] = "".join(t.model_dump_json() + "\n" for t in draft.templates)
    if draft.verifier_tests:
        out[VERIFIER_TESTS_FILE] = "".join(json.dumps(c, sort_keys=True) + "\n" for c in draft.verifier_tests)
    if db_bytes is not None:
        out["db/initial.sqlite"] = db_bytes
    return out


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_env(draft: EnvDraft, dest_dir: Path | str, *, db_bytes: bytes | None = None) -> Path:
    """Render `draft` into `dest_dir` atomically and return the folder's path.

    The folder is built beside dest as a hidden temp dir, then renamed into place;
    an existing folder is moved aside first and removed only after the swap, so a
    reader sees either the old folder or the new one, never a half-written one.
    """
    dest = Path(dest_dir)
    rendered = render_files(draft, db_bytes)
    dest.parent.mkdir(parents=True, exist_ok=True)
    token = uuid.uuid4().hex[:8]
    tmp = dest.parent / f".{dest.name}.tmp-{token}"
    old = dest.parent / f".{dest.name}.old-{token}"
    try:
        for rel, content in rendered.items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        if dest.exists():
            os.rename(dest, old)
        try:
            os.rename(tmp, dest)
        except BaseException:
            if old.exists() and not dest.exists():
                os.rename(old, dest)  # put the previous folder back
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return dest


# --------------------------------------------------------------------------- reading back


def _function_bodies(source: str, filename: str) -> dict[str, str]:
    """Top-level function name -> its body as written (docstring excluded), dedented.

    A body runs from the line after the docstring to the line before the next
    top-level statement, so comments inside it are kept.
    """
    try:
        tree = parse_source(source, filename)
    except SyntaxError as exc:
        raise InputError(f"{filename}: line {exc.lineno}: {exc.msg}; fix the file or rebuild the env") from exc
    lines = source.splitlines()
    nodes = tree.body
    bodies = {}
    for i, node in enumerate(nodes):
        if not isinstance(node, ast.FunctionDef):
            continue
        first = node.body[0]
        has_doc = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
            first.value.value, str)
        start = first.end_lineno if has_doc else first.lineno - 1
        end = nodes[i + 1].lineno - 1 if i + 1 < len(nodes) else len(lines)
        if i + 1 < len(nodes) and getattr(nodes[i + 1], "decorator_list", None):
            end = nodes[i + 1].decorator_list[0].lineno - 1
        bodies[node.name] = normalize_body("\n".join(lines[start:end]))
    return bodies


def read_env_draft(path: Path | str) -> EnvDraft:
    """Load an env folder back into the EnvDraft it was rendered from."""
    root = Path(path)
    if not root.is_dir():
        raise InputError(f"env folder not found: {root}; pass the path of a folder under generated/envs/")
    missing = [f for f in FILES if not env_file_exists(root, f)]
    if missing:
        raise InputError(f"{root}: missing {', '.join(missing)}; {missing_hint(root, missing)}")

    def text(rel: str) -> str:
        return read_env_text(root, rel)

    def jsonl(rel: str) -> list[Any]:
        return [parse_json(line, f"{root / rel} line {n}") for n, line in enumerate(text(rel).splitlines(), 1)
                if line.strip()]

    env = parse_json(text("env.json"), str(root / "env.json"))
    manifest = EnvManifest.model_validate(env)
    heading = text("scenario.md").split("\n", 1)[0]
    scenario = Scenario(name=heading.removeprefix("# ").strip(), description=manifest.scenario,
                        category=manifest.category, seed=manifest.domain)
    tools = [ToolSpec.model_validate(t) for t in parse_json(text("tools.json"), str(root / "tools.json"))]
    tasks = [Task.model_validate(t) for t in jsonl("tasks.jsonl")]
    tool_defs = _function_bodies(text("tools.py"), "tools.py")
    verifier_defs = _function_bodies(text("verifiers.py"), "verifiers.py")
    return EnvDraft(
        env_id=manifest.id, title=manifest.title, scenario=scenario,
        schema_sql=text("db/schema.sql"), data_sql=text("db/data.sql"), tools=tools,
        tool_bodies={t.name: tool_defs[t.name] for t in tools if t.name in tool_defs},
        tasks=tasks,
        verifier_bodies={t.task_id: verifier_defs[verifier_name(t)]
                         for t in tasks if verifier_name(t) in verifier_defs},
        tests=jsonl("tests.jsonl"),
        model=manifest.model, status=manifest.status, report=parse_json(text("report.json"), str(root / "report.json")),
        failure_reason=manifest.failure_reason, volatile_columns=env.get("volatile_columns", []),
        today=manifest.today or DEFAULT_TODAY, acting_user=manifest.acting_user, rules=read_rules(root),
        verifier_tests=jsonl(VERIFIER_TESTS_FILE) if env_file_exists(root, VERIFIER_TESTS_FILE) else [],
        templates=read_templates(root),
    )


def read_rules(root: Path | str) -> Rules | None:
    """rules.json of an env folder, None when the folder has none; a malformed file is an InputError."""
    path = Path(root) / RULES_FILE
    text = read_optional_text(root, RULES_FILE)
    if text is None:
        return None
    try:
        return Rules.model_validate_json(text)
    except ValueError as exc:
        raise InputError(f"{path}: not a valid rules file ({str(exc).splitlines()[0]}); fix it or rebuild the env") \
            from exc


def read_templates(root: Path | str) -> list[TaskTemplate]:
    """task_templates.jsonl of an env folder ([] when it has none); a malformed line is an InputError."""
    path = Path(root) / TEMPLATES_FILE
    out = []
    for number, line in enumerate((read_optional_text(root, TEMPLATES_FILE) or "").splitlines(), 1):
        if line.strip():
            try:
                out.append(TaskTemplate.model_validate_json(line))
            except ValueError as exc:
                raise InputError(f"{path} line {number}: not a task template ({str(exc).splitlines()[0]}); fix the "
                                 "line or remove the file") from exc
    return out
