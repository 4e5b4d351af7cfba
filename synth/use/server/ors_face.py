"""The Open Reward Standard (ORS): every served env as an ORS environment, spoken
the way the `openreward` package's client speaks it.

ORS clients address the server's root (`environments.get("<env_id>",
base_url="http://host:port")`): env routes are /<env_id>/splits, /tasks, /task,
/num_tasks, /task_range, /tools, /task_tools, /prompt, /messages and /call, or the
same paths with no prefix and the env named by the X-Deployment header (or the
only env served). A session is POST /create_session (SSE: its id), POST /create
(X-Session-ID; a task_spec or split + index) which opens an episode of the
shared registry, /ping, and POST /delete. Tool calls answer over SSE with
{"ok": true, "output": {"blocks", "metadata", "reward", "finished"}} or
{"ok": false, "error", "reason"} (unknown tool, arguments that break the schema,
a call after the episode finished); those leave the session usable. The env's
terminal tool `submit_answer` (hidden from the tool list, as ORS wants) takes the
agent's final message, evaluates the episode and returns the reward with
finished=true.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from synth import __version__
from synth.use.server.episodes import LiveEpisode, NotFound, RegistryError
from synth.use.server.faces import SPLITS, BadRequest, Faces, reward_payload, task_card

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_KEEPALIVE = 10.0  # seconds between SSE comments while a call runs (the client gives up after 30 s of silence)
_REASONS = {"not_found": "not_found", "invalid_args": "input_validation"}


class Gone(RegistryError):
    status = 410  # ORS: the session was deleted


@dataclass
class OrsSession:
    env_id: str
    live: LiveEpisode
    finished: bool = False


def _sse(*events: tuple[str, str]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in events)


class OrsFace:
    def __init__(self, faces: Faces):
        self.faces = faces
        self.sessions: dict[str, OrsSession] = {}

    def env_of(self, request: Request, env_name: str | None) -> str:
        """The env a request is about: its path prefix, else X-Deployment, else the only env."""
        name = env_name or request.headers.get("x-deployment")
        if not name:
            served = list(self.faces.registry.envs)
            if len(served) != 1:
                raise BadRequest(f"name the env: {', '.join(served)} are served; use /<env_id>/... paths or "
                                 "environments.get('<env_id>', base_url=...)")
            name = served[0]
        self.faces.env(name)
        return name

    def session(self, request: Request) -> OrsSession:
        sid = request.headers.get("x-session-id", "").strip()
        if not sid:
            raise BadRequest("X-Session-ID header is required")
        held = self.sessions.get(sid)
        if held is None:
            raise NotFound("Active environment not found; create the session first (POST /create)")
        if held.live.episode.closed:
            self.sessions.pop(sid, None)
            raise Gone("Session deleted: its episode expired or was closed")
        return held

    def tools(self, env_id: str) -> dict[str, Any]:
        answer = self.faces.answer_tool_spec(env_id)
        return {"tools": self.faces.tool_specs(env_id),
                "terminal_tool": {"name": answer["name"], "arg": "answer", "description": answer["description"]},
                "supports_score_group": False, "message_block_types": ["text"]}

    def task_at(self, env_id: str, split: Any, index: Any) -> Any:
        tasks = self.faces.tasks(env_id, self._split(split))
        if not isinstance(index, int) or isinstance(index, bool) or not -len(tasks) <= index < len(tasks):
            raise BadRequest(f"Invalid index {index!r}; split {split!r} has {len(tasks)} task(s)")
        return tasks[index]

    @staticmethod
    def _split(split: Any) -> str:
        if split not in SPLITS:
            raise BadRequest(f"Invalid split {split!r}; splits: {', '.join(SPLITS)}")
        return split

    async def create(self, request: Request, env_name: str | None) -> dict[str, Any]:
        sid = request.headers.get("x-session-id", "").strip()
        if not sid or len(sid) > 255:
            raise BadRequest("X-Session-ID header is required (at most 255 characters)")
        if sid in self.sessions:
            raise BadRequest("Session already exists")
        body = await _json_body(request)
        env_id = self.env_of(request, body.get("env_name") or env_name)
        spec = body.get("task_spec")
        if isinstance(spec, dict):
            task_id = spec.get("task_id")
            if not isinstance(task_id, str) or task_id not in self.faces.env(env_id).tasks:
                raise BadRequest(f"task_spec names no task of env {env_id!r}: {str(task_id)[:100]!r}")
        elif spec is None and "split" in body and "index" in body:
            task_id = self.task_at(env_id, body["split"], body["index"]).task_id
        else:
            raise BadRequest("Provide either task_spec or both split and index")
        for stale in [k for k, s in self.sessions.items() if s.live.episode.closed]:
            self.sessions.pop(stale, None)
        self.sessions[sid] = OrsSession(env_id, await self.faces.open(env_id, task_id))
        return {"sid": sid}

    async def delete(self, request: Request) -> dict[str, Any]:
        sid = request.headers.get("x-session-id", "").strip()
        held = self.sessions.pop(sid, None)
        if held is not None:
            await self.faces.close(held.live)
        return {"sid": sid}

    async def run_call(self, held: OrsSession, name: Any, arguments: Any) -> dict[str, Any]:
        """The RunToolOutput of one call."""
        if held.finished:
            return {"ok": False, "error": "the episode is finished (the answer was submitted)",
                    "reason": "episode_finished"}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return {"ok": False, "error": "a call needs a tool name and an input object", "reason": "input_validation"}
        if name == self.faces.answer_tool(held.env_id):
            if set(arguments) - {"answer"}:
                return {"ok": False, "error": f"{name} takes one argument, 'answer'", "reason": "input_validation"}
            reward = await self.faces.submit(held.live, arguments.get("answer"), self.faces.reward)
            held.finished = True
            text = f"reward {reward.reward:g} ({'passed' if reward.passed else 'not passed'})"
            return {"ok": True, "output": {"blocks": [{"type": "text", "text": text, "detail": None}],
                                           "metadata": reward_payload(reward), "reward": reward.reward,
                                           "finished": True}}
        outcome = await self.faces.call(held.live, name, arguments)
        if outcome.kind in _REASONS:
            return {"ok": False, "error": outcome.message, "reason": _REASONS[outcome.kind]}
        ok = outcome.kind == "ok"
        text = json.dumps(outcome.result, ensure_ascii=False, default=str) if ok else f"error: {outcome.message}"
        return {"ok": True, "output": {"blocks": [{"type": "text", "text": text, "detail": None}],
                                       "metadata": {"ok": ok}, "reward": None, "finished": False}}

    async def call(self, request: Request) -> StreamingResponse:
        held = self.session(request)
        body = await _json_body(request)
        work = asyncio.ensure_future(self.run_call(held, body.get("name"), body.get("input", {})))

        async def stream():
            yield _sse(("task_id", uuid.uuid4().hex))
            while True:
                done, _ = await asyncio.wait({work}, timeout=_KEEPALIVE)
                if done:
                    break
                yield b": keepalive\n\n"
            try:
                result = work.result()
            except RegistryError as exc:  # the episode went away mid-call
                yield _sse(("error", exc.message))
                return
            yield _sse(("end", json.dumps(result, ensure_ascii=False, default=str)))

        return StreamingResponse(stream(), media_type="text/event-stream", headers=_SSE_HEADERS)


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError):
        raise BadRequest("the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    return body


def mount_ors(app: Any, faces: Faces) -> OrsFace:
    face = OrsFace(faces)
    app.state.ors = face

    async def create_session() -> StreamingResponse:
        return StreamingResponse(iter([_sse(("task_id", str(uuid.uuid4())), ("end", ""))]),
                                 media_type="text/event-stream", headers=_SSE_HEADERS)

    async def delete_session(request: Request) -> dict[str, Any]:
        return await face.delete(request)

    async def ping(request: Request) -> dict[str, Any]:
        held = face.session(request)
        faces.registry.get(held.live.id)  # restarts the episode's idle clock
        return {"status": "ok"}

    async def create(request: Request) -> dict[str, Any]:
        return await face.create(request, None)

    async def version() -> dict[str, Any]:
        return {"version": __version__, "build_sha": None}

    async def list_environments() -> list[str]:
        return list(faces.registry.envs)

    root_routes = [("/create_session", create_session, "POST"), ("/create", create, "POST"),
                   ("/delete", delete_session, "POST"), ("/delete_session", delete_session, "POST"),
                   ("/ping", ping, "POST"), ("/version", version, "GET"),
                   ("/list_environments", list_environments, "GET")]
    for path, endpoint, method in root_routes:
        app.add_api_route(path, endpoint, methods=[method], tags=["ORS"])

    # Env routes: after every other route (their first segment is a parameter), and also bare.
    def env_route(suffix: str, method: str):
        def register(handler):
            async def prefixed(request: Request, env_name: str):
                return await handler(request, face.env_of(request, env_name))

            async def bare(request: Request):
                return await handler(request, face.env_of(request, None))

            app.add_api_route(f"/{{env_name}}{suffix}", prefixed, methods=[method], tags=["ORS"],
                              include_in_schema=False)
            app.add_api_route(suffix, bare, methods=[method], tags=["ORS"])
            return handler
        return register

    @env_route("/splits", "GET")
    async def splits(request: Request, env_id: str) -> list[dict[str, str]]:
        return [{"name": s, "type": s} for s in SPLITS]

    @env_route("/tasks", "POST")
    async def tasks(request: Request, env_id: str) -> dict[str, Any]:
        split = face._split((await _json_body(request)).get("split"))
        return {"tasks": [task_card(t) for t in faces.tasks(env_id, split)], "env_name": env_id}

    @env_route("/num_tasks", "POST")
    async def num_tasks(request: Request, env_id: str) -> dict[str, Any]:
        return {"num_tasks": len(faces.tasks(env_id, face._split((await _json_body(request)).get("split"))))}

    @env_route("/task", "POST")
    async def task(request: Request, env_id: str) -> dict[str, Any]:
        body = await _json_body(request)
        return {"task": task_card(face.task_at(env_id, body.get("split"), body.get("index"))), "env_name": env_id}

    @env_route("/task_range", "POST")
    async def task_range(request: Request, env_id: str) -> dict[str, Any]:
        body = await _json_body(request)
        start, stop = body.get("start"), body.get("stop")
        if any(v is not None and (not isinstance(v, int) or isinstance(v, bool)) for v in (start, stop)):
            raise BadRequest("start and stop must be integers")
        chosen = faces.tasks(env_id, face._split(body.get("split")))[start:stop]
        return {"tasks": [task_card(t) for t in chosen], "env_name": env_id}

    @env_route("/tools", "GET")
    async def tools(request: Request, env_id: str) -> dict[str, Any]:
        return face.tools(env_id)

    @env_route("/task_tools", "GET")
    async def task_tools(request: Request, env_id: str) -> dict[str, Any]:
        return face.tools(face.session(request).env_id)

    @env_route("/prompt", "GET")
    async def prompt(request: Request, env_id: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": face.session(request).live.instruction or "", "detail": None}]

    @env_route("/messages", "GET")
    async def messages(request: Request, env_id: str) -> list[dict[str, Any]]:
        held = face.session(request)
        return [{"role": "system", "blocks": [{"type": "text", "text": faces.system_prompt(held.env_id)}]},
                {"role": "user", "blocks": [{"type": "text", "text": held.live.instruction or ""}]}]

    @env_route("/call", "POST")
    async def call(request: Request, env_id: str) -> StreamingResponse:
        return await face.call(request)

    return face
