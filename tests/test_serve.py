"""`synth serve`: the REST surface, MCP per episode with the official client,
isolation between episodes, idle expiry and the live-episode cap."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from envkit import TOOLS, make_library_env
from synth.use.server import background

LIBRARY = "city_library"


@pytest.fixture(scope="module")
def env_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    make_library_env(root / "envs")
    broken = root / "envs" / "broken_env"
    broken.mkdir()
    (broken / "env.json").write_text("{not json")
    return root


@pytest.fixture(scope="module")
def server(env_root: Path):
    srv, loaded = background(env_root)
    assert list(loaded.envs) == [LIBRARY]
    with srv:
        yield srv


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def new_episode(client: httpx.Client, task_id: str | None = None) -> dict:
    response = client.post(f"/envs/{LIBRARY}/episodes", json={"task_id": task_id} if task_id else None)
    assert response.status_code == 201, response.text
    return response.json()


def test_envs_lists_envs_tasks_and_skipped_folders(client):
    body = client.get("/envs").json()
    (env,) = body["envs"]
    assert env["env_id"] == LIBRARY and env["tools"] == [t.name for t in TOOLS]
    assert [t["task_id"] for t in env["tasks"]] == ["task_01", "task_02", "task_03", "task_04"]
    assert env["tasks"][1]["instruction"].startswith("This is Maya Patel")
    assert [s["path"].endswith("broken_env") for s in body["skipped"]] == [True]
    detail = client.get(f"/envs/{LIBRARY}").json()
    assert detail["tools"][0]["function"]["parameters"] == TOOLS[0].parameters
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/envs", "/envs/{env_id}/episodes", "/episodes/{episode_id}/tools/{name}",
            "/episodes/{episode_id}/evaluate", "/episodes/{episode_id}"} <= set(paths)


def test_rest_episode_lifecycle(client, server):
    created = new_episode(client, "task_02")
    eid = created["episode_id"]
    assert created["task_id"] == "task_02" and created["instruction"].startswith("This is Maya")
    assert [t["function"]["name"] for t in created["tools"]] == [t.name for t in TOOLS]
    assert created["mcp_url"] == f"{server.url}/episodes/{eid}/mcp"

    before = client.post(f"/episodes/{eid}/evaluate", json={"answer": None}).json()
    assert before["reward"] < 1.0 and not before["passed"]

    member = client.post(f"/episodes/{eid}/tools/get_member", json={"email": "maya.patel@example.com"}).json()
    assert member == {"ok": True, "result": {"member_id": 2, "name": "Maya Patel", "email": "maya.patel@example.com",
                                             "tier": "standard", "max_loans": 3, "active_loans": 0}}
    loan = client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2, "book_id": 3}).json()
    assert loan["ok"] and loan["result"]["title"] == "Dune"

    reward = client.post(f"/episodes/{eid}/evaluate", json={"answer": "Dune is checked out to you."}).json()
    assert reward["reward"] == 1.0 and reward["passed"] and reward["error"] is None
    assert [c["name"] for c in reward["checks"]] == ["exactly_one_new_loan", "loan_is_maya_dune",
                                                     "loan_period_14_days", "only_dune_copies_changed",
                                                     "nothing_else_changed", "answer_reports_the_loan",
                                                     "all requirements met"]
    assert reward["checks"][1] == {"name": "loan_is_maya_dune", "passed": True, "weight": 2.0}

    assert client.delete(f"/episodes/{eid}").json()["closed"] is True
    gone = client.post(f"/episodes/{eid}/tools/get_member", json={"email": "x"})
    assert gone.status_code == 404 and "closed" in gone.json()["detail"]


def test_bad_requests_get_error_observations_or_clear_404s(client):
    eid = new_episode(client)["episode_id"]
    observations = [
        client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2}),  # missing argument
        client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": "two", "book_id": 3}),
        client.post(f"/episodes/{eid}/tools/checkout_book", content=b"{not json"),
        client.post(f"/episodes/{eid}/tools/checkout_book", json=[1, 2]),
        client.post(f"/episodes/{eid}/tools/fly_to_moon", json={}),
        client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2, "book_id": 4}),  # ToolError
    ]
    assert [r.status_code for r in observations] == [200] * 6
    errors = [r.json() for r in observations]
    assert all(e["ok"] is False for e in errors)
    assert "book_id" in errors[0]["error"] and "JSON" in errors[2]["error"] and "object" in errors[3]["error"]
    assert "unknown tool 'fly_to_moon'" in errors[4]["error"] and "reserve it instead" in errors[5]["error"]

    no_env = client.post("/envs/atlantis/episodes")
    assert no_env.status_code == 404 and "unknown env 'atlantis'" in no_env.json()["detail"]
    no_task = client.post(f"/envs/{LIBRARY}/episodes", json={"task_id": "task_99"})
    assert no_task.status_code == 404 and "task_99" in no_task.json()["detail"]
    for response in (client.post("/episodes/nope/tools/get_member", json={}), client.get("/episodes/nope"),
                     client.post("/episodes/nope/evaluate"), client.delete("/episodes/nope"),
                     client.post("/episodes/nope/mcp", json={})):
        assert response.status_code == 404 and "unknown episode 'nope'" in response.json()["detail"]
    client.delete(f"/episodes/{eid}")


async def mcp_session_run(url: str, steps):
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)


def test_mcp_per_episode_tools_and_isolation(client):
    first, second = new_episode(client, "task_04"), new_episode(client, "task_04")

    async def write_then_read(session):
        tools = (await session.list_tools()).tools
        reserved = await session.call_tool("reserve_book", {"member_id": 1, "book_id": 4})
        bad = await session.call_tool("reserve_book", {"member_id": 1})
        search = await session.call_tool("search_books", {"query": "Hound"})
        return tools, reserved, bad, search

    tools, reserved, bad, search = anyio.run(mcp_session_run, first["mcp_url"], write_then_read)
    assert [t.name for t in tools] == [t.name for t in TOOLS]
    assert {t.name: t.input_schema for t in tools} == {t.name: t.parameters for t in TOOLS}
    assert {t.name: t.annotations.read_only_hint for t in tools} == {t.name: t.read_only for t in TOOLS}
    assert not reserved.is_error and json.loads(reserved.content[0].text)["queue_position"] == 1
    assert bad.is_error and "book_id" in bad.content[0].text
    assert not search.is_error and json.loads(search.content[0].text)[0]["title"] == "The Hound of the Baskervilles"

    async def queue_position(session):
        listed = await session.call_tool("reserve_book", {"member_id": 2, "book_id": 4})
        return json.loads(listed.content[0].text)["queue_position"]

    # the first episode has Ana's reservation; the second never saw it
    assert anyio.run(mcp_session_run, first["mcp_url"], queue_position) == 2
    assert anyio.run(mcp_session_run, second["mcp_url"], queue_position) == 1

    # the MCP writes are what REST evaluation sees
    graded = client.post(f"/episodes/{first['episode_id']}/evaluate", json={"answer": "Reserved."}).json()
    assert [c["passed"] for c in graded["checks"]][:2] == [False, False]  # two new reservations, not one
    fresh = new_episode(client, "task_04")
    anyio.run(mcp_session_run, fresh["mcp_url"],
              lambda s: s.call_tool("reserve_book", {"member_id": 1, "book_id": 4}))
    assert client.post(f"/episodes/{fresh['episode_id']}/evaluate", json={}).json()["reward"] == 1.0
    for ep in (first, second, fresh):
        client.delete(f"/episodes/{ep['episode_id']}")


def test_concurrent_episodes_stay_isolated(client):
    episodes = [new_episode(client)["episode_id"] for _ in range(6)]

    def play(eid: str) -> list:
        with httpx.Client(base_url=str(client.base_url), timeout=30) as c:
            c.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2, "book_id": 3})
            return c.post(f"/episodes/{eid}/tools/list_loans", json={"member_id": 2}).json()["result"]

    with ThreadPoolExecutor(6) as pool:
        loans = list(pool.map(play, episodes))
    assert all([loan["book_id"] for loan in ls] == [3] for ls in loans)
    for eid in episodes:
        client.delete(f"/episodes/{eid}")


def test_idle_expiry_and_cap(env_root: Path):
    # The cap on a server whose episodes cannot expire mid-test: with a short idle timeout, a loaded
    # machine could take longer than it between two requests and free a slot the test counts on.
    srv, _ = background(env_root, max_episodes=2, idle_timeout=300)
    with srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        a = c.post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]
        c.post(f"/envs/{LIBRARY}/episodes").raise_for_status()
        full = c.post(f"/envs/{LIBRARY}/episodes")
        assert full.status_code == 503
        assert "cap is 2" in full.json()["detail"] and "DELETE" in full.json()["detail"]
        c.delete(f"/episodes/{a}")
        assert c.post(f"/envs/{LIBRARY}/episodes").status_code == 201

    # Expiry on a server with a short idle timeout: every episode goes, however long each step took.
    srv, _ = background(env_root, max_episodes=2, idle_timeout=0.3, reap_interval=0.05)
    with srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        b = c.post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]
        c.post(f"/envs/{LIBRARY}/episodes").raise_for_status()
        deadline = time.monotonic() + 30
        while c.get("/health").json()["episodes"]["live"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.get("/health").json()["episodes"]["live"] == 0
        gone = c.post(f"/episodes/{b}/tools/get_member", json={"email": "x"})
        assert gone.status_code == 404 and "expired after 0.3s" in gone.json()["detail"]
        assert c.post(f"/envs/{LIBRARY}/episodes").status_code == 201  # both slots are free again


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve_subprocess(env_root: Path, tmp_path: Path):
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "synth", "serve", str(env_root), "--port", str(port),
                                 "--max-episodes", "4"], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        eid = httpx.post(f"{url}/envs/{LIBRARY}/episodes").json()["episode_id"]
        assert httpx.post(f"{url}/episodes/{eid}/tools/search_books", json={"query": "Dune"}).json()["ok"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    assert "skipped" in text and "broken_env" in text
    assert f"serving 1 env(s) (city_library) on http://127.0.0.1:{port}" in text


def test_serve_with_no_servable_env_is_a_clear_error(tmp_path: Path):
    from typer.testing import CliRunner

    from synth.cli import app

    result = CliRunner().invoke(app, ["serve", str(tmp_path)])
    assert result.exit_code != 0
    assert "no env folders" in str(result.exception) or "no env folders" in result.output


def test_an_idle_keep_alive_connection_outlives_a_trainers_pause_between_steps(server):
    """A trainer's connection idles while the policy generates (seconds); uvicorn's default keep-alive
    (5 s) closed it under the client, and a request sent as it closed got a reset (the K = 256 load test
    on a loaded machine). The same socket still answers after 6 idle seconds."""
    host, port = server.url.removeprefix("http://").split(":")
    request = f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        for pause in (0, 6):
            time.sleep(pause)
            sock.sendall(request)
            reply = sock.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200"), (pause, reply[:200])
