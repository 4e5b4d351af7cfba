"""Issue 16's red-team reproductions 7-9: hostile env folders, the server's limits
and guards, and an honest --trusted; plus the refusal to verify envs when the
sandbox's OS layer is missing."""

from __future__ import annotations

import json
import os
import resource
import shutil
import threading
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from attackkit import tiny_env
from envkit import make_library_env
from synth.cli import app
from synth.errors import InputError
from synth.runtime import Env, SandboxPool
from synth.use.server import background

README = Path(__file__).parents[1] / "README.md"


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2, call_timeout=5.0) as p:
        yield p


# --------------------------------------------------------------------------- 7: hostile folders


def test_7_a_symlinked_or_unhashed_database_is_refused_before_it_is_read(tmp_path, pool):
    secret = tmp_path / "root-only"
    secret.write_bytes(b"SQLite format 3\x00 not really: the root-only secret")
    secret.chmod(0o600)
    env = make_library_env(tmp_path / "a")
    (env / "db/initial.sqlite").unlink()
    (env / "db/initial.sqlite").symlink_to(secret)
    with pytest.raises(InputError, match="a symbolic link; env folders must hold regular files only"):
        Env.load(env, pool=pool)
    manifest = json.loads((env / "env.json").read_text())
    manifest["initial_db_sha256"] = ""
    (env / "env.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="no initial_db_sha256"):
        Env.load(env, pool=pool)
    linked_dir = make_library_env(tmp_path / "b")  # a symlinked folder on the way counts too
    shutil.move(linked_dir / "db", tmp_path / "elsewhere")
    (linked_dir / "db").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(InputError, match="symbolic link"):
        Env.load(linked_dir, pool=pool)


def test_7_a_huge_database_or_a_fifo_is_refused_without_reading_it(tmp_path, pool):
    env = make_library_env(tmp_path)
    with open(env / "db/initial.sqlite", "r+b") as f:
        f.truncate(1536 * 1024 * 1024)  # 1.5 GB, sparse: costs no disk
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="over the limit"):
        Env.load(env, pool=pool)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB: nothing read
    fifo = make_library_env(tmp_path / "fifo")
    (fifo / "tasks.jsonl").unlink()
    os.mkfifo(fifo / "tasks.jsonl")
    with pytest.raises(InputError, match="not a regular file"):
        Env.load(fifo, pool=pool)  # and it does not block on the FIFO


def test_7_an_env_id_that_is_a_path_is_refused_everywhere(tmp_path, pool):
    env = make_library_env(tmp_path / "envs")
    manifest = json.loads((env / "env.json").read_text())
    manifest["id"] = "../../../x"
    (env / "env.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="is not a slug"):
        Env.load(env, pool=pool)
    out = tmp_path / "deep" / "er" / "out"
    result = CliRunner().invoke(app, ["export", "awm", str(tmp_path / "envs"), "--out", str(out)])
    assert result.exit_code != 0 and "is not a slug" in str(result.exception)
    assert not (tmp_path / "x.db").exists() and not list(tmp_path.rglob("x.db"))


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_7_unparseable_files_are_reported_per_env_by_serve_and_check(tmp_path):
    from verifykit import make_verified_library

    root = tmp_path / "envs"
    good = make_verified_library(root)
    deep = shutil.copytree(good, root / "deep")
    (deep / "tools.json").write_text(_nested(5000))
    latin = shutil.copytree(good, root / "latin")
    (latin / "tools.py").write_bytes((latin / "tools.py").read_bytes() + b"\n# caf\xe9\n")

    srv, loaded = background(root, workers=2)
    assert list(loaded.envs) == ["city_library"]  # the server starts with what it can serve
    reasons = {Path(s["path"]).name: s["reason"] for s in loaded.skipped}
    assert "nested too deeply" in reasons["deep"] and "not UTF-8" in reasons["latin"]
    for env in loaded.envs.values():
        env.close()

    result = CliRunner().invoke(app, ["check", str(root)])
    assert result.exit_code == 1 and "1/3 env(s) verified" in result.output, result.output
    assert "Traceback" not in result.output
    deep = tmp_path / "failed" / "deep"  # envs/ holds only verified envs: check moved it
    assert "nested too deeply" in json.loads((deep / "env.json").read_text())["failure_reason"]
    latin = tmp_path / "failed" / "latin"
    assert "not UTF-8" in json.loads((latin / "env.json").read_text())["failure_reason"]


# --------------------------------------------------------------------------- 8: the server

HOSTILE_RESULTS = {
    "surrogate": "return {'name': 'bad \\ud800 text'}",
    "deep": "x = []\nfor _ in range(260):\n    x = [x]\nreturn x",
    "huge": "return 'x' * (3 * 1024 * 1024)",
    "echo": "return 'ok'",
}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    tiny_env(root / "envs", "hostile_results", HOSTILE_RESULTS)
    make_library_env(root / "envs")
    srv, loaded = background(root, max_result_bytes=1 << 20, max_argument_bytes=1 << 20)
    with srv:
        yield srv


def _episode(client: httpx.Client) -> str:
    return client.post("/envs/hostile_results/episodes").json()["episode_id"]


def test_8_odd_results_never_give_a_server_error(served):
    with httpx.Client(base_url=served.url, timeout=30) as c:
        eid = _episode(c)
        surrogate = c.post(f"/episodes/{eid}/tools/surrogate", json={})
        assert surrogate.status_code == 200 and surrogate.json() == {"ok": True, "result": {"name": "bad \ufffd text"}}
        deep = c.post(f"/episodes/{eid}/tools/deep", json={})
        assert deep.status_code == 200 and "nested deeper than 64 levels" in deep.json()["error"]
        huge = c.post(f"/episodes/{eid}/tools/huge", json={})
        assert huge.status_code == 200 and "the limit is 1,048,576 bytes" in huge.json()["error"]
        lib = c.post("/envs/city_library/episodes").json()["episode_id"]
        big = c.post(f"/episodes/{lib}/tools/search_books", content=json.dumps({"query": "x" * (2 << 20)}))
        assert big.status_code == 200 and "the limit is 1,048,576 bytes" in big.json()["error"]
        too_big = c.post(f"/episodes/{eid}/tools/echo", content=b"{" + b" " * (9 << 20) + b"}")
        assert too_big.status_code == 413 and "--max-body-bytes" in too_big.json()["detail"]
        nested = c.post(f"/episodes/{eid}/tools/echo", content=_nested(5000))
        assert nested.status_code == 200 and nested.json()["ok"] is False

        async def mcp_calls(session):
            return [await session.call_tool(name, {}) for name in ("surrogate", "deep", "huge")]

        async def run():
            async with streamable_http_client(f"{served.url}/episodes/{eid}/mcp") as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await mcp_calls(session)

        surrogate, deep, huge = anyio.run(run)
        assert not surrogate.is_error and "\ufffd" in surrogate.content[0].text
        assert deep.is_error and "nested deeper" in deep.content[0].text
        assert huge.is_error and "the limit is" in huge.content[0].text


def test_8_host_and_origin_are_checked_on_rest_and_mcp(served):
    with httpx.Client(base_url=served.url, timeout=30) as c:
        eid = _episode(c)
        for path in ("/envs", f"/episodes/{eid}/mcp"):
            rebound = c.post(path, json={}, headers={"Host": "attacker.example"})
            assert rebound.status_code == 421 and "--allowed-host" in rebound.text
            page = c.post(path, json={}, headers={"Origin": "http://attacker.example"})
            assert page.status_code == 403 and "--allowed-origin" in page.text
        create = c.post("/envs/hostile_results/episodes", headers={"Origin": "http://evil.example"})
        assert create.status_code == 403
        assert c.get("/health", headers={"Origin": f"http://127.0.0.1:{served.port}"}).status_code == 200


def test_8_remote_serving_is_configured_with_allowed_hosts(tmp_path):
    from synth.use.server.guard import ServerGuards

    tiny_env(tmp_path / "envs", "remote", {"echo": "return 'ok'"})
    guards = ServerGuards(allowed_hosts=["trainer.cluster:*"], allowed_origins=[])
    srv, _ = background(tmp_path, guards=guards)
    with srv, httpx.Client(base_url=srv.url, timeout=30) as c:
        assert c.get("/health").status_code == 421  # loopback is no longer in the list
        assert c.get("/health", headers={"Host": "trainer.cluster:8000"}).status_code == 200


def test_8_mcp_get_streams_end_when_their_episode_is_deleted(served):
    with httpx.Client(base_url=served.url, timeout=30) as c:
        eid = _episode(c)
        seen: list = []

        def listen() -> None:
            try:
                with httpx.stream("GET", f"{served.url}/episodes/{eid}/mcp", timeout=30,
                                  headers={"Accept": "text/event-stream"}) as stream:
                    seen.append(stream.status_code)
                    for _ in stream.iter_raw():
                        pass
                seen.append("ended")
            except httpx.HTTPError as exc:
                seen.append(repr(exc))

        reader = threading.Thread(target=listen)
        reader.start()
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.02)
        assert seen == [200]
        c.delete(f"/episodes/{eid}")
        reader.join(10)
        assert not reader.is_alive() and seen == [200, "ended"]


# --------------------------------------------------------------------------- 9 and the weak-sandbox rule


def test_9_trusted_is_documented_as_unprotected():
    text = " ".join(README.read_text().replace("**", "").split())
    assert "runs generated code in this process with no protection" in text
    help_text = CliRunner().invoke(app, ["serve", "--help"], terminal_width=200).output
    assert "no protection" in " ".join(help_text.split())


def test_envs_are_not_verified_without_the_os_layer_unless_allowed(tmp_path, capfd):
    from verifykit import make_verified_library

    from synth.pipeline.verify import check_env
    from synth.runtime import workerproc

    env = make_verified_library(tmp_path)
    workerproc._noticed.clear()
    with SandboxPool(workers=1, call_timeout=5.0, skip_layers=("landlock", "seccomp"), allow_weak=False) as weak:
        refused = check_env(env, pool=weak)
    notice = capfd.readouterr().err
    assert notice.count("warning: sandbox OS layer incomplete") == 1 and "--allow-weak-sandbox" in notice
    assert refused.status == "failed" and any("pass --allow-weak-sandbox" in r for r in refused.reasons)
    with SandboxPool(workers=1, call_timeout=5.0, skip_layers=("landlock", "seccomp"), allow_weak=True) as weak:
        assert check_env(env, pool=weak).status == "verified"
    result = CliRunner().invoke(app, ["check", str(env), "--allow-weak-sandbox"])
    assert result.exit_code == 0, result.output
