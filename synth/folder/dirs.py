"""Finding env folders under a directory (used by `synth serve`, `synth rollout` and the exporters).

A directory given on the command line may be one env folder (it has env.json),
a build output folder (its envs live in DIR/envs/*/), or a folder of env
folders (DIR/*/ with env.json).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from synth.errors import InputError
from synth.folder.files import EnvFileMissing, env_file_exists, read_env_bytes, read_env_text


def find_env_dirs(root: Path | str) -> list[Path]:
    """Env folders under `root`, sorted by name; raises InputError when there are none."""
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"folder not found: {base}; pass a folder of envs (e.g. generated/ or generated/envs/)")
    if env_file_exists(base, "env.json"):  # even a link or a FIFO: its readers then say what is wrong
        return [base]
    found: list[Path] = []
    for parent in (base / "envs", base):
        if parent.is_dir():
            found += [d for d in sorted(parent.iterdir())
                      if d.is_dir() and not d.name.startswith(".") and env_file_exists(d, "env.json")]
        if found:
            break
    if not found:
        raise InputError(f"no env folders in {base}: expected {base}/envs/<env_id>/env.json or "
                         f"{base}/<env_id>/env.json; build envs first with `synth build`")
    return found


SQLITE_HEADER = b"SQLite format 3\x00"


def static_problems(root: Path | str, tools: Iterable[str], verifiers: Iterable[str]) -> list[str]:
    """Why an env folder's code or database could not load, found without running anything:
    a missing or non-SQLite database, a syntax error in tools.py / verifiers.py, or a tool or
    verifier the folder names but its code does not define."""
    root = Path(root)
    problems = []
    try:
        if read_env_bytes(root, "db/initial.sqlite", prefix=len(SQLITE_HEADER)) != SQLITE_HEADER:
            problems.append("db/initial.sqlite is not a SQLite database")
    except EnvFileMissing:
        problems.append("db/initial.sqlite is missing")
    except InputError as exc:
        problems.append(str(exc))
    for name, wanted in (("tools.py", tools), ("verifiers.py", verifiers)):
        try:
            tree = ast.parse(read_env_text(root, name))
        except EnvFileMissing:
            problems.append(f"{name} is missing")
            continue
        except InputError as exc:
            problems.append(str(exc))
            continue
        except (SyntaxError, ValueError) as exc:
            where = f" line {exc.lineno}" if getattr(exc, "lineno", None) else ""
            problems.append(f"{name}{where}: syntax error: {getattr(exc, 'msg', exc)}")
            continue
        defined = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        missing = sorted({w for w in wanted if w and w not in defined})
        if missing:
            problems.append(f"{name} does not define {', '.join(missing[:5])}" + (" …" if len(missing) > 5 else ""))
    return problems
