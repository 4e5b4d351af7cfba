"""What the exporters read: env folders (metadata and source text only; nothing
is executed) and trajectories files."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from synth.artifacts import EnvManifest, Task, ToolSpec, Trajectory
from synth.errors import InputError
from synth.folder.dirs import find_env_dirs, static_problems
from synth.folder.files import parse_json, read_env_bytes, read_env_json, read_env_text, read_optional_json
from synth.folder.review import rejection
from synth.folder.toolschema import check_portable_schema
from synth.use.agent import AgentContext


@dataclass
class ExportEnv:
    path: Path
    manifest: EnvManifest
    tools: list[ToolSpec]
    tasks: list[Task]
    calibration: dict[str, Any] | None = None  # calibration.json (synth calibrate), when the env has one

    @property
    def id(self) -> str:
        return self.manifest.id

    def text(self, rel: str) -> str:
        return read_env_text(self.path, rel)

    def data(self, rel: str) -> bytes:
        return read_env_bytes(self.path, rel)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [openai_tool(t) for t in self.tools]

    def probe_rewards(self, task_id: str) -> list[dict[str, Any]]:
        """[{"probe", "reward"}] of one task from report.json `probes` ([] when the env has none); a list
        of same-shaped records, so parquet stores it as is."""
        try:
            report = read_optional_json(self.path, "report.json", {})
        except InputError:
            return []
        records = (report.get("probes") or {}).get(task_id) if isinstance(report, dict) else None
        return [{"probe": str(r.get("probe")), "reward": float(r.get("reward") or 0.0)}
                for r in records or [] if isinstance(r, dict)]

    def calibrated(self, task_id: str) -> dict[str, Any] | None:
        """A task's calibration for an export row: its record of calibration.json with the model's name."""
        record = (self.calibration or {}).get("tasks", {}).get(task_id)
        if not isinstance(record, dict):
            return None
        keys = ("pass_rate", "mean_reward", "mean_rubric", "mean_state", "k", "scored")
        return {"model": str(self.calibration.get("model")), "reward": str(self.calibration.get("reward")),
                **{k: record.get(k) for k in keys}}

    @property
    def context(self) -> AgentContext:
        """What the agent's system prompt is built from (title, scenario, today, acting user)."""
        return AgentContext.of_env(self.path)


def openai_tool(tool: ToolSpec) -> dict[str, Any]:
    """OpenAI function schema; `parameters` stays in the portable subset (checked on load)."""
    return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                             "parameters": tool.parameters}}


def load_env(path: Path) -> ExportEnv:
    try:
        manifest = EnvManifest.model_validate(read_env_json(path, "env.json"))
        tools = [ToolSpec.model_validate(t) for t in read_env_json(path, "tools.json")]
        tasks = [Task.model_validate(parse_json(line, f"{path}/tasks.jsonl line {n}")) for n, line in
                 enumerate(read_env_text(path, "tasks.jsonl").splitlines(), 1) if line.strip()]
    except (InputError, ValidationError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: unreadable env folder ({str(exc).splitlines()[0]}); rebuild the env") from None
    for tool in tools:
        problems = check_portable_schema(tool.parameters)
        if problems:
            raise InputError(f"{path}/tools.json: tool {tool.name} is outside the portable schema subset "
                             f"({problems[0]}); rebuild the env")
    broken = static_problems(path, [t.name for t in tools], [t.verifier for t in tasks])
    if broken:  # a trainer would only find out when the env fails to load mid-run
        raise InputError(f"{path}: its code cannot load ({'; '.join(broken)}); rebuild the env")
    from synth.use.calibrate import read_calibration

    return ExportEnv(path=path, manifest=manifest, tools=tools, tasks=tasks, calibration=read_calibration(path))


def in_band(env: ExportEnv, band: tuple[float, float]) -> tuple[list[Task], int]:
    """The env's tasks whose calibrated pass rate lies in [LO, HI], and how many have no pass rate."""
    kept, unknown = [], 0
    for task in env.tasks:
        rate = (env.calibrated(task.task_id) or {}).get("pass_rate")
        if rate is None:
            unknown += 1
        elif band[0] - 1e-9 <= rate <= band[1] + 1e-9:
            kept.append(task)
    return kept, unknown


def load_envs(root: Path | str, *, include_failed: bool = False, include_rejected: bool = False,
              pass_rate: tuple[float, float] | None = None) -> tuple[list[ExportEnv], list[str]]:
    """Exportable envs under `root` and the reasons others were left out (failed status, or
    rejected by a reviewer in review.json, unless asked to include them). With `pass_rate` (LO, HI),
    only tasks whose calibration.json pass rate lies in the band are kept (an env without one is left out)."""
    envs, skipped = [], []
    for path in find_env_dirs(root):
        rejected = None if include_rejected else rejection(path)
        if rejected:
            skipped.append(f"{path}: {rejected}")
            continue
        try:
            env = load_env(path)
        except InputError as exc:
            skipped.append(str(exc))
            continue
        if env.manifest.status == "failed" and not include_failed:
            skipped.append(f"{path}: status is failed")
            continue
        if env.manifest.status == "built":  # no gold, verifiers or gates yet: nothing to train on
            skipped.append(f"{path}: status is built, not verified yet (`synth verify {path}` first)")
            continue
        if pass_rate is not None:
            if env.calibration is None:
                skipped.append(f"{path}: no calibration.json, so no pass rate to filter on (run synth calibrate)")
                continue
            total = len(env.tasks)
            env.tasks, unknown = in_band(env, pass_rate)
            if unknown:
                skipped.append(f"{path}: {unknown} of {total} task(s) have no calibrated pass rate")
            if not env.tasks:
                skipped.append(f"{path}: no task has a pass rate in {pass_rate[0]:g}:{pass_rate[1]:g}")
                continue
        envs.append(env)
    if not envs:
        raise InputError(f"nothing to export under {root}: {'; '.join(skipped[:3]) or 'no envs'}")
    return envs, skipped


def skipped_note(skipped: list[str]) -> str:
    """The exporters' report lines for envs left out: which, and why."""
    return "".join(f"\nskipped {reason}" for reason in skipped)


def trajectory_files(src: Path | str) -> list[Path]:
    """A trajectories file, or the *.jsonl trajectories files of a folder (windowed samples excluded)."""
    p = Path(src)
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.glob("*.jsonl") if not f.name.endswith(".window.jsonl"))
        if files:
            return files
    raise InputError(f"no trajectories at {p}: pass a JSONL file written by `synth rollout --out FILE` "
                     "or a folder holding such files")


def read_trajectories(src: Path | str) -> list[Trajectory]:
    out = []
    for path in trajectory_files(src):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(Trajectory.model_validate_json(line))
            except ValidationError as exc:
                raise InputError(f"{path}:{n}: not a trajectory ({str(exc).splitlines()[0]}); pass files "
                                 "written by `synth rollout`") from None
    return out
