"""`synth serve --workers 2`: two server processes on one port, each request
answered by the process that owns its episode, whichever process the
connection landed on; the episode cap shared out; a dead process started again;
nothing left running after SIGTERM."""

from __future__ import annotations

import os
import signal
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

from envkit import make_library_env
from workerskit import LIBRARY, alive, connections_to, free_port, on_each_process, serve


@pytest.fixture(scope="module")
def env_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("workers")
    make_library_env(root / "envs")
    return root


def test_every_request_reaches_the_process_that_owns_its_episode(env_root, tmp_path):
    with serve(env_root, tmp_path / "serve.log", "--workers", "2", "--max-episodes", "6") as (proc, url):
        assert "with 2 server processes" in (tmp_path / "serve.log").read_text()
        clients = on_each_process(url)
        pids = {i: c.get("/health").json()["server"]["pid"] for i, c in clients.items()}
        assert len(set(pids.values())) == 2
        mine = {i: c.post(f"/envs/{LIBRARY}/episodes", json={"task_id": "task_02"}).json()["episode_id"]
                for i, c in clients.items()}
        assert set(mine) == {0, 1} and all(mine[i].startswith(f"p{i}-") for i in (0, 1))

        # process 0's connection works on process 1's episode and back: REST, the episode, evaluate
        for here, there in ((0, 1), (1, 0)):
            client, eid = clients[here], mine[there]
            loan = client.post(f"/episodes/{eid}/tools/checkout_book", json={"member_id": 2, "book_id": 3}).json()
            assert loan["ok"], loan
            assert client.get(f"/episodes/{eid}").json()["calls"] == 1
            assert 0 <= client.post(f"/episodes/{eid}/evaluate", json={"answer": None}).json()["reward"] <= 1
        # each episode saw only its own call
        for i in (0, 1):
            loans = clients[i].post(f"/episodes/{mine[i]}/tools/list_loans",
                                    json={"member_id": 2, "status": "active"}).json()["result"]
            assert sum(loan["book_id"] == 3 for loan in loans) == 1

        # a batch over one connection, split by owner, answered in order
        calls = [{"episode_id": mine[i % 2], "tool": "search_books", "arguments": {"query": q}}
                 for i, q in enumerate(["dune", "le guin", "dune", "nothing", "le guin"])]
        calls.insert(2, {"episode_id": "p1-unknown", "tool": "search_books", "arguments": {"query": "x"}})
        results = clients[0].post("/batch", json={"calls": calls}).json()["results"]
        assert [r["ok"] for r in results] == [True, True, False, True, True, True]
        assert results[2]["status"] == 404 and "p1-unknown" in results[2]["error"]
        assert results[0]["result"] == results[3]["result"] and results[1]["result"][0]["author"] == "Ursula K. Le Guin"

        # MCP with the official client, to the other process's episode
        async def tools(url_: str) -> list[str]:
            async with streamable_http_client(url_) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    found = await session.call_tool("search_books", {"query": "dune"})
                    assert not found.is_error and "Dune" in found.content[0].text
                    return [t.name for t in (await session.list_tools()).tools]

        assert "search_books" in anyio.run(tools, f"{url}/episodes/{mine[1]}/mcp")

        # a stream opened through process 0 on process 1's episode ends when that episode is closed
        with clients[0].stream("GET", f"/episodes/{mine[1]}/mcp",
                               headers={"accept": "text/event-stream", "mcp-protocol-version": "2025-11-25"}) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            assert clients[1].delete(f"/episodes/{mine[1]}").json()["closed"]
            started = time.monotonic()
            for _ in stream.iter_bytes():
                pass
            assert time.monotonic() - started < 10
        assert clients[0].get(f"/episodes/{mine[1]}").status_code == 404

        # the cap is shared out (3 each); five creations at once, all reaching process 0, fill both
        on_zero = connections_to(url, 0, 5)
        with ThreadPoolExecutor(5) as pool:
            answers = list(pool.map(lambda c: c.post(f"/envs/{LIBRARY}/episodes"), on_zero))
        assert [a.status_code for a in answers] == [201] * 5
        opened = [a.json()["episode_id"] for a in answers]
        assert sorted(e[:3] for e in opened) == ["p0-", "p0-", "p1-", "p1-", "p1-"]
        full = clients[0].post(f"/envs/{LIBRARY}/episodes")
        assert full.status_code == 503 and "too many live episodes" in full.json()["detail"]
        for eid in opened:
            assert clients[1].delete(f"/episodes/{eid}").status_code == 200
        for client in [*clients.values(), *on_zero]:
            client.close()
    assert proc.returncode == 0
    for pid in pids.values():
        assert not alive(pid), "a server process outlived its supervisor"


def test_a_server_process_that_dies_is_started_again(env_root, tmp_path):
    log = tmp_path / "serve.log"
    with serve(env_root, log, "--workers", "2") as (proc, url):
        clients = on_each_process(url)
        doomed = clients[1].post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]
        survivor = clients[0].post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]
        os.kill(clients[1].get("/health").json()["server"]["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 120
        while "starting it again" not in log.read_text() or "p1" not in _owners(url):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as client:
            gone = client.post(f"/episodes/{doomed}/tools/search_books", json={"query": "dune"})
            assert gone.status_code == 404 and doomed in gone.json()["detail"]
            assert client.post(f"/episodes/{survivor}/tools/search_books", json={"query": "dune"}).json()["ok"]
        for client in clients.values():
            client.close()


def _owners(url: str) -> set[str]:
    """Prefixes of episodes that new connections get opened on (both processes, once both serve)."""
    found = set()
    for _ in range(20):
        try:
            with httpx.Client(base_url=url, timeout=5) as client:
                eid = client.post(f"/envs/{LIBRARY}/episodes").json()["episode_id"]
                found.add(eid.split("-")[0])
                client.delete(f"/episodes/{eid}")
        except httpx.HTTPError:
            pass
    return found


def test_workers_must_be_positive(env_root, tmp_path):
    done = subprocess.run([sys.executable, "-m", "synth", "serve", str(env_root), "--workers", "0",
                           "--port", str(free_port())], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "error: --workers must be at least 1" in done.stderr


def test_ctrl_c_in_a_terminal_stops_every_server_process(env_root):
    import pty
    import select

    pid, fd = pty.fork()
    if pid == 0:  # the child: `synth serve --workers 2` on a terminal
        os.execvp(sys.executable, [sys.executable, "-m", "synth", "serve", str(env_root), "--port", str(free_port()),
                                   "--workers", "2"])
    out, deadline, status = b"", time.monotonic() + 120, None
    try:
        while b"serving" not in out:
            assert time.monotonic() < deadline, out
            if select.select([fd], [], [], 0.5)[0]:
                out += os.read(fd, 4096)
        children = [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                   text=True).stdout.split()]
        assert len(children) == 2
        os.write(fd, b"\x03")  # Ctrl-C reaches the supervisor; it stops its processes gracefully
        _, status = os.waitpid(pid, 0)
    finally:
        if status is None:  # the test failed first: stop the server all the same
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    time.sleep(0.5)
    assert not [c for c in children if alive(c)]
