"""`synth serve --workers N` as the tests start it: a real `synth serve` subprocess on a free
port, and kept-alive clients whose connections landed on a chosen server process (the
kernel picks the process per connection)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

LIBRARY = "city_library"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


@contextmanager
def serve(root: Path, log: Path, *args: str):
    port = free_port()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "synth", "serve", str(root), "--port", str(port), *args],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while "serving" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


def on_each_process(url: str, count: int = 2) -> dict[int, httpx.Client]:
    """A kept-alive client per server process (new connections until each process holds one)."""
    clients: dict[int, httpx.Client] = {}
    for _ in range(200):
        client = httpx.Client(base_url=url, timeout=30)
        index = client.get("/health").json()["server"]["process"]
        if index in clients:
            client.close()
        else:
            clients[index] = client
        if len(clients) == count:
            return clients
    raise AssertionError(f"connections reached only processes {sorted(clients)}")


def connections_to(url: str, index: int, count: int) -> list[httpx.Client]:
    """`count` kept-alive clients whose connections landed on process `index`."""
    found: list[httpx.Client] = []
    for _ in range(400):
        client = httpx.Client(base_url=url, timeout=30)
        if client.get("/health").json()["server"]["process"] == index:
            found.append(client)
            if len(found) == count:
                return found
        else:
            client.close()
    raise AssertionError(f"only {len(found)} connections reached process {index}")


async def async_on_each_process(url: str, count: int = 2) -> dict[int, httpx.AsyncClient]:
    """on_each_process for async clients (what openenv-core's clients use)."""
    clients: dict[int, httpx.AsyncClient] = {}
    for _ in range(200):
        client = httpx.AsyncClient(base_url=url, timeout=30)
        index = (await client.get("/health")).json()["server"]["process"]
        if index in clients:
            await client.aclose()
        else:
            clients[index] = client
        if len(clients) == count:
            return clients
    raise AssertionError(f"connections reached only processes {sorted(clients)}")


def live_on(client: httpx.Client) -> int:
    """Live episodes of the process this client's connection reached."""
    return client.get("/health").json()["episodes"]["live"]
