"""`synth serve` as OpenEnv environments, driven by openenv-core's own clients
(MCPToolClient, GenericEnvClient): gold actions earn 1.0, a wrong answer less, two
sessions stay isolated, a malformed step gets an error and the episode stays usable,
and the episodes live in the same registry as REST and MCP."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from openenv.core import GenericEnvClient, MCPToolClient
from openenv.core.env_server.mcp_types import CallToolAction
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

from envkit import TASKS, TOOLS, make_library_env, served_library
from synth.use.server import background

LIBRARY = "city_library"
GOLD_ANSWER = "Dune is checked out to you."


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from served_library(tmp_path_factory, "openenv")


def base(server) -> str:
    return f"{server.url}/openenv/{LIBRARY}"


def live_episodes(server) -> int:
    return httpx.get(f"{server.url}/health").json()["episodes"]["live"]


async def submit(env, answer: str):
    return await env.step(CallToolAction(tool_name="submit_answer", arguments={"answer": answer}))


def test_gold_actions_earn_one_and_a_wrong_answer_less(server):
    async def play():
        async with MCPToolClient(base_url=base(server)) as gold, MCPToolClient(base_url=base(server)) as wrong:
            first = await gold.reset(task_id="task_02")
            await wrong.reset(task_id="task_02")
            tools = await gold.list_tools()
            member = await gold.call_tool("get_member", email="maya.patel@example.com")
            loan = await gold.call_tool("checkout_book", member_id=2, book_id=3)
            during = await gold.state()
            won = await submit(gold, GOLD_ANSWER)
            lost = await submit(wrong, "Sorry, I could not find that book.")
            return first, tools, member, loan, during, won, lost, await gold.state()

    first, tools, member, loan, during, won, lost, after = anyio.run(play)
    meta = first.observation.metadata
    assert first.done is False and first.reward is None
    assert meta["task_id"] == "task_02" and meta["instruction"] == TASKS[1].instruction
    assert meta["system_prompt"].startswith("You are an assistant") and meta["answer_tool"] == "submit_answer"
    assert [t.name for t in tools] == [t.name for t in TOOLS] + ["submit_answer"]
    assert tools[0].input_schema == TOOLS[0].parameters
    assert member["member_id"] == 2 and loan["title"] == "Dune"
    assert during.step_count == 2
    assert won.done is True and won.reward == 1.0
    assert won.observation.result["data"]["passed"] is True
    assert lost.done is True and lost.reward < 1.0
    assert after.step_count == 3 and after.episode_id == meta["episode_id"]


def test_two_sessions_of_one_env_stay_isolated(server):
    async def play():
        async with GenericEnvClient(base_url=base(server)) as a, GenericEnvClient(base_url=base(server)) as b:
            ra = await a.reset(task_id="task_02")
            rb = await b.reset(task_id="task_02")
            await a.step({"type": "call_tool", "tool_name": "checkout_book",
                          "arguments": {"member_id": 2, "book_id": 3}})
            seen_a = await a.step({"type": "call_tool", "tool_name": "list_loans", "arguments": {"member_id": 2}})
            seen_b = await b.step({"type": "call_tool", "tool_name": "list_loans", "arguments": {"member_id": 2}})
            return ra, rb, seen_a, seen_b, live_episodes(server)

    ra, rb, seen_a, seen_b, live = anyio.run(play)
    assert ra.observation["episode_id"] != rb.observation["episode_id"]
    assert [loan["title"] for loan in seen_a.observation["result"]["data"]] == ["Dune"]
    assert seen_b.observation["result"]["data"] == []
    assert live >= 2  # the sessions' episodes are in the registry REST and MCP use
    deadline = time.monotonic() + 10
    while live_episodes(server) and time.monotonic() < deadline:  # closed when the sockets closed
        time.sleep(0.05)
    assert live_episodes(server) == 0


def test_malformed_steps_get_errors_and_the_episode_stays_usable(server):
    def call(name, **arguments):
        return {"type": "call_tool", "tool_name": name, "arguments": arguments}

    async def play():
        async with GenericEnvClient(base_url=base(server)) as env:
            with pytest.raises(RuntimeError, match="send a reset first"):
                await env.step(call("get_member", email="x@example.com"))
            await env.reset(task_id="task_02")
            await env.step(call("checkout_book", member_id=2, book_id=3))
            errors = []
            for bad in [{"type": "jump"}, {"type": "call_tool"}, {**call("list_loans"), "arguments": [2]}]:
                with pytest.raises(RuntimeError) as caught:
                    await env.step(bad)
                errors.append(str(caught.value))
            observed = [(await env.step(c)).observation["error"] for c in [
                call("fly_to_moon"), call("checkout_book", member_id="two", book_id=3),
                call("checkout_book", member_id=2, book_id=4)]]  # the last: the tool's own error
            loans = (await env.step(call("list_loans", member_id=2))).observation["result"]["data"]
            won = await env.step(call("submit_answer", answer=GOLD_ANSWER))
            late = await env.step(call("list_loans", member_id=2))
            return errors, observed, loans, won, late

    errors, observed, loans, won, late = anyio.run(play)
    assert "unknown action type 'jump'" in errors[0] and "needs a tool_name" in errors[1]
    assert "must be a JSON object" in errors[2]
    assert [e["error_type"] for e in observed] == ["tool_not_found", "invalid_args", "execution_error"]
    assert "reserve it instead" in observed[2]["message"]
    assert [loan["title"] for loan in loans] == ["Dune"]  # nothing was lost to the bad steps
    assert won.reward == 1.0 and won.done is True
    assert late.done is True and "episode is over" in late.observation["error"]["message"]


def test_reset_picks_by_id_seed_or_the_next_of_a_split(server):
    async def play():
        async with GenericEnvClient(base_url=base(server)) as env:
            picked = [(await env.reset(split="train")).observation["task_id"] for _ in range(4)]
            seeded = [(await env.reset(seed=s)).observation["task_id"] for s in (0, 1, 4)]
            test = (await env.reset(split="test")).observation
            with pytest.raises(RuntimeError, match="no task 'task_99'"):
                await env.reset(task_id="task_99")
            with pytest.raises(RuntimeError, match="unknown split"):
                await env.reset(split="dev")
            return picked, seeded, test

    picked, seeded, test = anyio.run(play)
    train = [t.task_id for t in TASKS if t.split == "train"]
    assert sorted(set(picked)) == train and picked[3] == picked[0]  # in turn, then around again
    assert seeded == [train[0], train[1], train[4 % len(train)]]
    assert test["split"] == "test" and test["task_id"] == "task_04"


def test_mcp_over_http_sessions(server):
    async def play():
        env = MCPToolClient(base_url=base(server))
        env.use_production_mode = True  # OpenEnv's HTTP /mcp path: JSON-RPC with a session id
        try:
            tools = await env.list_tools()
            member = await env.call_tool("get_member", email="maya.patel@example.com")
            with pytest.raises(RuntimeError, match="unknown tool"):
                await env.call_tool("fly_to_moon")
            answer = await env.call_tool("submit_answer", answer="nothing done")
            live = live_episodes(server)
        finally:
            await env.close()
        return tools, member, answer, live

    tools, member, answer, live = anyio.run(play)
    assert [t.name for t in tools] == [t.name for t in TOOLS] + ["submit_answer"]
    assert member["name"] == "Maya Patel" and answer["passed"] is False and live >= 1
    assert live_episodes(server) == 0  # openenv/session/close closed it
    rpc = httpx.post(f"{base(server)}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                  "params": {"name": "get_member", "session_id": "nope"}}).json()
    assert "Unknown session_id" in rpc["error"]["message"]


def test_descriptions_unknown_envs_and_the_origin_check(server):
    assert httpx.get(f"{base(server)}/health").json() == {"status": "healthy"}
    assert httpx.get(f"{base(server)}/metadata").json()["name"] == LIBRARY
    schema = httpx.get(f"{base(server)}/schema").json()
    assert "submit_answer" in schema["action"]["oneOf"][1]["properties"]["tool_name"]["enum"]
    missing = httpx.get(f"{server.url}/openenv/atlantis/health")
    assert missing.status_code == 404 and "unknown env 'atlantis'" in missing.json()["detail"]

    async def refused():
        ws = base(server).replace("http://", "ws://") + "/ws"
        with pytest.raises(InvalidStatus) as caught:
            async with ws_connect(ws, origin="http://evil.example"):
                pass
        async with GenericEnvClient(base_url=f"{server.url}/openenv/atlantis") as env:
            with pytest.raises(RuntimeError, match="unknown env 'atlantis'"):
                await env.reset()
        return caught.value.response.status_code

    assert anyio.run(refused) == 403


def test_pip_check_is_clean_with_the_protocol_packages():
    """synth, openenv-core and TRL installed together (the dev and protocols extras)."""
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (Path(__file__).parent.parent / "examples" / "trl_grpo_openenv.py").is_file()


def test_openenv_sessions_count_against_the_servers_episode_cap(tmp_path):
    make_library_env(tmp_path / "envs")
    srv, _ = background(tmp_path, max_episodes=1)
    with srv, httpx.Client(base_url=srv.url, timeout=30) as rest:
        taken = rest.post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]

        async def play():
            async with GenericEnvClient(base_url=f"{srv.url}/openenv/{LIBRARY}") as env:
                with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                    await env.reset(task_id="task_02")
                rest.delete(f"/episodes/{taken}")
                return (await env.reset(task_id="task_02")).observation["task_id"]

        assert anyio.run(play) == "task_02"
