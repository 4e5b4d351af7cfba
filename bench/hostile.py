"""How an honest env of one `synth serve` server answers while another env of the same server
attacks it with big replies (issue 22):

    python bench/hostile.py [--seconds 3]

One server (REST on 127.0.0.1, the sandbox's Python layers off so the hostile env's code can
write to its reply pipe as an escaped worker would) serves the library test env and a hostile
env. For each phase, a client calls the library env's get_member in a loop and records each
call's latency; the phases are:
  - baseline: nothing else runs;
  - 400,000 checks: the hostile env's verifier returns 400,000 checks, evaluated again and again;
  - 1 GiB replies: a hostile tool announces a 1 GiB reply and streams into its pipe, again and
    again (each time its worker is killed unread and a new one started).
Prints p50 / p99 / max latency per phase and each as a ratio to the baseline measured in the
same run, the attacks' own latency, and the growth of this process's peak memory. Each phase
stops itself after --seconds.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import httpx  # noqa: E402
from attackkit import tiny_env  # noqa: E402
from envkit import library_draft  # noqa: E402
from hostilekit import STREAM  # noqa: E402

from synth.folder.format import write_env  # noqa: E402
from synth.runtime import SandboxPool  # noqa: E402
from synth.use.server.app import create_app, load_envs  # noqa: E402
from synth.use.server.run import BackgroundServer  # noqa: E402

MANY_CHECKS = "return [check(f'c{i}', True) for i in range(400000)]"


def honest_latencies(url: str, episode: str, stop: threading.Event, out: list[float]) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        while not stop.is_set():
            start = time.perf_counter()
            reply = client.post(f"/episodes/{episode}/tools/get_member", json={"email": "maya.patel@example.com"})
            out.append(time.perf_counter() - start)
            assert reply.json()["ok"], reply.text


def phase(url: str, honest: str, seconds: float, attack=None) -> tuple[list[float], list[float]]:
    """Honest call latencies while `attack()` runs again and again (or nothing), and the attack's own."""
    stop, honest_times, attack_times = threading.Event(), [], []
    thread = threading.Thread(target=honest_latencies, args=(url, honest, stop, honest_times))
    thread.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if attack is None:
            time.sleep(0.05)
            continue
        start = time.perf_counter()
        attack()
        attack_times.append(time.perf_counter() - start)
    stop.set()
    thread.join()
    return honest_times, attack_times


def figures(times: list[float]) -> tuple[float, float, float]:
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], ordered[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "envs"
        tiny_env(root, "hostile", {"stream": STREAM, "echo": "return 'ok'"}, verifier=MANY_CHECKS)
        write_env(library_draft(), root / "city_library")
        pool = SandboxPool(workers=2, call_timeout=30.0, ast_check=False, restricted=False, audit=False)
        loaded = load_envs(root, pool=pool)
        app = create_app(loaded, on_shutdown=lambda: ([e.close() for e in loaded.envs.values()], pool.close()))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        with BackgroundServer(app) as srv, httpx.Client(base_url=srv.url, timeout=60) as client:
            honest = client.post("/envs/city_library/episodes", json={}).json()["episode_id"]
            hostile = client.post("/envs/hostile/episodes", json={"task_id": "task_01"}).json()["episode_id"]
            episode = [hostile]

            def many_checks() -> None:
                reply = client.post(f"/episodes/{episode[0]}/evaluate", json={"answer": "x"}).json()
                assert "at most 200 checks" in (reply["error"] or ""), reply

            def big_reply() -> None:
                reply = client.post(f"/episodes/{episode[0]}/tools/stream", json={}).json()
                assert "announced a reply of 1,073,741,824 bytes" in reply["error"], reply
                episode[0] = client.post("/envs/hostile/episodes", json={}).json()["episode_id"]

            phase(srv.url, honest, 0.5)  # warm-up
            results = {"baseline": phase(srv.url, honest, args.seconds),
                       "400,000 checks": phase(srv.url, honest, args.seconds, many_checks),
                       "1 GiB replies": phase(srv.url, honest, args.seconds, big_reply)}
        growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024
    base = figures(results["baseline"][0])
    print(f"honest env's get_member on the same server ({args.seconds:g} s per phase):")
    for label, (times, attacks) in results.items():
        p50, p99, worst = figures(times)
        note = f"   attack: {len(attacks)} x, p50 {figures(attacks)[0] * 1e3:.0f} ms" if attacks else ""
        print(f"  {label:15s} {len(times):5d} calls  p50 {p50 * 1e3:6.2f} ms ({p50 / base[0]:4.2f}x)  "
              f"p99 {p99 * 1e3:7.2f} ms ({p99 / base[1]:4.2f}x)  max {worst * 1e3:7.1f} ms{note}")
    print(f"peak memory of this process grew by {growth:.1f} MB while the 1 GiB replies were refused")


if __name__ == "__main__":
    main()
