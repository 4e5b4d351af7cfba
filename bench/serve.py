"""Benchmark `synth serve` on loopback: episode creations/s, and tool calls/s with
p50/p99 latency over REST and over MCP, with K concurrent episodes.

    python bench/serve.py [--envs DIR] [--episodes K] [--calls N] [--time-limit S]

It starts its own server (`python -m synth serve`) on 127.0.0.1 in a child
process, so the load generator does not share the server's GIL, and stops it at
the end. Without --envs it serves the hand-written City Library test env. Each
episode replays the gold tool calls of one task over and over. Every phase is
bounded by a call count and by --time-limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def library_env(folder: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from envkit import make_library_env

    make_library_env(folder / "envs")
    return folder


class Server:
    def __init__(self, envs: Path, args: list[str]):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "synth", "serve", str(envs), "--port", str(self.port),
                                      *args], stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise SystemExit(f"server exited: {self.log.read().decode(errors='replace')[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise SystemExit("server did not become ready")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


def summarize(name: str, latencies: list[float], wall: float, errors: int) -> dict:
    lat = sorted(latencies)
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: float("nan"))
    return {"phase": name, "ops": len(lat), "errors": errors, "seconds": round(wall, 3),
            "ops_per_s": round(len(lat) / wall, 1) if wall else 0.0, "p50_ms": round(p(0.50), 2),
            "p99_ms": round(p(0.99), 2), "mean_ms": round(statistics.fmean(lat) * 1000, 2) if lat else float("nan")}


async def bench_creations(url: str, env_id: str, task_id: str, k: int, total: int, limit: float) -> dict:
    latencies, errors, ids = [], 0, []
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=k)) as http:
        async def worker(n: int) -> None:
            nonlocal errors
            for _ in range(n):
                if time.monotonic() > deadline:
                    return
                t = time.perf_counter()
                r = await http.post(f"/envs/{env_id}/episodes", json={"task_id": task_id})
                latencies.append(time.perf_counter() - t)
                if r.status_code == 201:
                    ids.append(r.json()["episode_id"])
                else:
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker(total // k) for _ in range(k)))
        wall = time.perf_counter() - start
        for eid in ids:  # not timed
            await http.delete(f"/episodes/{eid}")
    return summarize(f"episode creations (K={k} clients)", latencies, wall, errors)


async def bench_rest(url: str, env_id: str, task_id: str, calls: list, k: int, n: int, limit: float) -> dict:
    latencies, errors = [], 0
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=httpx.Limits(max_connections=k)) as http:
        episodes = [(await http.post(f"/envs/{env_id}/episodes", json={"task_id": task_id})).json()["episode_id"]
                    for _ in range(k)]

        async def worker(eid: str) -> None:
            nonlocal errors
            for i in range(n):
                if time.monotonic() > deadline:
                    return
                tool, arguments = calls[i % len(calls)]
                t = time.perf_counter()
                r = await http.post(f"/episodes/{eid}/tools/{tool}", json=arguments)
                latencies.append(time.perf_counter() - t)
                errors += r.status_code != 200

        start = time.perf_counter()
        await asyncio.gather(*(worker(e) for e in episodes))
        wall = time.perf_counter() - start
        for eid in episodes:
            await http.delete(f"/episodes/{eid}")
    return summarize(f"REST tool calls (K={k})", latencies, wall, errors)


async def bench_mcp(url: str, env_id: str, task_id: str, calls: list, k: int, n: int, limit: float) -> dict:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    latencies, errors = [], 0
    deadline = time.monotonic() + limit
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        episodes = [(await http.post(f"/envs/{env_id}/episodes", json={"task_id": task_id})).json()
                    for _ in range(k)]
        ready = asyncio.Barrier(k + 1)
        finished = []

        async def worker(episode: dict) -> None:
            nonlocal errors
            async with streamable_http_client(episode["mcp_url"]) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await ready.wait()
                    for i in range(n):
                        if time.monotonic() > deadline:
                            break
                        tool, arguments = calls[i % len(calls)]
                        t = time.perf_counter()
                        try:
                            await session.call_tool(tool, arguments)  # a tool error is a valid answer
                        except Exception:  # noqa: BLE001 - counted, the run goes on
                            errors += 1
                            continue
                        latencies.append(time.perf_counter() - t)
            finished.append(time.perf_counter())

        tasks = [asyncio.create_task(worker(e)) for e in episodes]
        await ready.wait()
        start = time.perf_counter()
        await asyncio.gather(*tasks)
        wall = max(finished) - start
        for e in episodes:
            await http.delete(f"/episodes/{e['episode_id']}")
    return summarize(f"MCP tool calls (K={k})", latencies, wall, errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", type=Path, help="folder of env folders (default: the City Library test env)")
    parser.add_argument("--episodes", "-k", type=int, default=16, help="concurrent episodes")
    parser.add_argument("--calls", "-n", type=int, default=100, help="tool calls per episode and phase")
    parser.add_argument("--creations", type=int, default=400, help="episodes created in the creation phase")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per phase at most")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers of the server")
    parser.add_argument("--trusted", action="store_true", help="serve env code in-process (no sandbox)")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        envs = args.envs or library_env(Path(tmp))
        extra = ["--max-episodes", str(args.creations + 2 * args.episodes)]
        if args.workers:
            extra += ["--workers", str(args.workers)]
        if args.trusted:
            extra.append("--trusted")
        server = Server(envs, extra)
        try:
            server.wait_ready()
            listing = httpx.get(f"{server.url}/envs").json()["envs"]
            env = listing[0]
            detail = httpx.get(f"{server.url}/envs/{env['env_id']}").json()
            task_id = detail["tasks"][0]["task_id"]
            gold = _gold_calls(envs, env["env_id"])
            results = [
                asyncio.run(bench_creations(server.url, env["env_id"], task_id, args.episodes, args.creations,
                                            args.time_limit)),
                asyncio.run(bench_rest(server.url, env["env_id"], task_id, gold, args.episodes, args.calls,
                                       args.time_limit)),
                asyncio.run(bench_mcp(server.url, env["env_id"], task_id, gold, args.episodes, args.calls,
                                      args.time_limit)),
            ]
        finally:
            server.stop()
    mode = "in-process (trusted)" if args.trusted else "sandboxed"
    print(f"synth serve on loopback, env {env['env_id']}, {mode}, {os.cpu_count()} CPU(s), "
          f"calls cycle {[c[0] for c in gold]}")
    for r in results:
        if args.json:
            print(json.dumps(r))
        else:
            print(f"  {r['phase']:<34} {r['ops']:>6} ops {r['ops_per_s']:>8.1f}/s  p50 {r['p50_ms']:>7.2f} ms  "
                  f"p99 {r['p99_ms']:>7.2f} ms  errors {r['errors']}")


def _gold_calls(envs: Path, env_id: str) -> list:
    """The first task's gold calls with gold actions (read-only first), to replay."""
    from synth.folder.dirs import find_env_dirs

    for folder in find_env_dirs(envs):
        if folder.name == env_id or json.loads((folder / "env.json").read_text())["id"] == env_id:
            tools = {t["name"]: t["read_only"] for t in json.loads((folder / "tools.json").read_text())}
            for line in (folder / "tasks.jsonl").read_text().splitlines():
                task = json.loads(line)
                calls = [(g["tool"], g["arguments"]) for g in task.get("gold") or []]
                if calls:
                    return sorted(calls, key=lambda c: not tools.get(c[0], False))
    raise SystemExit(f"env {env_id} has no task with gold calls to replay")


if __name__ == "__main__":
    main()
