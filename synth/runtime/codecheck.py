"""First layer of defence: a static check of generated code before it is loaded.

It allows a short list of standard-library imports and refuses the names and
attributes that lead out of a Python sandbox (exec/eval/open, dunder attributes,
frame and module walking, string-named attribute helpers, str.format on a
non-literal template, a connection's own guards), class patterns that read such
attributes, changes to imported modules' attributes, finalizers and renaming the
module. It is a filter, not the
sandbox: the loader's restricted builtins and module stand-ins, the worker's
audit hook and, above all, its OS boundary stop what slips through.
"""

from __future__ import annotations

import ast
import re
import threading

from synth.errors import SynthError

ALLOWED_IMPORTS = frozenset({
    "sqlite3", "json", "datetime", "re", "math", "decimal", "uuid", "random", "statistics", "itertools",
    "functools", "collections", "string", "typing", "dataclasses", "enum", "time", "fractions", "bisect",
    "heapq", "operator", "copy", "textwrap", "calendar", "hashlib",
})
FORBIDDEN_CALLS = frozenset({
    "exec", "eval", "compile", "open", "__import__", "globals", "locals", "vars", "breakpoint", "input",
    "help", "exit", "quit", "memoryview",
})
# Module names that may never be referenced, imported or reached as an attribute
# (json.decoder.re.enum.sys is a real path to sys).
FORBIDDEN_MODULES = frozenset({
    "os", "sys", "subprocess", "socket", "shutil", "pathlib", "importlib", "ctypes", "multiprocessing",
    "threading", "signal", "pickle", "marshal", "builtins", "io", "gc", "inspect", "pty", "resource", "mmap",
    "posix", "nt", "_thread", "faulthandler", "tempfile", "glob", "urllib", "http", "asyncio", "select",
})
# Attributes that walk frames, code objects or format machinery to real globals.
FORBIDDEN_ATTRS = frozenset({
    "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_frame", "gi_code", "cr_frame", "cr_code",
    "ag_frame", "ag_code", "tb_frame", "tb_next", "co_code", "func_globals", "mro", "modules",
    "Formatter", "get_field", "attrgetter", "methodcaller", "enable_load_extension", "load_extension",
    "system", "popen", "get_type_hints", "ForwardRef",
    # a connection's own guards (limits, authorizer, deadline) and the way back to it from a cursor
    "setlimit", "set_authorizer", "set_progress_handler", "set_trace_callback", "connection",
}) | FORBIDDEN_MODULES
FINALIZERS = frozenset({"__del__"})
# str.format reads attributes named in its template: allowed on a literal template only.
FORMAT_METHODS = frozenset({"format", "format_map"})
# Names getattr() & co. refuse at run time (the template of a dynamic format is unknown).
DANGEROUS_NAMES = FORBIDDEN_ATTRS | FORMAT_METHODS
# namedtuple's public API happens to start with an underscore.
PUBLIC_UNDERSCORE_ATTRS = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})
_FORMAT_DUNDER = re.compile(r"\{[^{}]*(\.|\[)\s*_")  # "{0.__class__}".format(...)


class CodeRejected(SynthError):
    """Generated code failed the static check; `problems` lists every finding."""

    def __init__(self, filename: str, problems: list[str]):
        self.filename = filename
        self.problems = problems
        shown = "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")
        super().__init__(f"{filename} refused by the sandbox code check: {shown}")


def _imported_names(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code itself binds (a variable called `signal` is not the module)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return bound


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def refused_name(name: str) -> bool:
    """An attribute env code may not name: private ones (a few public namedtuple methods
    aside), frames, code, globals, module walks and format machinery. The one rule for
    `x.name`, `getattr(x, "name")` and `case C(name=...)`."""
    return (name.startswith("_") and name not in PUBLIC_UNDERSCORE_ATTRS) or name in DANGEROUS_NAMES


def _root_name(node: ast.expr) -> ast.expr:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


# CPython 3.11's parser is not safe to run from several threads at once ("AST
# constructor recursion depth mismatch"); the build and verify stages check
# code from worker threads, so parsing goes through one lock.
_PARSE_LOCK = threading.Lock()  # also taken by runtime.loader around compile()


def parse_source(src: str, filename: str = "<env code>") -> ast.Module:
    with _PARSE_LOCK:
        return ast.parse(src, filename)


def check_source(src: str, filename: str = "<env code>") -> list[str]:
    """Problems found in `src` ([] means it may be loaded)."""
    try:
        tree = parse_source(src, filename)
    except SyntaxError as exc:
        return [f"line {exc.lineno}: syntax error: {exc.msg}"]
    bound = _bound_names(tree)
    imported = _imported_names(tree)
    problems: list[str] = []

    def bad(node: ast.AST, msg: str) -> None:
        problems.append(f"line {getattr(node, 'lineno', '?')}: {msg}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_IMPORTS:
                    bad(node, f"import of {alias.name!r} is not allowed")
        elif isinstance(node, ast.ImportFrom):
            if node.level or (node.module or "").split(".")[0] not in ALLOWED_IMPORTS:
                bad(node, f"import from {'.' * node.level}{node.module or ''!s} is not allowed")
            for alias in node.names:
                if alias.name == "*" or alias.name.startswith("_") or alias.name in DANGEROUS_NAMES:
                    bad(node, f"'from {node.module} import {alias.name}' is not allowed")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_CALLS:
                bad(node, f"use of {node.id!r} is not allowed")
            elif _dunder(node.id) and (node.id != "__name__" or not isinstance(node.ctx, ast.Load)):
                bad(node, f"use of {node.id!r} is not allowed")
            elif node.id in FORBIDDEN_MODULES and node.id not in bound:
                bad(node, f"use of module {node.id!r} is not allowed")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_") and node.attr not in PUBLIC_UNDERSCORE_ATTRS:
                bad(node, f"access to private attribute {node.attr!r} is not allowed")
            elif node.attr in FORBIDDEN_ATTRS:
                bad(node, f"access to attribute {node.attr!r} is not allowed")
            elif node.attr in FORMAT_METHODS and not (isinstance(node.value, ast.Constant)
                                                      and isinstance(node.value.value, str)):
                bad(node, f".{node.attr}() is allowed on a literal template only (use an f-string)")
            elif (isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(root := _root_name(node.value), ast.Name)
                  and root.id in imported):
                bad(node, f"changing attributes of imported {root.id!r} is not allowed")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("getattr", "setattr", "delattr", "hasattr") and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.startswith("_"):
                    bad(node, f"{node.func.id}() on private attribute {name.value!r} is not allowed")
                elif isinstance(name, ast.Constant) and name.value in DANGEROUS_NAMES:
                    bad(node, f"{node.func.id}() on attribute {name.value!r} is not allowed")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FINALIZERS:
            bad(node, f"defining {node.name} is not allowed (finalizers run when the sandbox, not the env, decides)")
        elif isinstance(node, ast.MatchClass):  # `case C(attr=x)` reads x.attr: checked like getattr
            for attr in node.kwd_attrs:
                if refused_name(attr):
                    bad(node, f"match on attribute {attr!r} is not allowed")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _FORMAT_DUNDER.search(node.value):
            bad(node, "format string reaching a private attribute is not allowed")
    return problems
