"""OpenEnv: every served env at /openenv/<env_id>, spoken the way openenv-core's
clients speak it (EnvClient, GenericEnvClient, MCPToolClient).

  WS   /openenv/<env_id>/ws        one session per connection: reset, step, state, close, mcp
  POST /openenv/<env_id>/mcp       JSON-RPC tools/list, tools/call, openenv/session/create|close
  GET  /openenv/<env_id>/health | metadata | schema

`reset` opens an episode (any previous one of the connection is closed): the task
by `task_id`, by `seed`, or the next one of `split` (default train); its
observation holds the instruction and the system prompt (also under `metadata`,
the one field MCPToolClient keeps). Each step is one tool call: {"type":
"list_tools"} or {"type": "call_tool", "tool_name", "arguments"}; calling the
answer tool (`submit_answer`, {"answer": "..."}) evaluates the episode and returns
the reward with done=true. A malformed message gets an error reply and the
episode stays as it was. OpenEnv's stateless HTTP /reset and /step (a fresh env
per request) are not offered: an episode of tool calls lives in a WS or MCP session.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from starlette.websockets import WebSocket, WebSocketDisconnect

from synth import __version__
from synth.use.server.episodes import LiveEpisode, NotFound, RegistryError
from synth.use.server.faces import CallOutcome, Faces, reward_payload
from synth.use.server.guard import matches

_ERROR_TYPES = {"not_found": "tool_not_found", "invalid_args": "invalid_args", "error": "execution_error"}
_INVALID_REQUEST, _METHOD_NOT_FOUND, _INVALID_PARAMS, _SERVER_ERROR = -32600, -32601, -32602, -32000
CAPACITY = "CAPACITY_REACHED"  # the error code of a session the server has no room for (routing.py looks for it)


class StepError(Exception):
    """A message the session cannot act on; answered with an error reply, nothing changes."""

    def __init__(self, message: str, code: str = "VALIDATION_ERROR"):
        super().__init__(message)
        self.message, self.code = message, code


def _int_or_none(value: Any, name: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise StepError(f"{name} must be an integer")


class OpenEnvSession:
    """One OpenEnv session: at most one open episode at a time."""

    def __init__(self, faces: Faces, env_id: str):
        self.faces, self.env_id = faces, env_id
        self.live: LiveEpisode | None = None
        self.kind = faces.reward
        self.steps = 0
        self.done = False
        self.reward: float | None = None

    async def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        task_id, split = data.get("task_id"), data.get("split")
        if not (task_id is None or isinstance(task_id, str)) or not (split is None or isinstance(split, str)):
            raise StepError("task_id and split must be strings")
        try:
            kind = self.faces.reward_kind(data.get("reward"), self.faces.reward)
            chosen = self.faces.pick(self.env_id, task_id, split, _int_or_none(data.get("seed"), "seed"))
            await self.faces.close(self.live)
            self.live = None
            self.live = await self.faces.open(self.env_id, chosen)
        except RegistryError as exc:
            raise StepError(exc.message, CAPACITY if exc.status == 503 else "VALIDATION_ERROR") from exc
        self.kind, self.steps, self.done, self.reward = kind, 0, False, None
        info = {"env_id": self.env_id, "task_id": chosen, "episode_id": self.live.id,
                "split": self.live.episode.task.split, "instruction": self.live.instruction,
                "system_prompt": self.faces.system_prompt(self.env_id),
                "answer_tool": self.faces.answer_tool(self.env_id)}
        return {"observation": {**info, "metadata": dict(info)}, "reward": None, "done": False}

    def tools(self) -> list[dict[str, Any]]:
        return self.faces.tool_specs(self.env_id) + [self.faces.answer_tool_spec(self.env_id)]

    async def call(self, name: Any, arguments: Any) -> tuple[CallOutcome, float | None]:
        """A tool call or the answer; (outcome, reward when the episode just ended)."""
        if self.live is None:
            raise StepError("no episode yet: send a reset first", "SESSION_ERROR")
        if self.done:
            return CallOutcome("error", message="the episode is over (the answer was submitted); reset to start "
                                                "another"), None
        if not isinstance(arguments, dict):
            raise StepError("arguments must be a JSON object")
        try:
            if name == self.faces.answer_tool(self.env_id):
                if set(arguments) - {"answer"}:
                    return CallOutcome("invalid_args", message=f"{name} takes one argument, 'answer'"), None
                result = await self.faces.submit(self.live, arguments.get("answer"), self.kind)
                self.steps += 1
                self.done, self.reward = True, result.reward
                return CallOutcome("ok", result=reward_payload(result)), result.reward
            outcome = await self.faces.call(self.live, name, arguments)
        except NotFound as exc:
            raise StepError(f"{exc.message}; send a reset to open a new episode", "SESSION_ERROR") from exc
        self.steps += 1
        return outcome, None

    async def step(self, action: Any) -> dict[str, Any]:
        if not isinstance(action, dict):
            raise StepError("the action must be a JSON object")
        kind = action.get("type")
        if kind == "list_tools":
            return {"observation": {"tools": self.tools(), "metadata": {}}, "reward": None, "done": self.done}
        if kind != "call_tool":
            raise StepError(f"unknown action type {kind!r}; actions: list_tools, call_tool (tool_name, arguments)")
        name = action.get("tool_name")
        if not isinstance(name, str) or not name:
            raise StepError("call_tool needs a tool_name")
        outcome, reward = await self.call(name, action.get("arguments") or {})
        observation: dict[str, Any] = {"tool_name": name, "result": None, "error": None,
                                       "metadata": {"episode_id": self.live.id if self.live else None,
                                                    "step": self.steps}}
        if outcome.kind == "ok":
            text = json.dumps(outcome.result, ensure_ascii=False, default=str)
            observation["result"] = {"content": [{"type": "text", "text": text}], "data": outcome.result,
                                     "structured_content": {"result": outcome.result}, "is_error": False}
        else:
            observation["error"] = {"error_type": _ERROR_TYPES[outcome.kind], "message": outcome.message}
        return {"observation": observation, "reward": reward, "done": self.done}

    def state(self) -> dict[str, Any]:
        live = self.live
        return {"episode_id": live.id if live else None, "step_count": self.steps, "env_id": self.env_id,
                "task_id": live.task_id if live else None, "done": self.done, "reward": self.reward}

    async def close(self) -> None:
        await self.faces.close(self.live)
        self.live = None


class OpenEnvFace:
    def __init__(self, faces: Faces, guards: Any):
        self.faces, self.guards = faces, guards
        self.http_sessions: dict[str, OpenEnvSession] = {}  # episode id -> the HTTP MCP session

    # ----------------------------------------------------------------- WebSocket

    def refusal(self, headers: Any) -> str | None:
        """GuardMiddleware checks HTTP only: the same Host/Origin rules for the socket."""
        host, origin = headers.get("host", ""), headers.get("origin")
        if not matches(host, self.guards.allowed_hosts):
            return f"Host {host[:100]!r} is not served here"
        if origin is not None and not matches(origin, self.guards.allowed_origins):
            return f"Origin {origin[:100]!r} is not allowed"
        return None

    async def websocket(self, websocket: WebSocket, env_id: str) -> None:
        if self.refusal(websocket.headers):
            await websocket.close(code=1008)  # before accept: the handshake is refused with 403
            return
        await websocket.accept()
        session = OpenEnvSession(self.faces, env_id)
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = (message.get("bytes") or b"").decode("utf-8", errors="replace")
                reply = await self.handle(session, raw)
                if reply is None:
                    break
                await websocket.send_text(json.dumps(reply, ensure_ascii=False, default=str))
        except WebSocketDisconnect:
            pass
        finally:
            await session.close()

    async def handle(self, session: OpenEnvSession, raw: str) -> dict[str, Any] | None:
        if len(raw) > self.guards.max_body_bytes:
            return _ws_error(f"message of {len(raw):,} bytes; the limit is {self.guards.max_body_bytes:,}",
                             "VALIDATION_ERROR")
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            return _ws_error(f"Invalid JSON: {exc}", "INVALID_JSON")
        if not isinstance(message, dict):
            return _ws_error("a message must be a JSON object with a type", "VALIDATION_ERROR")
        kind, data = message.get("type"), message.get("data")
        if kind == "close":
            return None
        try:
            self.faces.env(session.env_id)
        except NotFound as exc:  # every message is told, so the client's first call raises it
            return _ws_error(exc.message, "FACTORY_ERROR")
        try:
            if kind == "reset":
                return {"type": "observation", "data": await session.reset(data if isinstance(data, dict) else {})}
            if kind == "step":
                return {"type": "observation", "data": await session.step(data)}
            if kind == "state":
                return {"type": "state", "data": session.state()}
            if kind == "mcp":
                return {"type": "mcp", "data": await self.rpc(data, session)}
        except StepError as exc:
            return _ws_error(exc.message, exc.code)
        return _ws_error(f"Unknown message type: {kind}", "UNKNOWN_TYPE")

    # ----------------------------------------------------------------- MCP JSON-RPC

    async def rpc(self, request: Any, session: OpenEnvSession | None = None, env_id: str | None = None) -> dict:
        """tools/list, tools/call and OpenEnv's session methods; `session` is the WS session
        (HTTP requests name theirs with params.session_id)."""
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" or not isinstance(request.get("method"),
                                                                                               str):
            return _rpc_error(None, _INVALID_REQUEST, "Invalid Request: a JSON-RPC 2.0 object with a method")
        rid, method, params = request.get("id"), request["method"], request.get("params") or {}
        if not isinstance(params, dict):
            return _rpc_error(rid, _INVALID_PARAMS, "Params must be an object")
        env_id = session.env_id if session is not None else env_id
        try:
            if method == "openenv/session/create":
                if session is not None:
                    return _rpc_result(rid, {"session_id": session.live.id if session.live else None})
                created = OpenEnvSession(self.faces, env_id)
                await created.reset(params)
                self._forget_gone()
                self.http_sessions[created.live.id] = created
                return _rpc_result(rid, {"session_id": created.live.id, **created.state()})
            if method == "openenv/session/close":
                target = self.http_sessions.pop(str(params.get("session_id")), None)
                if target is None:
                    return _rpc_error(rid, _INVALID_PARAMS, f"Unknown session_id: {params.get('session_id')}")
                await target.close()
                return _rpc_result(rid, {"session_id": params.get("session_id"), "closed": True})
            if session is None and params.get("session_id") is not None:
                session = self.http_sessions.get(str(params["session_id"]))
                if session is None or session.live is None or session.live.episode.closed:
                    return _rpc_error(rid, _INVALID_PARAMS, f"Unknown session_id: {params['session_id']} (closed or "
                                                            "expired); create a new one")
            tools = (session or OpenEnvSession(self.faces, env_id)).tools()
            if method == "tools/list":
                return _rpc_result(rid, {"tools": [{**{k: v for k, v in t.items() if k != "input_schema"},
                                                    "inputSchema": t["input_schema"]} for t in tools]})
            if method == "tools/call":
                if session is None:
                    return _rpc_error(rid, _INVALID_PARAMS, "tools/call needs a session_id (openenv/session/create)")
                return await self._rpc_call(rid, session, params)
        except StepError as exc:
            if exc.code == CAPACITY:  # as openenv-core's own server answers it: a server error
                return _rpc_error(rid, _SERVER_ERROR, exc.message, {"code": CAPACITY})
            return _rpc_error(rid, _INVALID_PARAMS, exc.message)
        return _rpc_error(rid, _METHOD_NOT_FOUND, f"Method not found: {method}")

    async def _rpc_call(self, rid: Any, session: OpenEnvSession, params: dict[str, Any]) -> dict:
        name = params.get("name")
        if not isinstance(name, str) or not name:
            return _rpc_error(rid, _INVALID_PARAMS, "Missing 'name' in params")
        outcome, reward = await session.call(name, params.get("arguments") or {})
        if outcome.kind == "ok":
            text = json.dumps(outcome.result, ensure_ascii=False, default=str)
            return _rpc_result(rid, {"content": [{"type": "text", "text": text}], "data": outcome.result,
                                     "structured_content": {"result": outcome.result}, "is_error": False,
                                     "reward": reward, "done": session.done})
        code = _SERVER_ERROR if outcome.kind == "error" else _INVALID_PARAMS
        return _rpc_error(rid, code, outcome.message)

    def _forget_gone(self) -> None:
        """Drop HTTP sessions whose episode the registry closed (idle expiry)."""
        for key in [k for k, s in self.http_sessions.items() if s.live is None or s.live.episode.closed]:
            self.http_sessions.pop(key, None)

    # ----------------------------------------------------------------- descriptions

    def metadata(self, env_id: str) -> dict[str, Any]:
        env = self.faces.env(env_id)
        return {"name": env.id, "description": env.manifest.title, "readme_content": env.manifest.scenario,
                "version": __version__, "author": "synth", "documentation_url": None}

    def schema(self, env_id: str) -> dict[str, Any]:
        names = [t["name"] for t in OpenEnvSession(self.faces, env_id).tools()]
        action = {"oneOf": [
            {"type": "object", "properties": {"type": {"const": "list_tools"}}, "required": ["type"]},
            {"type": "object", "properties": {"type": {"const": "call_tool"}, "tool_name": {"enum": names},
                                              "arguments": {"type": "object"}}, "required": ["type", "tool_name"]}]}
        observation = {"type": "object", "properties": {
            "instruction": {"type": "string"}, "system_prompt": {"type": "string"}, "tools": {"type": "array"},
            "tool_name": {"type": "string"}, "result": {}, "error": {"type": ["object", "null"]}}}
        state = {"type": "object", "properties": {"episode_id": {"type": ["string", "null"]},
                                                  "step_count": {"type": "integer"}, "done": {"type": "boolean"},
                                                  "reward": {"type": ["number", "null"]}}}
        return {"action": action, "observation": observation, "state": state}


def _ws_error(message: str, code: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


def _rpc_result(rid: Any, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _rpc_error(rid: Any, code: int, message: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": rid, "error": error}


def mount_openenv(app: Any, faces: Faces, guards: Any) -> OpenEnvFace:
    face = OpenEnvFace(faces, guards)

    @app.get("/openenv/{env_id}/health", tags=["OpenEnv"])
    async def openenv_health(env_id: str) -> dict[str, Any]:
        faces.env(env_id)
        return {"status": "healthy"}

    @app.get("/openenv/{env_id}/metadata", tags=["OpenEnv"])
    async def openenv_metadata(env_id: str) -> dict[str, Any]:
        return face.metadata(env_id)

    @app.get("/openenv/{env_id}/schema", tags=["OpenEnv"])
    async def openenv_schema(env_id: str) -> dict[str, Any]:
        return face.schema(env_id)

    @app.post("/openenv/{env_id}/mcp", tags=["OpenEnv"])
    async def openenv_mcp(env_id: str, request: Request) -> dict[str, Any]:
        faces.env(env_id)
        try:
            body = json.loads(await request.body())
        except (ValueError, RecursionError):
            return _rpc_error(None, -32700, "Parse error")
        return await face.rpc(body, env_id=env_id)

    app.add_api_websocket_route("/openenv/{env_id}/ws", face.websocket)
    app.state.openenv = face
    return face
