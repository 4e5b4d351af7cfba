"""What every gate shares: reading an env folder without running its code, and
the result builder that keeps evidence lines naming the task or tool.

Reading is lenient on purpose: a malformed tasks.jsonl or tests.jsonl is a
finding for the gates to report, not an exception that stops `synth check`.
Only a path that is not an env folder at all raises InputError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from synth.artifacts import GateResult, Rules, Task, ToolSpec, ToolTest, VerifierCase
from synth.errors import InputError, SynthError
from synth.folder.files import env_file_exists, read_env_json, read_env_text, read_optional_text


@dataclass
class EnvFolder:
    root: Path
    manifest: dict[str, Any]
    tools: list[ToolSpec]
    tasks: list[Task]
    tests: list[ToolTest]
    volatile: list[str]  # "table.column" entries that vary run to run
    problems: dict[str, list[str]] = field(default_factory=dict)  # file -> why it could not be read
    rules: Rules | None = None  # rules.json; None when the folder has none (made before it existed)
    cases: list[VerifierCase] = field(default_factory=list)  # verifier_tests.jsonl (optional)

    @property
    def env_id(self) -> str:
        return str(self.manifest.get("id") or self.root.name)

    def tool(self, name: str) -> ToolSpec | None:
        return next((t for t in self.tools if t.name == name), None)


def _short(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _jsonl(path: Path, model: type, problems: list[str]) -> list:
    items = []
    try:
        text = read_env_text(path.parent, path.name)
    except InputError as exc:
        problems.append(f"{path.name}: {exc}" if env_file_exists(path.parent, path.name) else f"{path.name} is missing")
        return items
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            items.append(model.model_validate_json(line))
        except (ValidationError, ValueError, RecursionError) as exc:
            problems.append(f"{path.name} line {number}: {_short(exc)}")
    return items


def read_folder(env_dir: Path | str) -> EnvFolder:
    """Parse the data files of an env folder (no code is run)."""
    root = Path(env_dir)
    if not root.is_dir():
        raise InputError(f"env folder not found: {root}; pass the path of a folder under generated/envs/")
    if not env_file_exists(root, "env.json"):
        raise InputError(f"{root} has no env.json; pass an env folder written by `synth build`")
    manifest = read_env_json(root, "env.json")  # InputError with one line when unusable
    if not isinstance(manifest, dict):
        raise InputError(f"{root / 'env.json'}: must hold a JSON object; rebuild the env")
    problems: dict[str, list[str]] = {}
    tools: list[ToolSpec] = []
    tool_problems: list[str] = []
    try:
        raw = read_env_json(root, "tools.json")
        for i, entry in enumerate(raw if isinstance(raw, list) else []):
            try:
                tools.append(ToolSpec.model_validate(entry))
            except ValidationError as exc:
                tool_problems.append(f"tools.json entry {i + 1}: {_short(exc)}")
        if not isinstance(raw, list):
            tool_problems.append("tools.json must hold a list of tools")
    except InputError as exc:
        tool_problems.append(f"tools.json: {exc}")
    task_problems: list[str] = []
    tasks = _jsonl(root / "tasks.jsonl", Task, task_problems)
    test_problems: list[str] = []
    tests = _jsonl(root / "tests.jsonl", ToolTest, test_problems) if env_file_exists(root, "tests.jsonl") else []
    case_problems: list[str] = []
    cases = _jsonl(root / "verifier_tests.jsonl", VerifierCase, case_problems) \
        if env_file_exists(root, "verifier_tests.jsonl") else []
    for name, found in (("tools.json", tool_problems), ("tasks.jsonl", task_problems), ("tests.jsonl", test_problems),
                        ("verifier_tests.jsonl", case_problems)):
        if found:
            problems[name] = found
    rules = None
    try:
        text = read_optional_text(root, "rules.json")
        rules = Rules.model_validate_json(text) if text is not None else None
    except (InputError, ValueError) as exc:
        problems["rules.json"] = [f"rules.json: {_short(exc)}"]
    volatile = manifest.get("volatile_columns") or []
    return EnvFolder(root=root, manifest=manifest, tools=tools, tasks=tasks, tests=tests,
                     volatile=[str(v) for v in volatile], problems=problems, rules=rules, cases=cases)


T = TypeVar("T")
R = TypeVar("R")
TASK_THREADS = 4  # tasks checked at once: their episodes keep the env's sandbox workers busy while this process
# compares states (an env with hundreds of template instances is checked in a fraction of the sequential time)


def map_tasks(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """fn over items, several at a time, results in the items' order (each item's work must be its own:
    no shared mutable state). A loaded Env takes episodes from many threads."""
    items = list(items)
    if len(items) < 2:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=TASK_THREADS, thread_name_prefix="synth-gate") as pool:
        return list(pool.map(fn, items))


class Findings:
    """Collects evidence lines and, for the check loop's repairs, which task or tool they blame."""

    def __init__(self, name: str):
        self.name = name
        self.evidence: list[str] = []
        self.tasks: dict[str, list[str]] = {}
        self.tools: dict[str, list[str]] = {}
        self.details: dict[str, Any] = {}

    def task(self, task_id: str, problem: str) -> None:
        self.evidence.append(f"task {task_id}: {problem}")
        self.tasks.setdefault(task_id, []).append(problem)

    def tool(self, name: str, problem: str) -> None:
        self.evidence.append(f"tool {name}: {problem}")
        self.tools.setdefault(name, []).append(problem)

    def env(self, problem: str) -> None:
        self.evidence.append(problem)

    def result(self, **details: Any) -> GateResult:
        return GateResult(
            name=self.name, passed=not self.evidence, evidence=self.evidence,
            details={**self.details, **details, "tasks": self.tasks, "tools": self.tools},
        )


@contextmanager
def loaded_env(root: Path, env: Any = None) -> Iterator[Any]:
    """The env to run gates on: the one given (run_all loads it once), else a fresh load
    that is closed afterwards. Its code runs in the sandbox pool, never here."""
    if env is not None:
        yield env
        return
    from synth.runtime import Env

    loaded = Env.load(root)
    try:
        yield loaded
    finally:
        loaded.close()


def run_with_env(name: str, env_dir: Path | str, env: Any, body: Callable[[EnvFolder, Any, Findings], None],
                 **details: Any) -> GateResult:
    """Read the folder, get a loaded env and run `body`; an env that cannot be loaded or
    run (rejected code, a dead sandbox worker) fails the gate with that reason."""
    folder = read_folder(env_dir)
    found = Findings(name)
    for problem in folder.problems.get("tasks.jsonl", []):
        found.env(problem)
    try:
        with loaded_env(folder.root, env) as loaded:
            body(folder, loaded, found)
    except SynthError as exc:
        found.env(f"the env could not be run: {exc}")
    return found.result(**details)
