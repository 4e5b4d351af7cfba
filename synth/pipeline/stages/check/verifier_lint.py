"""Static checks of a verifier body that need no execution: the answer is never matched with a
bare substring test (`x in answer`, `answer.find(x)`), which fails on "9:00 AM" vs "09:00" or
"$3,460.00" vs "3460" and passes hedged or stuffed answers; the helpers (states, mentions,
reports) do it with normalisation and penalties instead.

Pulling values out of the answer (`re.findall`, `re.finditer`) to compare them with the records is
not such a test: real-model verifiers do it to refuse dates, amounts or words the records lack (what
the red team's "an invented cause passed" asks for), and refusing it sent the model round in repair
turns with no allowed way to write that check."""

from __future__ import annotations

import ast

from synth.runtime.codecheck import parse_source

_FIND = {"find", "index", "count", "startswith", "endswith", "rfind", "rindex"}


_STR_METHODS = {"lower", "upper", "casefold", "strip", "lstrip", "rstrip", "replace", "title", "split", "join",
                "translate", "normalize"}


def _texty(node: ast.AST, names: set[str]) -> bool:
    """Is `node` the answer's text (or a plain string transform of it), not a helper's result about it?"""
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.BoolOp):
        return any(_texty(v, names) for v in node.values)
    if isinstance(node, ast.IfExp):
        return _texty(node.body, names) or _texty(node.orelse, names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
        return _texty(node.func.value, names) or (node.func.attr == "join" and any(_texty(a, names)
                                                                                  for a in node.args))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        return _texty(node.args[0], names)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("sub",) \
            and len(node.args) >= 3:
        return _texty(node.args[2], names)
    return False


def _answer_names(tree: ast.AST) -> set[str]:
    """`answer` and every name assigned the answer's text (text = (answer or "").lower())."""
    names = {"answer"}
    for _ in range(4):  # a few passes reach names derived from derived names
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and _texty(node.value, names):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def substring_checks(body: str) -> list[str]:
    """One line per bare substring test on the answer in a verifier body ([] when there is none)."""
    source = "def _verifier(initial_db, final_db, answer):\n" + "\n".join("    " + line for line in body.splitlines())
    try:
        tree = parse_source(source, "verifier_body")
    except SyntaxError:
        return []  # the code check reports it
    names = _answer_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)) and _texty(right, names):
                    found.append(node.lineno - 1)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _FIND \
                and _texty(node.func.value, names):
            found.append(node.lineno - 1)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "search", "match", "fullmatch") and any(_texty(a, names) for a in node.args[1:2]):
            found.append(node.lineno - 1)
    return [f"line {n}: a bare substring or regex test on the answer; match facts with states(answer, right, "
            "wrong) / mentions(answer, value) (they normalise numbers, dates, times and names and penalise wrong "
            "or hedged facts); to refuse values the records lack, pull them out with re.findall and compare them with "
            "the records" for n in sorted(set(found))]


def loose_change_checks(body: str) -> list[str]:
    """One line per `only_changed(diff, {...})` whose literal allowance lists row keys without naming
    the columns they may change (the older, permissive form: any column of such a row could change)."""
    source = "def _verifier(initial_db, final_db, answer):\n" + "\n".join("    " + line for line in body.splitlines())
    try:
        tree = parse_source(source, "verifier_body")
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "only_changed"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Dict)
                and any(isinstance(v, (ast.List, ast.Tuple, ast.Set)) for v in node.args[1].values)):
            found.append(node.lineno - 1)
    return [f"line {n}: only_changed with a list of row keys lets every column of those rows change; name the "
            "columns each row may change: only_changed(diff, {table: {\"rows\": {key: [columns]}, \"added\": True}})"
            for n in sorted(set(found))]
