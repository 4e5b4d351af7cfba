"""A bounded loopback load test of `synth serve` (one server process, and two,
where requests cross between processes): K=256 episodes
driven at once over REST, MCP and POST /batch for SYNTH_LOAD_SECONDS (5 s in
the normal suite; the acceptance run is SYNTH_LOAD_SECONDS=30). No answer may
be a 5xx, no episode may be lost, and every episode must have counted exactly
the calls made on it. Throughput is the benchmark's business (bench/serve.py),
not this test's."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from envkit import make_library_env

K = 256
SECONDS = float(os.environ.get("SYNTH_LOAD_SECONDS", "5"))
LIBRARY = "city_library"
MCP = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}
CALLS = [("search_books", {"query": "le guin"}), ("list_loans", {"member_id": 2, "status": "all"}),
         ("get_member", {"email": "tom.becker@example.com"}), ("checkout_book", {"member_id": 2, "book_id": 3})]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def drive(url: str) -> tuple[Counter, Counter, list[str]]:
    statuses: Counter = Counter()
    made: Counter = Counter()
    limits = httpx.Limits(max_connections=128, max_keepalive_connections=128)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        async def create() -> str:
            answer = await http.post(f"/envs/{LIBRARY}/episodes", json={"task_id": "task_01"})
            statuses[answer.status_code] += 1
            return answer.json()["episode_id"]

        episodes = await asyncio.gather(*(create() for _ in range(K)))
        deadline = time.monotonic() + SECONDS

        async def agent(eid: str, n: int) -> None:
            rng = random.Random(n)
            while time.monotonic() < deadline:
                tool, arguments = rng.choice(CALLS)
                if rng.random() < 0.5:
                    answer = await http.post(f"/episodes/{eid}/tools/{tool}", json=arguments)
                    ok = answer.status_code == 200 and "ok" in answer.json()
                else:
                    answer = await http.post(f"/episodes/{eid}/mcp", headers=MCP, json={
                        "jsonrpc": "2.0", "id": n, "method": "tools/call",
                        "params": {"name": tool, "arguments": arguments}})
                    ok = answer.status_code == 200 and "content" in answer.json()["result"]
                statuses[answer.status_code] += 1
                if ok:
                    made[eid] += 1

        async def trainer() -> None:
            while time.monotonic() < deadline:
                answer = await http.post("/batch", json={"calls": [
                    {"episode_id": eid, "tool": "search_books", "arguments": {"query": "dune"}} for eid in episodes]})
                statuses[answer.status_code] += 1
                if answer.status_code == 200:
                    for eid, result in zip(episodes, answer.json()["results"]):
                        statuses[result.get("status", 200)] += 1
                        made[eid] += "status" not in result

        await asyncio.gather(trainer(), *(agent(eid, n) for n, eid in enumerate(episodes)))
        counted = Counter()
        for eid in episodes:
            answer = await http.get(f"/episodes/{eid}")
            statuses[answer.status_code] += 1
            counted[eid] = answer.json().get("calls", -1)
        for eid in episodes:
            statuses[(await http.delete(f"/episodes/{eid}")).status_code] += 1
    assert counted == made, "an episode counted other calls than were made on it"
    return statuses, made, episodes


@pytest.mark.parametrize("workers", [1, 2])
def test_256_episodes_under_load_lose_nothing_and_get_no_5xx(tmp_path: Path, workers: int):
    root = tmp_path / "envs"
    make_library_env(root)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "synth", "serve", str(root), "--port", str(port),
                                 "--workers", str(workers), "--max-episodes", str(K + 16)],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "serving" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        statuses, made, episodes = asyncio.run(asyncio.wait_for(drive(f"http://127.0.0.1:{port}"), SECONDS + 240))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert set(statuses) <= {200, 201}, (statuses, log.read_text()[-3000:])
    assert len(made) == K and min(made.values()) > 0  # every episode was served
    assert "Traceback" not in log.read_text()
