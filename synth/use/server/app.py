"""`synth serve`: one FastAPI app for every env folder under a directory.

REST (OpenAPI docs at /docs):
  GET    /health                              liveness and episode counts
  GET    /envs                                served envs with their tasks
  GET    /envs/{env_id}                       one env: today, acting_user, system_prompt, tools (OpenAI
                                               schemas) and tasks
  POST   /envs/{env_id}/episodes              {"task_id"?} -> {"episode_id", "system_prompt", "messages"
                                               ([system, user]), "today", "acting_user", "tools", "mcp_url", ...}
  GET    /episodes/{episode_id}               what the episode is
  POST   /episodes/{episode_id}/tools/{name}  arguments object -> {"ok", "result" | "error"}
  POST   /episodes/{episode_id}/evaluate      {"answer"} -> reward with per-check breakdown
  DELETE /episodes/{episode_id}
MCP (streamable HTTP): /episodes/{episode_id}/mcp, see mcp_app.py.

Generated code runs in sandbox workers (synth.runtime.SandboxPool) unless the
operator explicitly serves trusted envs in-process; the blocking episode calls
run in threads so the event loop keeps serving other episodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from synth import __version__
from synth.errors import SynthError
from synth.folder.dirs import find_env_dirs
from synth.folder.files import read_env_json
from synth.folder.review import rejection
from synth.runtime.sandbox import PoolBusy
from synth.use.agent import AgentContext, agent_messages, system_prompt
from synth.use.server.episodes import EpisodeRegistry, RegistryError
from synth.use.server.guard import GuardMiddleware, ServerGuards
from synth.use.server.mcp_app import EpisodeMcp

log = logging.getLogger(__name__)


@dataclass
class LoadedEnvs:
    envs: dict[str, Any] = field(default_factory=dict)  # env_id -> synth.runtime.Env
    skipped: list[dict[str, str]] = field(default_factory=list)  # {"path", "reason"}


def load_envs(root: Path | str, *, trusted: bool = False, pool: Any = None,
              include_failed: bool = False, include_rejected: bool = False) -> LoadedEnvs:
    """Load every env folder under `root`; a folder that fails to load is skipped with its reason."""
    from synth.runtime import Env

    loaded = LoadedEnvs()
    for path in find_env_dirs(root):
        rejected = None if include_rejected else rejection(path)
        if rejected:
            loaded.skipped.append({"path": str(path), "reason": rejected})
            continue
        try:
            manifest = read_env_json(path, "env.json")
            status = manifest.get("status") if isinstance(manifest, dict) else None
            if status == "failed" and not include_failed:
                loaded.skipped.append({"path": str(path), "reason": "its status is 'failed'"})
                continue
            env = Env.load(path, trusted=trusted, pool=pool)
        except (SynthError, OSError, ValueError) as exc:
            loaded.skipped.append({"path": str(path), "reason": str(exc)})
            continue
        if env.id in loaded.envs:
            env.close()
            loaded.skipped.append({"path": str(path), "reason": f"env id {env.id!r} is served from another folder"})
            continue
        loaded.envs[env.id] = env
    return loaded


class EpisodeRequest(BaseModel):
    task_id: str | None = None


class EvaluateRequest(BaseModel):
    answer: Any = None
    reward: Literal["rubric", "state", "both"] | None = None  # default: the server's --reward


def _task_summary(task: Any) -> dict[str, Any]:
    return {"task_id": task.task_id, "instruction": task.instruction, "split": task.split, "kind": task.kind,
            "difficulty": task.difficulty}


_ARGUMENTS_BODY = {"requestBody": {"required": False, "content": {"application/json": {
    "schema": {"type": "object", "description": "The tool's arguments (see the tool's parameters schema)"}}}}}


def create_app(loaded: LoadedEnvs, *, max_episodes: int = 256, idle_timeout: float = 300.0,
               reap_interval: float | None = None, on_shutdown: Any = None,
               guards: ServerGuards | None = None, reward: str = "rubric") -> FastAPI:
    """The ASGI app over already loaded envs. `on_shutdown()` runs after every episode is closed.
    `guards`: allowed Host/Origin values and the body limit (default: loopback only, 8 MB)."""
    guards = guards or ServerGuards()
    registry = EpisodeRegistry(loaded.envs, max_episodes=max_episodes, idle_timeout=idle_timeout)
    mcp_endpoint = EpisodeMcp(registry, guards)
    interval = reap_interval if reap_interval is not None else max(0.05, min(5.0, idle_timeout / 4))

    async def reaper() -> None:
        while True:
            await asyncio.sleep(interval)
            for live in registry.idle():
                mcp_endpoint.close_streams(live.id)
                try:
                    await anyio.to_thread.run_sync(live.episode.close)
                except Exception:  # noqa: BLE001 - a dead worker must not stop the reaper
                    log.exception("closing expired episode %s failed", live.id)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with mcp_endpoint.lifespan():
            task = asyncio.create_task(reaper())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                mcp_endpoint.close_streams()
                await anyio.to_thread.run_sync(registry.close_all)
                if on_shutdown is not None:
                    await anyio.to_thread.run_sync(on_shutdown)

    app = FastAPI(title="synth environments", version=__version__, lifespan=lifespan,
                  description="Tool-use environments synthesized by synth: REST and MCP per episode.")
    app.state.registry = registry
    app.state.loaded = loaded
    app.add_middleware(GuardMiddleware, guards=guards)

    @app.exception_handler(RegistryError)
    async def _registry_error(request: Request, exc: RegistryError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.exception_handler(SynthError)
    async def _synth_error(request: Request, exc: SynthError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503 if isinstance(exc, PoolBusy) else 500)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "envs": len(loaded.envs), "episodes": registry.stats()}

    @app.get("/envs")
    async def list_envs() -> dict[str, Any]:
        envs = [{"env_id": env.id, "title": env.manifest.title, "status": env.manifest.status,
                 "tools": env.tool_names, "tasks": [_task_summary(t) for t in env.tasks.values()]}
                for env in loaded.envs.values()]
        return {"envs": envs, "skipped": loaded.skipped}

    contexts: dict[str, AgentContext] = {}

    def agent_fields(env: Any) -> dict[str, Any]:
        """What an agent must be told (as MCP's instructions tell it): the env's date, the person it acts
        for, and the system prompt that says both; None where the env folder predates them."""
        if env.id not in contexts:
            contexts[env.id] = AgentContext.of_env(env.path)
        ctx = contexts[env.id]
        return {"today": ctx.today, "acting_user": ctx.acting_user, "system_prompt": system_prompt(ctx)}

    @app.get("/envs/{env_id}")
    async def get_env(env_id: str) -> dict[str, Any]:
        env = registry.env(env_id)
        return {"env_id": env.id, "title": env.manifest.title, "scenario": env.manifest.scenario,
                "status": env.manifest.status, **agent_fields(env), "tools": env.openai_tools,
                "tasks": [_task_summary(t) for t in env.tasks.values()]}

    @app.post("/envs/{env_id}/episodes", status_code=201)
    async def create_episode(env_id: str, request: Request,
                             body: EpisodeRequest | None = Body(default=None)) -> dict[str, Any]:
        task_id = body.task_id if body is not None else None
        live = await anyio.to_thread.run_sync(registry.create, env_id, task_id)
        base = str(request.base_url).rstrip("/")
        fields = agent_fields(registry.env(live.env_id))
        # messages: the [system, user] start every synth consumer gives the agent (rollout, exports)
        messages = (agent_messages(contexts[live.env_id], live.instruction) if live.instruction is not None
                    else [{"role": "system", "content": fields["system_prompt"]}])
        return {"episode_id": live.id, "env_id": live.env_id, "task_id": live.task_id,
                "instruction": live.instruction, **fields, "messages": messages, "tools": live.tools,
                "mcp_url": f"{base}/episodes/{live.id}/mcp"}

    @app.get("/episodes/{episode_id}")
    async def get_episode(episode_id: str) -> dict[str, Any]:
        live = registry.get(episode_id)
        return {"episode_id": live.id, "env_id": live.env_id, "task_id": live.task_id,
                "instruction": live.instruction, "calls": live.calls}

    @app.post("/episodes/{episode_id}/tools/{name}", openapi_extra=_ARGUMENTS_BODY, response_model=dict[str, Any])
    async def call_tool(episode_id: str, name: str, request: Request) -> Any:
        """Call a tool; the answer is the observation the agent sees: {"ok": true, "result": ...}
        or {"ok": false, "error": "..."} (bad arguments included), never an HTTP error."""
        live = registry.begin(episode_id)
        try:
            raw = await request.body()
            arguments: Any = raw.decode("utf-8", errors="replace") if raw.strip() else {}
            if isinstance(arguments, str):  # the runtime parses it and reports bad JSON itself
                try:
                    arguments = json.loads(arguments)
                except RecursionError:
                    return {"ok": False, "error": "arguments are nested too deeply"}
                except ValueError:
                    pass
            if not isinstance(arguments, (dict, str)):
                return {"ok": False, "error": f"arguments must be a JSON object, got {type(arguments).__name__}"}
            observation = await anyio.to_thread.run_sync(live.episode.call, name, arguments)
            live.calls += 1
            # Encoded here, by the C encoder: the result is plain JSON data already.
            return Response(json.dumps(observation, ensure_ascii=False).encode("utf-8"),
                            media_type="application/json")
        finally:
            registry.end(live)

    @app.post("/episodes/{episode_id}/evaluate")
    async def evaluate(episode_id: str, body: EvaluateRequest | None = Body(default=None)) -> dict[str, Any]:
        live = registry.begin(episode_id)
        try:
            kind = (body.reward if body else None) or reward
            result = await anyio.to_thread.run_sync(live.episode.evaluate, body.answer if body else None, kind)
        finally:
            registry.end(live)
        return {"episode_id": live.id, "env_id": live.env_id, "task_id": live.task_id,
                **result.model_dump(mode="json")}

    @app.delete("/episodes/{episode_id}")
    async def delete_episode(episode_id: str) -> dict[str, Any]:
        live = await anyio.to_thread.run_sync(registry.close, episode_id)
        mcp_endpoint.close_streams(episode_id)
        return {"episode_id": live.id, "closed": True, "calls": live.calls}

    app.add_route("/episodes/{episode_id}/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"],
                  include_in_schema=False)
    return app
