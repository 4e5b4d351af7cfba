"""`synth run --executor ray` on a local Ray instance started by this module, with the fake model server.

One Ray instance serves every test here (it takes seconds to start); each test runs `synth run` as a
subprocess that joins it with `--ray-address`, as a user joins a cluster, so a worker or the driver
can be killed for real. Ray listens on 127.0.0.1 only: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it
take the loopback address as its node address (and bind there), and the fixture checks it did.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from fake_server import FakeModelServer
from test_run import DEMO_RECORDINGS, ENV_IDS, body_key, run_args, synth_env, verified_envs, with_ping

from synth.llm.replay import load_recordings
from synth.llm.script import Reply, RequestInfo, Rule, Script

if importlib.util.find_spec("ray") is None:
    pytest.skip('Ray is not installed (pip install -e ".[dev]" installs it)', allow_module_level=True)

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # single-node mode: the loopback address, nothing else
           "RAY_AUTH_MODE": "disabled"}  # no token written to ~/.ray for a cluster only this machine can reach
BUILD_STAGES = {"tasks", "schema", "data", "data_fix", "tool_spec", "tool_code", "gold", "check_tests", "check_judge",
                "check_repair"}


@pytest.fixture(scope="module")
def cluster():
    """The address of a local Ray instance with 2 CPUs (two envs at a time), shut down after the module."""
    saved = {k: os.environ.get(k) for k in RAY_ENV}
    os.environ.update(RAY_ENV)  # read when ray is first imported, and by the processes it starts
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        address = ray.get_runtime_context().gcs_address
        assert address.startswith("127.0.0.1:"), address
        yield address
    finally:
        ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ray_args(server: FakeModelServer, out: Path, address: str, *extra: str) -> list[str]:
    return run_args(server, out, "--executor", "ray", "--ray-address", address, *extra)


def ray_env() -> dict[str, str]:
    return synth_env(**RAY_ENV)


def demo_script(*rules: Rule) -> Script:
    return with_ping(Script([*rules, *load_recordings(DEMO_RECORDINGS).rules]))


def summary_of(out: Path) -> dict:
    return json.loads(next((out / "runs").glob("*/summary.json")).read_text())


def store_rows(out: Path, sql: str) -> list[sqlite3.Row]:
    db = sqlite3.connect(next((out / "runs").glob("*/run.sqlite")))
    db.row_factory = sqlite3.Row
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def task_pids(env_id: str = "") -> list[int]:
    """Ray worker processes running an env's task: Ray titles them ray::<task name>, synth's are synth:<env id>."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().startswith(f"ray::synth:{env_id}".encode()):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"synth run ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def local_envs(tmp_path_factory) -> dict[str, str]:
    """The demo's envs from the local executor: what the Ray executor must give too."""
    out = tmp_path_factory.mktemp("local") / "out"
    with FakeModelServer(demo_script()) as server:
        done = subprocess.run(run_args(server, out), env=synth_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    envs = verified_envs(out)
    assert set(envs) == ENV_IDS
    return envs


def test_the_demo_through_ray_gives_the_local_envs_and_a_rerun_asks_no_model(cluster, local_envs, tmp_path):
    out = tmp_path / "ray"
    with FakeModelServer(demo_script()) as server:
        # The key is the driver's alone (the cluster was started without one): the tasks get it from the driver.
        done = subprocess.run(ray_args(server, out, cluster), env={**ray_env(), "OPENAI_API_KEY": "sk-driver"},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        answered = [r for r in server.requests if r.status == 200 and r.stage != "ping"]
        assert {r.headers.get("authorization") for r in answered} == {"Bearer sk-driver"}
        assert verified_envs(out) == local_envs  # same tasks, tools, verifiers and initial_db sha256
        assert summary_of(out)["funnel"]["verified"] == 3
        # The driver's run store holds every call the workers made, and their build/verify items.
        assert store_rows(out, "select count(*) from calls where status = 'ok'")[0][0] == len(answered)
        items = {(r["stage"], r["item_id"]): r["status"] for r in store_rows(out, "select * from items")}
        assert all(items[(stage, env)] == "done" for stage in ("env", "build", "verify") for env in ENV_IDS)
        assert not (out / ".incoming").exists()

        # The same command again: resumed, nothing dispatched, no model request.
        before = len(server.requests)
        again = subprocess.run(ray_args(server, out, cluster), env=ray_env(), capture_output=True, text=True,
                               timeout=600)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "(3 from an earlier attempt of this run" in again.stderr
        # A new output folder with the driver's cache (another cluster, same cache): every env is built again on
        # the workers, and every answer comes from the driver's cache.
        fresh = tmp_path / "fresh"
        args = ray_args(server, fresh, cluster)
        args[args.index("--cache-dir") + 1] = str(out / "cache")
        rebuilt = subprocess.run(args, env=ray_env(), capture_output=True, text=True, timeout=600)
        assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
        asked = [(r.stage, r.subject) for r in server.requests[before:] if r.stage != "ping"]
    assert asked == []
    assert verified_envs(fresh) == local_envs
    cached = store_rows(fresh, "select count(*), sum(cached), sum(cost) from calls")[0]
    assert cached[0] == cached[1] == len(answered)  # every call of the rebuild was a cache hit


class Stall:
    """The first request of `stage` for `subject` hangs (its worker is killed meanwhile); later ones pass."""

    def __init__(self) -> None:
        self.hit = threading.Event()

    def __call__(self, info: RequestInfo) -> Reply | None:
        if self.hit.is_set():
            return None
        self.hit.set()
        return Reply(fault="timeout", delay=300)


def test_a_worker_killed_mid_env_is_dispatched_again_and_the_run_still_verifies(cluster, local_envs, tmp_path):
    victim, out = "maple_street_public_library", tmp_path / "out"
    stall = Stall()
    with FakeModelServer(demo_script(Rule(stage="tool_code", subject=victim, handler=stall))) as server:
        proc = subprocess.Popen(ray_args(server, out, cluster), env=ray_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            wait_for(stall.hit.is_set, proc, f"the tool_code request of {victim}")
            pids = task_pids(victim)
            assert len(pids) == 1, pids
            finished = {body_key(r) for r in server.requests if r.status == 200 and r.subject.startswith(victim)}
            assert len(finished) >= 4  # tasks, schema, data, tool_spec: answered before the kill
            before = len(server.requests)
            os.kill(pids[0], signal.SIGKILL)
            _, stderr = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        after = server.requests[before:]
    assert proc.returncode == 0, stderr[-3000:]
    assert f"{victim}: attempt 1: worker lost" in stderr and "dispatching it again" in stderr
    assert verified_envs(out) == local_envs
    # The answers the lost worker had were in the driver's cache: the retry asked none of them again.
    assert [(r.stage, r.subject) for r in after if body_key(r) in finished] == []
    row = store_rows(out, f"select * from items where stage = 'env' and item_id = '{victim}'")[0]
    output = json.loads(row["output"])
    assert row["status"] == "done" and row["attempts"] == 2
    assert output["status"] == "verified" and len(output["lost"]) == 1
    assert output["lost"][0].startswith("attempt 1: worker lost: ")
    assert [e["lost"] for e in summary_of(out)["envs"] if e["env_id"] == victim] == [output["lost"]]
    assert not list(Path(tempfile.gettempdir()).glob(f"synth-task-{pids[0]}-*"))  # removed by a later task


class Hang:
    """Every request of `stage` for `subject` hangs; `arrived` counts them."""

    def __init__(self) -> None:
        self.arrived = 0

    def __call__(self, info: RequestInfo) -> Reply:
        self.arrived += 1
        return Reply(fault="timeout", delay=300)


def test_an_env_whose_worker_is_lost_on_every_attempt_fails_with_the_reason_and_the_run_goes_on(cluster, tmp_path):
    victim, out, hang = "riverside_veterinary_clinic", tmp_path / "out", Hang()
    with FakeModelServer(demo_script(Rule(stage="data", subject=victim, handler=hang))) as server:
        proc = subprocess.Popen(ray_args(server, out, cluster, "--env-attempts", "2"), env=ray_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            for attempt in (1, 2):
                wait_for(lambda: hang.arrived == attempt, proc, f"attempt {attempt} of {victim}'s data stage")
                os.kill(task_pids(victim)[0], signal.SIGKILL)
            _, stderr = proc.communicate(timeout=600)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr[-3000:]  # 2 of 3 wanted: the demo's seeds hold no fourth scenario
    assert hang.arrived == 2
    outcome = next(e for e in summary_of(out)["envs"] if e["env_id"] == victim)
    assert outcome["status"] == "failed" and len(outcome["lost"]) == 2
    assert outcome["reason"].startswith("the worker was lost on each of 2 attempt(s) (--env-attempts); last: "
                                        "attempt 2: worker lost: ")
    row = store_rows(out, f"select * from items where stage = 'env' and item_id = '{victim}'")[0]
    assert row["attempts"] == 2 and row["status"] == "done"
    assert set(verified_envs(out)) == ENV_IDS - {victim}


def test_a_cluster_address_that_cannot_work_is_one_line_before_any_work(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{sock.getsockname()[1]}"
    for address, says in ((closed, "nothing answers there"), ("ray://127.0.0.1:10001", "Ray Client addresses are "
                                                                                       "not supported")):
        done = subprocess.run([sys.executable, "-m", "synth", "run", "--executor", "ray", "--ray-address", address,
                               "--plain"], cwd=tmp_path, env=ray_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith(f"error: --ray-address {address}: {says}")
    assert list(tmp_path.iterdir()) == []


def test_max_cost_stops_dispatch_and_every_worker_s_calls(cluster, tmp_path):
    prices, out = tmp_path / "prices.json", tmp_path / "out"
    prices.write_text(json.dumps({"openai/test-model": {"input": 1000.0, "output": 1000.0}}))
    # About $6 of scenario calls, then two envs at a time: the budget runs out while both are building.
    with FakeModelServer(demo_script()) as server:
        done = subprocess.run(ray_args(server, out, cluster, "--max-cost", "15", "--prices-file", str(prices),
                                       "--parallel-envs", "2"), env=ray_env(), capture_output=True, text=True,
                              timeout=600)
        requests = server.requests
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "the budget of $15.00 was reached" in done.stderr
    summary = summary_of(out)
    assert summary["budget_stopped"] and summary["stop_reason"] == "budget"
    started = {e["env_id"] for e in summary["envs"]}
    assert len(started) == 2 and {e["status"] for e in summary["envs"]} == {"stopped"}
    # The driver dispatched nothing more: no build request ever named the third env.
    assert {r.subject.split("/")[0] for r in requests if r.stage in BUILD_STAGES} <= started
    # Each worker checks the shared ledger before each call: once the spend crossed $15, the only calls
    # that still finished were the ones already in flight (one per env: build stages call one at a time).
    costs = [r["cost"] for r in store_rows(out, "select cost from calls where status != 'error' order by id")]
    crossed = next(i for i in range(len(costs)) if sum(costs[:i + 1]) >= 15)
    assert len(costs) - crossed - 1 <= 2, costs
    assert len([r for r in requests if r.stage != "ping"]) == len(costs)


class Freeze:
    """From the first request of `stage` on, every request hangs until released (then fails: nobody listens)."""

    def __init__(self, stage: str) -> None:
        self.stage, self.on, self.released = stage, threading.Event(), threading.Event()

    def __call__(self, info: RequestInfo) -> Reply | None:
        if self.released.is_set():
            return None
        if info.stage == self.stage:
            self.on.set()
        if not self.on.is_set():
            return None
        self.released.wait(600)
        return Reply(fault="400")


def test_the_driver_killed_and_restarted_resumes_without_repeating_a_finished_call(cluster, local_envs, tmp_path):
    out, freeze = tmp_path / "out", Freeze("gold")
    with FakeModelServer(demo_script(Rule(handler=freeze))) as server:
        proc = subprocess.Popen(ray_args(server, out, cluster), env=ray_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(freeze.on.is_set, proc, "the first gold request")
            time.sleep(0.5)  # let the other env's worker reach its next request too: it hangs as well
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finished = {body_key(r) for r in server.requests if r.status == 200}
        deadline = time.monotonic() + 120
        while task_pids():  # Ray ends the tasks of a driver that died
            assert time.monotonic() < deadline, f"tasks of the killed driver still running: {task_pids()}"
            time.sleep(0.1)
        freeze.released.set()
        before = len(server.requests)
        rerun = subprocess.run(ray_args(server, out, cluster), env=ray_env(), capture_output=True, text=True,
                               timeout=600)
        after = server.requests[before:]
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert verified_envs(out) == local_envs
    assert [(r.stage, r.subject) for r in after if body_key(r) in finished and r.stage != "ping"] == []
