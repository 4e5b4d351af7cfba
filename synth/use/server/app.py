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
  POST   /batch                               many episodes' tool calls in one request (toolcalls.py)
  POST   /episodes/{episode_id}/evaluate      {"answer"} -> reward with per-check breakdown
  DELETE /episodes/{episode_id}
MCP (streamable HTTP): /episodes/{episode_id}/mcp, see mcp_app.py.
OpenEnv (/openenv/{env_id}/ws, /mcp) and the Open Reward Standard: openenv_face.py, ors_face.py.

How the pieces fit (a new protocol face plugs in the same way): the envs
(LoadedEnvs) and the live episodes (EpisodeRegistry, episodes.py) are shared by
every face; a face looks episodes up with registry.get/begin/end and runs tool
calls through `app.state.lanes` (CallLanes, lanes.py), which batches them per
sandbox worker, and blocking episode work (create, evaluate, close) in threads.
Faces are FastAPI routes or ASGI apps mounted on the FastAPI app in create_app
(`ServeApp.api` from outside). In front of it (ServeApp): the Host/Origin/body
guard, with `--workers N` a router (routing.py) that sends each request to the
server process owning its episode (by the id in /episodes/{id}/..., OpenEnv's
params.session_id, ORS's X-Session-ID; a face that names episodes elsewhere adds
its rule there), and the fast lane
(fastlane.py), which answers the hot routes (a tool call, a batch, MCP posts)
without FastAPI's machinery.

Generated code runs in sandbox workers (synth.runtime.SandboxPool) unless the
operator explicitly serves trusted envs in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
from fastapi import Body, FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel

from synth import __version__
from synth.errors import SynthError
from synth.folder.dirs import find_env_dirs
from synth.folder.files import read_env_json
from synth.folder.review import rejection
from synth.use.agent import AgentContext, agent_messages, system_prompt
from synth.use.server import toolcalls
from synth.use.server.episodes import EpisodeRegistry, RegistryError
from synth.use.server.faces import mount_protocol_faces
from synth.use.server.fastlane import MCP_METHODS, FastLane
from synth.use.server.guard import GuardMiddleware, ServerGuards
from synth.use.server.lanes import CallLanes
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


# Documented here, parsed by toolcalls.parse_batch (the fast lane answers the same way).
_BATCH_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["calls"], "properties": {"calls": {"type": "array", "items": {
        "type": "object", "required": ["episode_id", "tool"], "properties": {
            "episode_id": {"type": "string"}, "tool": {"type": "string"},
            "arguments": {"type": "object", "description": "the tool's arguments (default: none)"}}}}}}}}}}


def create_app(loaded: LoadedEnvs, *, max_episodes: int = 256, idle_timeout: float = 300.0,
               reap_interval: float | None = None, on_shutdown: Any = None,
               guards: ServerGuards | None = None, reward: str = "rubric", fast_lane: bool = True,
               process: Any = None) -> "ServeApp":
    """The ASGI app over already loaded envs. `on_shutdown()` runs after every episode is closed.
    `guards`: allowed Host/Origin values and the body limit (default: loopback only, 8 MB).
    `fast_lane=False` serves every route through FastAPI (the reference the fast lane is tested
    against). `process`: this server's place among `--workers N` processes (routing.Process)."""
    guards = guards or ServerGuards()
    registry = EpisodeRegistry(loaded.envs, max_episodes=max_episodes, idle_timeout=idle_timeout,
                               id_prefix=process.id_prefix if process is not None else "")
    lanes = CallLanes()
    mcp_endpoint = EpisodeMcp(registry, lanes, guards, fast=fast_lane)
    peers = process.peers() if process is not None else None
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
            # What is loaded now lives as long as the server: keep it out of the collector's full
            # passes, which would otherwise scan every module, model and schema (a p99 spike).
            gc.freeze()
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                mcp_endpoint.close_streams()
                await anyio.to_thread.run_sync(lanes.close)
                if peers is not None:
                    await peers.aclose()
                await anyio.to_thread.run_sync(registry.close_all)
                if on_shutdown is not None:
                    await anyio.to_thread.run_sync(on_shutdown)

    app = FastAPI(title="synth environments", version=__version__, lifespan=lifespan,
                  description="Tool-use environments synthesized by synth: REST and MCP per episode.")
    app.state.registry = registry
    app.state.loaded = loaded
    app.state.lanes = lanes
    app.state.mcp = mcp_endpoint

    @app.exception_handler(RegistryError)
    @app.exception_handler(SynthError)
    async def _known_error(request: Request, exc: Exception) -> Response:
        status, body = toolcalls.error_answer(exc)
        return Response(body, status_code=status, media_type="application/json")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, "envs": len(loaded.envs), "episodes": registry.stats(), "server": server_info(process)}

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
        body = await toolcalls.tool_call(registry, lanes, episode_id, name, await request.body())
        return Response(body, media_type="application/json")

    @app.post("/batch", response_model=dict[str, Any], openapi_extra=_BATCH_BODY)
    async def batch(request: Request) -> Any:
        """Tool calls of many episodes in one request, answered in order: {"results": [observation, ...]}.
        Calls on one episode run in the order given, calls on different episodes concurrently. A call
        whose episode is unknown or gone gets {"ok": false, "error": ..., "status": 404}; the rest run."""
        calls = toolcalls.parse_batch(await request.body())
        results = await toolcalls.batch(registry, lanes, calls, peers, request.headers.get("host", "").encode())
        return Response(toolcalls.encode({"results": results}), media_type="application/json")

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

    app.add_route("/episodes/{episode_id}/mcp", mcp_endpoint, methods=list(MCP_METHODS), include_in_schema=False)
    mount_protocol_faces(app, registry, guards, reward)  # OpenEnv and ORS, last: ORS paths start with a parameter

    # In front of FastAPI (and its own middleware layers): the guard, the router to the episode's
    # process, the fast lane for the hot routes.
    front: Any = FastLane(app, registry, lanes, mcp_endpoint, peers) if fast_lane else app
    if process is not None:
        from synth.use.server.routing import OwnerRouter

        front = OwnerRouter(front, peers)
    return ServeApp(app, GuardMiddleware(front, guards))


class ServeApp:
    """The ASGI app `synth serve` runs: the guards and the fast lane in front of the FastAPI app
    (`api`), whose routes, docs and lifespan serve everything else. `state` is the api's."""

    def __init__(self, api: FastAPI, front: Any):
        self.api, self.state, self._front = api, api.state, front

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._front(scope, receive, send)


def server_info(process: Any = None) -> dict[str, Any]:
    """What serves requests: the event loop and HTTP parser in use (uvloop and httptools when the
    `fast` extra is installed), and this process's place among --workers N."""
    import importlib.util

    loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    info: dict[str, Any] = {"loop": "uvloop" if loop == "uvloop" else "asyncio", "http": http}
    if process is not None:
        info.update(process=process.index, processes=process.count, pid=os.getpid())
    return info
