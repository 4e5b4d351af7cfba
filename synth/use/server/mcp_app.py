"""MCP over streamable HTTP at /episodes/{episode_id}/mcp, with the official SDK.

One endpoint per episode, so isolation never depends on a client keeping an
MCP session: the transport runs stateless (every POST is self-contained, JSON
responses) and the episode id comes from the URL. The ASGI wrapper puts that id
in a context variable; the stateless transport starts each request's handler
task from inside the wrapper, so the handler sees it.

Only SDK API present in both mcp 2.0 (pinned by the verifiers library) and 2.3
is used: the low-level `Server` with on_* handlers and a
`StreamableHTTPSessionManager` without the 2.3-only arguments.

Per episode the server offers its tools with behaviour annotations
(synth.use.annotations), the task instruction as the prompt `task` and the
resource synth://episodes/<id>/task, and server instructions: the agent's system
prompt (application, scenario, today's date, the user it acts for).
"""

from __future__ import annotations

import contextvars
import inspect
import json
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.responses import JSONResponse

from synth import __version__
from synth.use.agent import AgentContext, system_prompt
from synth.use.annotations import env_tool_hints
from synth.use.server.episodes import EpisodeRegistry, NotFound
from synth.use.server.fastlane import read_body, replaying, send_json
from synth.use.server.guard import ServerGuards
from synth.use.server.lanes import CallLanes
from synth.use.server.mcp_fastpath import plain_tool_call

_episode_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("synth_mcp_episode", default=None)
_INVALID_PARAMS = -32602


TASK_PROMPT = "task"


def _tool(spec: dict[str, Any], hints: dict[str, bool] | None) -> types.Tool:
    fn = spec["function"]
    # open_world_hint=False: a tool only ever touches its episode's own database
    annotations = types.ToolAnnotations(**hints, open_world_hint=False) if hints is not None else None
    return types.Tool(name=fn["name"], description=fn.get("description") or None,
                      input_schema=fn.get("parameters") or {"type": "object", "properties": {}},
                      annotations=annotations)


def task_uri(episode_id: str) -> str:
    return f"synth://episodes/{episode_id}/task"


class _EpisodeServer(Server):
    """A Server whose `instructions` belong to the episode of the request being served
    (the SDK reads the attribute when it answers initialize)."""

    def __init__(self, *args: Any, instructions_for: Any, **kwargs: Any):
        self._instructions_for = instructions_for
        super().__init__(*args, **kwargs)

    @property  # type: ignore[override]
    def instructions(self) -> str | None:
        return self._instructions_for()

    @instructions.setter
    def instructions(self, value: str | None) -> None:
        pass  # always per episode


class EpisodeMcp:
    """The ASGI endpoint; run `lifespan()` around the app's lifetime."""

    def __init__(self, registry: EpisodeRegistry, lanes: CallLanes, guards: ServerGuards | None = None,
                 fast: bool = True):
        self.registry, self.lanes, self.fast = registry, lanes, fast
        self._hints: dict[str, dict[str, dict[str, bool]]] = {}  # env id -> tool -> annotations
        self._contexts: dict[str, AgentContext] = {}
        self.server = _EpisodeServer("synth", version=__version__, instructions_for=self._instructions,
                                     on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                                     on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
                                     on_list_resources=self._list_resources, on_read_resource=self._read_resource)
        guards = guards or ServerGuards()
        # DNS-rebinding protection with the server's own Host/Origin lists (GuardMiddleware checks
        # them for every route too; "*", which the SDK has no pattern for, switches its check off).
        open_lists = "*" in guards.allowed_hosts or "*" in guards.allowed_origins
        security = TransportSecuritySettings(enable_dns_rebinding_protection=not open_lists,
                                             allowed_hosts=list(guards.allowed_hosts),
                                             allowed_origins=list(guards.allowed_origins))
        extra = {}
        if "max_request_body_size" in inspect.signature(StreamableHTTPSessionManager).parameters:  # mcp >= 2.3
            extra["max_request_body_size"] = guards.max_body_bytes
        self.manager = StreamableHTTPSessionManager(app=self.server, json_response=True, stateless=True,
                                                    security_settings=security, **extra)
        self._streams: dict[str, set[anyio.CancelScope]] = {}  # episode id -> its open GET streams

    def lifespan(self):
        return self.manager.run()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        episode_id = scope.get("path_params", {}).get("episode_id", "")
        try:
            self.registry.get(episode_id)
        except NotFound as exc:
            await JSONResponse({"detail": exc.message}, status_code=404)(scope, receive, send)
            return
        token = _episode_id.set(episode_id)
        try:
            if scope.get("method") == "GET":  # a stream that stays open: it ends with its episode
                state = {"started": False, "done": False}

                async def tracked(message: Any) -> None:
                    if message["type"] == "http.response.start":
                        state["started"] = True
                    elif message["type"] == "http.response.body" and not message.get("more_body", False):
                        state["done"] = True
                    await send(message)

                with anyio.CancelScope() as stream:
                    self._streams.setdefault(episode_id, set()).add(stream)
                    try:
                        await self.manager.handle_request(scope, receive, tracked)
                    finally:
                        self._streams.get(episode_id, set()).discard(stream)
                if stream.cancelled_caught and state["started"] and not state["done"]:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})  # a clean end
            elif scope.get("method") == "POST" and self.fast:
                await self._post(scope, receive, send, episode_id)
            else:
                await self.manager.handle_request(scope, receive, send)
        finally:
            _episode_id.reset(token)

    async def _post(self, scope: Any, receive: Any, send: Any, episode_id: str) -> None:
        """A plain tools/call is answered here (mcp_fastpath.py); the SDK gets everything else."""
        body = await read_body(receive)
        if body is None:
            return
        plain = plain_tool_call(scope, body)
        if plain is None:
            await self.manager.handle_request(scope, replaying(body, receive), send)
            return
        request_id, name, arguments = plain
        text, is_error = await self._tool_text(episode_id, name, arguments)
        # The wire form the SDK gives a CallToolResult on the handshake-era protocol versions.
        result = {"content": [{"type": "text", "text": text}], "isError": is_error}
        answer = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}, ensure_ascii=False,
                            separators=(",", ":"))
        await send_json(send, 200, answer.encode("utf-8"))

    def close_streams(self, episode_id: str | None = None) -> None:
        """End the open GET streams of an episode (all episodes when None); call on the event loop."""
        ids = [episode_id] if episode_id is not None else list(self._streams)
        for eid in ids:
            for stream in self._streams.pop(eid, set()):
                stream.cancel()

    def _episode_of(self, ctx: Any) -> str:
        episode_id = _episode_id.get()
        if episode_id is None and getattr(ctx, "request", None) is not None:
            episode_id = ctx.request.scope.get("path_params", {}).get("episode_id")
        return episode_id or ""

    def _live(self, ctx: Any) -> Any:
        try:
            return self.registry.get(self._episode_of(ctx))
        except NotFound as exc:
            raise MCPError(_INVALID_PARAMS, exc.message) from exc

    def _instructions(self) -> str | None:
        episode_id = _episode_id.get()
        try:
            live = self.registry.get(episode_id or "")
        except NotFound:
            return None
        if live.env_id not in self._contexts:
            self._contexts[live.env_id] = AgentContext.of_env(self.registry.envs[live.env_id].path)
        text = system_prompt(self._contexts[live.env_id])
        if live.instruction is not None:
            text += (f"\n\nThe user's request for this episode is the prompt `{TASK_PROMPT}` "
                     f"(also the resource {task_uri(live.id)}).")
        return text

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        live = self._live(ctx)
        if live.env_id not in self._hints:
            self._hints[live.env_id] = await anyio.to_thread.run_sync(env_tool_hints,
                                                                      self.registry.envs[live.env_id])
        hints = self._hints[live.env_id]
        return types.ListToolsResult(tools=[_tool(s, hints.get(s["function"]["name"])) for s in live.tools])

    def _task(self, ctx: Any) -> tuple[Any, str]:
        live = self._live(ctx)
        if live.instruction is None:
            raise MCPError(_INVALID_PARAMS, f"episode {live.id!r} was opened without a task, so it has no task "
                                            "prompt or resource; open one with a task_id")
        return live, live.instruction

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        live = self._live(ctx)
        if live.instruction is None:
            return types.ListPromptsResult(prompts=[])
        return types.ListPromptsResult(prompts=[types.Prompt(
            name=TASK_PROMPT, title="Task", description=f"The user's request of task {live.task_id}")])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        live, instruction = self._task(ctx)
        if params.name != TASK_PROMPT:
            raise MCPError(_INVALID_PARAMS, f"unknown prompt {params.name!r}; this episode has the prompt "
                                            f"{TASK_PROMPT!r}")
        return types.GetPromptResult(description=f"The user's request of task {live.task_id}", messages=[
            types.PromptMessage(role="user", content=types.TextContent(text=instruction))])

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        live = self._live(ctx)
        if live.instruction is None:
            return types.ListResourcesResult(resources=[])
        return types.ListResourcesResult(resources=[types.Resource(
            uri=task_uri(live.id), name=TASK_PROMPT, title="Task instruction", mime_type="text/plain",
            description=f"The user's request of task {live.task_id}")])

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        live, instruction = self._task(ctx)
        if str(params.uri) != task_uri(live.id):
            raise MCPError(_INVALID_PARAMS, f"unknown resource {params.uri}; this episode has {task_uri(live.id)}")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=task_uri(live.id), mime_type="text/plain", text=instruction)])

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        text, is_error = await self._tool_text(self._episode_of(ctx), params.name, params.arguments or {})
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=is_error)

    async def _tool_text(self, episode_id: str, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The call's answer as MCP tool content: (text, is_error)."""
        try:
            live = self.registry.begin(episode_id)
        except NotFound as exc:
            return exc.message, True
        try:
            observation = await self.lanes.submit(live.episode, name, arguments)
            live.calls += 1
        finally:
            self.registry.end(live)
        if not observation.get("ok"):
            return str(observation.get("error")), True
        return json.dumps(observation.get("result"), ensure_ascii=False, default=str), False
