"""Env: an environment folder loaded for rollouts.

The initial database is held in memory as bytes; every episode starts from a
sqlite3 `deserialize` of them (tens of microseconds), never from the SQL files.
The env's code is checked, then loaded once per sandbox worker (or in-process
when trusted=True).
"""

from __future__ import annotations

import uuid
import weakref
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from synth.artifacts import EnvBug, EnvManifest, Task, ToolSpec
from synth.errors import InputError
from synth.folder.database import db_sha256
from synth.folder.files import missing_hint
from synth.folder.files import env_file_exists, parse_json, read_env_bytes, read_env_json, read_env_text, safe_env_id
from synth.folder.toolschema import check_portable_schema
from synth.runtime.episode import Episode
from synth.runtime.schema_check import ArgumentValidator

REQUIRED_FILES = ("env.json", "tools.json", "tools.py", "tasks.jsonl", "verifiers.py", "db/initial.sqlite")


def openai_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"type": "function", "function": {"name": spec.name, "description": spec.description,
                                             "parameters": spec.parameters}}


class Env:
    """A loaded env; thread-safe: many episodes may run at once from many threads."""

    def __init__(self, path: Path, manifest: EnvManifest, tools: list[ToolSpec], tasks: list[Task],
                 tools_src: str, verifiers_src: str, initial_db: bytes, backend: Any):
        self.path = path
        self.manifest = manifest
        self.id = manifest.id
        self.tools = tools
        self.tool_names = [t.name for t in tools]
        self.tasks = {t.task_id: t for t in tasks}
        self.tools_src, self.verifiers_src = tools_src, verifiers_src
        self.initial_db = initial_db
        self.backend = backend
        self.bugs: list[EnvBug] = []  # the most recent ones (episode.MAX_BUGS)
        self.bug_count = 0
        self.validators = {t.name: ArgumentValidator(t.name, t.parameters) for t in tools}
        self.openai_tools = [openai_tool(t) for t in tools]
        self._key = uuid.uuid4().hex[:12]
        self._episodes: weakref.WeakSet[Episode] = weakref.WeakSet()
        self.load_info = backend.register_env(self._key, self.id, tools_src, verifiers_src, initial_db,
                                              self.tool_names)
        self.closed = False

    @classmethod
    def load(cls, path: Path | str, *, trusted: bool = False, pool: Any = None) -> "Env":
        """Load an env folder. trusted=True runs its code in this process with no protection
        (envs you wrote or reviewed only); otherwise it runs in `pool` (default: the shared
        SandboxPool). The folder is read as untrusted input (see synth.folder.files)."""
        root = Path(path)
        if not root.is_dir():
            raise InputError(f"env folder not found: {root}; pass a folder made by `synth build` "
                             "(e.g. generated/envs/<env_id>)")
        missing = [f for f in REQUIRED_FILES if not env_file_exists(root, f)]
        if missing:
            raise InputError(f"{root}: missing {', '.join(missing)}; {missing_hint(root, missing)}")
        try:
            manifest = EnvManifest.model_validate(read_env_json(root, "env.json"))
            raw_tools = read_env_json(root, "tools.json")
            if not isinstance(raw_tools, list):
                raise InputError(f"{root}/tools.json: must hold a list of tools; rebuild the env")
            tools = [ToolSpec.model_validate(t) for t in raw_tools]
            tasks = [Task.model_validate(parse_json(line, f"{root}/tasks.jsonl line {i}"))
                     for i, line in enumerate(read_env_text(root, "tasks.jsonl").splitlines(), 1) if line.strip()]
        except (ValidationError, RecursionError) as exc:
            first = str(exc).splitlines()[0] if not isinstance(exc, RecursionError) else "nested too deeply"
            raise InputError(f"{root}: invalid env metadata ({first}); rebuild the env") from None
        safe_env_id(manifest.id, f"{root}/env.json")
        for tool in tools:
            problems = check_portable_schema(tool.parameters)
            if problems:
                raise InputError(f"{root}/tools.json: tool {tool.name}: {problems[0]}; rebuild the env")
        if not manifest.initial_db_sha256:
            raise InputError(f"{root}/env.json has no initial_db_sha256, so db/initial.sqlite cannot be checked; "
                             "rebuild the env")
        initial = read_env_bytes(root, "db/initial.sqlite")
        if db_sha256(initial) != manifest.initial_db_sha256:
            raise InputError(f"{root}/db/initial.sqlite does not match the sha256 in env.json; "
                             "the folder was edited by hand, rebuild the env")
        tools_src, verifiers_src = read_env_text(root, "tools.py"), read_env_text(root, "verifiers.py")
        if trusted:
            from synth.runtime.local import LocalHost

            backend: Any = LocalHost()
        else:
            from synth.runtime.sandbox import default_pool

            backend = pool if pool is not None else default_pool()
        return cls(root, manifest, tools, tasks, tools_src, verifiers_src, initial, backend)

    def episode(self, task_id: str | None = None, *, record: bool = True, episode_id: str | None = None) -> Episode:
        """A fresh episode on a private copy of the initial database and fresh module state;
        record=False keeps no trajectory; `episode_id` replaces the random id."""
        if self.closed:
            raise InputError(f"env {self.id} is closed; load it again")
        task = None
        if task_id is not None:
            task = self.tasks.get(task_id)
            if task is None:
                raise InputError(f"env {self.id} has no task {task_id!r}; tasks: {', '.join(self.tasks)}")
        episode = Episode(self, task, self.backend.open_episode(self._key), record=record, episode_id=episode_id)
        self._episodes.add(episode)
        return episode

    def close(self) -> None:
        """Unload the env's code from its workers (its open episodes end with it)."""
        if not self.closed:
            self.closed = True
            for episode in list(self._episodes):
                episode.close()
            self.backend.unregister_env(self._key)

    def __enter__(self) -> "Env":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Env({self.id!r}, tools={len(self.tools)}, tasks={len(self.tasks)})"
