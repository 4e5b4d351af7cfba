"""MCP per episode with the official client: the task instruction as a prompt and a
resource, tool annotations, and server instructions carrying the agent's system
prompt with today's date and the acting user."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from envkit import TASKS, make_library_env
from exportkit import make_context_library
from synth.use.agent import AgentContext, agent_messages
from synth.use.annotations import observed_changes, tool_hints
from synth.use.server import background

LIBRARY = "city_library"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mcp")
    make_context_library(root)
    srv, _ = background(root)
    with srv:
        yield srv


def open_episode(url: str, task_id: str | None) -> dict:
    response = httpx.post(f"{url}/envs/{LIBRARY}/episodes", json={"task_id": task_id} if task_id else {})
    assert response.status_code == 201, response.text
    return response.json()


async def session_run(url: str, steps):
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return init, await steps(session)


def test_mcp_episode_offers_the_task_as_prompt_and_resource(server):
    episode = open_episode(server.url, "task_02")

    async def steps(session):
        prompts = (await session.list_prompts()).prompts
        prompt = await session.get_prompt("task")
        resources = (await session.list_resources()).resources
        read = await session.read_resource(resources[0].uri)
        with pytest.raises(MCPError, match="unknown prompt 'other'"):
            await session.get_prompt("other")
        return prompts, prompt, resources, read

    init, (prompts, prompt, resources, read) = anyio.run(session_run, episode["mcp_url"], steps)
    instruction = TASKS[1].instruction
    assert [p.name for p in prompts] == ["task"]
    assert [(m.role, m.content.text) for m in prompt.messages] == [("user", instruction)]
    assert [str(r.uri) for r in resources] == [f"synth://episodes/{episode['episode_id']}/task"]
    assert resources[0].mime_type == "text/plain"
    assert [c.text for c in read.contents] == [instruction]

    # the server instructions are the agent's system prompt: the same builder as rollouts and exports
    env_dir = server.app.state.loaded.envs[LIBRARY].path
    system = agent_messages(AgentContext.of_env(env_dir), instruction)[0]["content"]
    assert init.instructions.startswith(system)
    assert "Today is 2025-06-02 (Monday)" in init.instructions
    assert "You are acting for Maya Patel, member (record 2 of the members table)" in init.instructions
    assert "prompt `task`" in init.instructions
    httpx.delete(f"{server.url}/episodes/{episode['episode_id']}")


def test_mcp_tools_carry_behaviour_annotations(server):
    episode = open_episode(server.url, "task_04")

    async def steps(session):
        return (await session.list_tools()).tools

    _, tools = anyio.run(session_run, episode["mcp_url"], steps)
    hints = {t.name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint,
                      t.annotations.open_world_hint) for t in tools}
    assert hints == {
        "search_books": (True, None, True, False),
        "get_member": (True, None, True, False),
        "list_loans": (True, None, True, False),
        "checkout_book": (False, None, None, False),  # never observed: unknown
        "return_book": (False, True, None, False),  # observed updating a loan and a book
        "reserve_book": (False, False, None, False),  # observed only adding a reservation
    }
    httpx.delete(f"{server.url}/episodes/{episode['episode_id']}")


def test_episode_without_task_has_no_task_prompt(server):
    episode = open_episode(server.url, None)

    async def steps(session):
        prompts = (await session.list_prompts()).prompts
        resources = (await session.list_resources()).resources
        with pytest.raises(MCPError, match="without a task"):
            await session.get_prompt("task")
        return prompts, resources

    init, (prompts, resources) = anyio.run(session_run, episode["mcp_url"], steps)
    assert prompts == [] and resources == []
    assert "prompt `task`" not in init.instructions and "Today is 2025-06-02" in init.instructions
    httpx.delete(f"{server.url}/episodes/{episode['episode_id']}")


def test_env_without_context_fields_or_tests_still_serves(tmp_path):
    env_dir = make_library_env(tmp_path / "envs")  # then: env.json without today / acting_user, empty tests.jsonl
    manifest = json.loads((env_dir / "env.json").read_text())
    for key in ("today", "acting_user"):
        manifest.pop(key, None)
    (env_dir / "env.json").write_text(json.dumps(manifest))
    srv, _ = background(tmp_path)
    with srv:
        episode = open_episode(srv.url, "task_01")

        async def steps(session):
            return (await session.list_tools()).tools

        init, tools = anyio.run(session_run, episode["mcp_url"], steps)
    assert "Today is" not in init.instructions and "acting for" not in init.instructions
    assert init.instructions.startswith('You are an assistant working inside "City Library"')
    assert {t.name: t.annotations.destructive_hint for t in tools if not t.annotations.read_only_hint} == {
        "checkout_book": None, "return_book": None, "reserve_book": None}


def test_hints_only_count_passing_tests():
    tests = [{"tool": "a", "verdict": "fail", "observed": {"diff": {"t": {"removed": [{"id": 1}]}}}},
             {"tool": "a", "verdict": "pass", "observed": {"diff": {"t": {"added": [{"id": 2}], "changed": []}}}},
             {"tool": "b", "verdict": "pass", "observed": {"diff": {}}}]
    assert observed_changes(tests) == {"a": {"added"}, "b": set()}

    class Spec:
        def __init__(self, name, read_only):
            self.name, self.read_only = name, read_only

    assert tool_hints([Spec("a", False), Spec("b", False)], tests) == {
        "a": {"read_only_hint": False, "destructive_hint": False}, "b": {"read_only_hint": False}}
