"""The protocol faces under `synth serve --workers 2`: an OpenEnv HTTP MCP session (named by
params.session_id, the episode id) and an ORS session (named by the client's X-Session-ID)
are answered by the process that holds them, whichever process a request's connection
reached; an OpenEnv WebSocket session lives on its connection's process."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import httpx
import pytest
from openenv.core import GenericEnvClient, MCPToolClient
from openenv.core.env_server.mcp_types import CallToolAction

from envkit import make_library_env
from workerskit import LIBRARY, async_on_each_process, live_on, on_each_process, serve

GOLD_ANSWER = "Dune is checked out to you."


@pytest.fixture(scope="module")
def env_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faces")
    make_library_env(root / "envs")
    return root


def rpc(client: httpx.Client, method: str, **params) -> dict:
    return client.post(f"/openenv/{LIBRARY}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                        "params": params}).json()


async def moved_mid_session(url: str, here: int, there: int, clients: dict[int, httpx.Client]) -> dict:
    """openenv-core's MCPToolClient on its HTTP path: its session opened through process `here`,
    then its connection moved to process `there` (as after a reconnect)."""
    pinned = await async_on_each_process(url)
    env = MCPToolClient(base_url=f"{url}/openenv/{LIBRARY}")
    env.use_production_mode = True
    env._http_client = pinned[here]  # the client's own connection, pinned to a process
    seen: dict = {}
    try:
        seen["member"] = await env.call_tool("get_member", email="maya.patel@example.com")
        seen["sid"] = env._production_session_id
        env._http_client = pinned[there]
        seen["loan"] = await env.call_tool("checkout_book", member_id=2, book_id=3)
        seen["tools"] = [t.name for t in await env.list_tools(use_cache=False)]
        with pytest.raises(RuntimeError, match="unknown tool"):
            await env.call_tool("fly_to_moon")
        seen["answer"] = await env.call_tool("submit_answer", answer=GOLD_ANSWER)
        seen["live"] = [live_on(clients[0]), live_on(clients[1])]
    finally:
        await env.close()  # openenv/session/close through process `there`; closes its client too
        await pinned[here].aclose()
    seen["after"] = [live_on(clients[0]), live_on(clients[1])]
    return seen


async def websocket_session(url: str, clients: dict[int, httpx.Client]) -> tuple[str, float, bool]:
    """A WebSocket session lives on its connection's process: its steps need no routing, and its
    episode is reachable over REST through either process."""
    async with GenericEnvClient(base_url=f"{url}/openenv/{LIBRARY}") as env:
        opened = await env.reset(task_id="task_02")
        await env.step(CallToolAction(tool_name="checkout_book", arguments={"member_id": 2, "book_id": 3}))
        done = await env.step(CallToolAction(tool_name="submit_answer", arguments={"answer": GOLD_ANSWER}))
        episode = opened.observation["episode_id"]
        reachable = all(c.get(f"/episodes/{episode}").status_code == 200 for c in clients.values())
        return episode, done.reward, reachable


def test_openenv_sessions_over_http_and_websocket(env_root, tmp_path):
    with serve(env_root, tmp_path / "serve.log", "--workers", "2", "--max-episodes", "2") as (_, url):
        clients = on_each_process(url)
        try:
            for here, there in ((0, 1), (1, 0)):
                seen = anyio.run(moved_mid_session, url, here, there, clients)
                assert seen["sid"].startswith(f"p{here}-")  # opened where the connection was
                assert seen["member"]["name"] == "Maya Patel" and seen["loan"]["book_id"] == 3
                assert "submit_answer" in seen["tools"]
                assert "reward" in seen["answer"] and 0 <= seen["answer"]["reward"] <= 1
                assert seen["live"][here] == 1 and seen["live"][there] == 0
                assert seen["after"] == [0, 0]

            # --max-episodes 2 is one each: a creation where there is no room opens on the other process
            first = rpc(clients[0], "openenv/session/create", task_id="task_02")["result"]["session_id"]
            second = rpc(clients[0], "openenv/session/create", task_id="task_02")["result"]["session_id"]
            assert first.startswith("p0-") and second.startswith("p1-")
            full = rpc(clients[1], "openenv/session/create")
            assert full["error"]["code"] == -32000 and full["error"]["data"]["code"] == "CAPACITY_REACHED"
            assert "too many live episodes" in full["error"]["message"]
            # each session sees only its own calls, asked through either process
            rpc(clients[1], "tools/call", session_id=first, name="checkout_book",
                arguments={"member_id": 2, "book_id": 3})
            for sid, books in ((first, [3]), (second, [])):
                for client in clients.values():
                    loans = rpc(client, "tools/call", session_id=sid, name="list_loans",
                                arguments={"member_id": 2, "status": "active"})["result"]["data"]
                    assert [loan["book_id"] for loan in loans if loan["book_id"] == 3] == books
            assert "submit_answer" in [t["name"] for t in rpc(clients[1], "tools/list", session_id=first)["result"]["tools"]]
            unknown = rpc(clients[0], "tools/call", session_id="p1-nope", name="list_loans", arguments={})
            assert "Unknown session_id: p1-nope" in unknown["error"]["message"]
            for sid, client in ((first, clients[1]), (second, clients[0])):
                assert rpc(client, "openenv/session/close", session_id=sid)["result"]["closed"] is True
            assert live_on(clients[0]) == live_on(clients[1]) == 0

            episode, reward, reachable = anyio.run(websocket_session, url, clients)
            assert episode[:3] in ("p0-", "p1-") and reward == 1.0 and reachable
            deadline = time.monotonic() + 30  # the socket's end closes its episode, just after the client returns
            while live_on(clients[0]) + live_on(clients[1]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert live_on(clients[0]) == live_on(clients[1]) == 0
        finally:
            for client in clients.values():
                client.close()


def sse_end(response: httpx.Response) -> dict:
    data = [line.split(":", 1)[1].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


def test_ors_sessions_reach_the_process_their_id_picks(env_root, tmp_path):
    with serve(env_root, tmp_path / "serve.log", "--workers", "2") as (_, url):
        clients = on_each_process(url)
        try:
            sids = [f"trainer-session-{i}" for i in range(8)]
            for i, sid in enumerate(sids):  # created through one process, used through the other
                here, there = clients[i % 2], clients[1 - i % 2]
                created = here.post("/create", headers={"X-Session-ID": sid, "X-Deployment": LIBRARY},
                                    json={"task_spec": {"task_id": "task_02"}})
                assert created.status_code == 200, created.text
                again = there.post("/create", headers={"X-Session-ID": sid, "X-Deployment": LIBRARY},
                                   json={"task_spec": {"task_id": "task_02"}})
                assert again.status_code == 400 and "already exists" in again.json()["detail"]
                assert there.post("/ping", headers={"X-Session-ID": sid}).json() == {"status": "ok"}
                prompt = there.get(f"/{LIBRARY}/prompt", headers={"X-Session-ID": sid}).json()
                assert prompt[0]["text"].startswith("This is Maya Patel")
                assert [m["role"] for m in there.get("/messages", headers={"X-Session-ID": sid,
                                                                          "X-Deployment": LIBRARY}).json()] == [
                    "system", "user"]
            held = [live_on(clients[0]), live_on(clients[1])]
            assert sum(held) == len(sids) and min(held) >= 1  # the ids spread the sessions over both

            def call(client: httpx.Client, sid: str, name: str, arguments: dict) -> dict:
                return sse_end(client.post(f"/{LIBRARY}/call", headers={"X-Session-ID": sid},
                                           json={"name": name, "input": arguments}))

            gold, other = sids[0], sids[1]
            assert call(clients[1], gold, "get_member", {"email": "maya.patel@example.com"})["ok"]
            assert call(clients[0], gold, "checkout_book", {"member_id": 2, "book_id": 3})["output"]["finished"] is False
            for client in clients.values():  # the other session of the same task has its own database
                loans = call(client, other, "list_loans", {"member_id": 2, "status": "active"})
                assert 3 not in [loan["book_id"] for loan in json.loads(loans["output"]["blocks"][0]["text"])]
            assert call(clients[0], gold, "fly", {})["reason"] == "not_found"
            done = call(clients[1], gold, "submit_answer", {"answer": GOLD_ANSWER})
            assert done["output"]["reward"] == 1.0 and done["output"]["finished"] is True
            assert call(clients[0], gold, "list_loans", {"member_id": 2})["reason"] == "episode_finished"
            for i, sid in enumerate(sids):
                clients[i % 2].post("/delete", headers={"X-Session-ID": sid})
                assert clients[1 - i % 2].post("/ping", headers={"X-Session-ID": sid}).status_code == 404
            assert live_on(clients[0]) == live_on(clients[1]) == 0
            # routes that name no session are answered by whichever process gets them
            assert [c.get(f"/{LIBRARY}/tools").status_code for c in clients.values()] == [200, 200]
        finally:
            for client in clients.values():
                client.close()
