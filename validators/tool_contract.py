"""Gate `tool_contract`: tools.json (what agents are told) and tools.py (what
runs) agree, and every tool is exercised by tests.jsonl.

tools.py is read with `ast`, never imported: the gate runs no generated code.
For each tool it compares the function's keyword-only parameters with the JSON
Schema properties (names, required = no default, optional = default None,
annotation = the schema type), and it flags a read-only tool whose recorded
test changed the database.
"""

from __future__ import annotations

import ast
from pathlib import Path

from synth.artifacts import GateResult
from synth.errors import InputError
from synth.folder.files import read_env_text
from synth.folder.toolschema import PY_TYPES, check_portable_schema
from synth.runtime.codecheck import parse_source

from .common import Findings, read_folder

NAME = "tool_contract"


def _annotation_type(node: ast.expr | None) -> str | None:
    """'int' for `int` and `int | None`; None when there is no annotation."""
    if node is None:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        sides = [s for s in (node.left, node.right) if not (isinstance(s, ast.Constant) and s.value is None)]
        return _annotation_type(sides[0]) if len(sides) == 1 else ast.unparse(node)
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("Optional", "typing.Optional"):
        return _annotation_type(node.slice)
    if isinstance(node, ast.Subscript):  # list[int] -> list
        return ast.unparse(node.value)
    return ast.unparse(node)


def _functions(source: str) -> dict[str, ast.FunctionDef]:
    tree = parse_source(source, "tools.py")
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _compare(found: Findings, name: str, schema: dict, fn: ast.FunctionDef) -> None:
    args = fn.args
    positional = [a.arg for a in args.posonlyargs + args.args]
    if positional != ["db"]:
        found.tool(name, f"tools.py must take exactly one positional parameter `db`, takes {positional}")
    if args.vararg or args.kwarg:
        found.tool(name, "tools.py takes *args/**kwargs, which tools.json cannot describe")
    code_params = {}
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        code_params[arg.arg] = (default is not None, _annotation_type(arg.annotation))
    properties = schema.get("properties", {}) or {}
    required = set(schema.get("required", []) or [])
    for pname in properties:
        if pname not in code_params:
            found.tool(name, f"parameter {pname!r} is in tools.json but missing from tools.py")
    for pname in code_params:
        if pname not in properties:
            found.tool(name, f"parameter {pname!r} is in tools.py but missing from tools.json")
    for pname, prop in properties.items():
        if pname not in code_params:
            continue
        has_default, annotation = code_params[pname]
        if pname in required and has_default:
            found.tool(name, f"parameter {pname!r} is required in tools.json but optional in tools.py")
        if pname not in required and not has_default:
            found.tool(name, f"parameter {pname!r} is optional in tools.json but required in tools.py")
        expected = PY_TYPES.get(prop.get("type", ""))
        if annotation is not None and expected is not None and annotation != expected:
            found.tool(name, f"parameter {pname!r} is {prop.get('type')} in tools.json but annotated "
                             f"{annotation} in tools.py")


def run(env_dir: Path | str, env=None) -> GateResult:  # noqa: ARG001 - same signature as every gate
    folder = read_folder(env_dir)
    found = Findings(NAME)
    for problem in folder.problems.get("tools.json", []):
        found.env(problem)
    try:
        functions = _functions(read_env_text(folder.root, "tools.py"))
    except InputError as exc:
        found.env(f"tools.py: {exc}")
        return found.result()
    except SyntaxError as exc:
        found.env(f"tools.py line {exc.lineno}: syntax error: {exc.msg}")
        return found.result()
    names = [t.name for t in folder.tools]
    for name in sorted({n for n in names if names.count(n) > 1}):
        found.tool(name, "listed more than once in tools.json")
    for tool in folder.tools:
        for problem in check_portable_schema(tool.parameters):
            found.tool(tool.name, f"tools.json parameters: {problem}")
        fn = functions.get(tool.name)
        if fn is None:
            found.tool(tool.name, "listed in tools.json but tools.py has no such function")
            continue
        _compare(found, tool.name, tool.parameters, fn)
    for name in sorted(set(functions) - set(names)):
        found.tool(name, "defined in tools.py but not listed in tools.json")

    for problem in folder.problems.get("tests.jsonl", []):
        found.env(problem)
    tested = {t.tool for t in folder.tests}
    for name in names:
        if name not in tested:
            found.tool(name, "no test in tests.jsonl exercises it")
    for test in folder.tests:
        spec = folder.tool(test.tool)
        if spec is None:
            found.env(f"tests.jsonl test {test.test_id} calls unknown tool {test.tool!r}")
        elif spec.read_only and test.observed is not None and test.observed.diff:
            found.tool(test.tool, f"marked read_only but test {test.test_id} changed "
                                  f"{', '.join(sorted(test.observed.diff))}")
    return found.result(tools=len(names), tests=len(folder.tests))
