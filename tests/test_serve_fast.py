"""The fast lane of `synth serve` against its reference: the same app served with
every route through FastAPI and every MCP post through the SDK's transport
(create_app(fast_lane=False)) must give the same status, type and body for
every request, odd ones included; and POST /batch, on both."""

from __future__ import annotations

import json

import httpx
import pytest

from envkit import make_library_env
from synth.runtime import SandboxPool
from synth.use.server import BackgroundServer, create_app, load_envs
from synth.use.server.toolcalls import MAX_BATCH_CALLS

LIBRARY = "city_library"
MCP = {"accept": "application/json, text/event-stream", "content-type": "application/json",
       "mcp-protocol-version": "2025-11-25"}


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    root = make_library_env(tmp_path_factory.mktemp("fast") / "envs")
    with SandboxPool(workers=2, call_timeout=5.0) as pool:
        fast, reference = load_envs(root, pool=pool), load_envs(root, pool=pool)
        with BackgroundServer(create_app(fast)) as one, BackgroundServer(create_app(reference, fast_lane=False)) as two:
            yield one, two
        for loaded in (fast, reference):
            for env in loaded.envs.values():
                env.close()


def episode(url: str, task_id: str | None = "task_01") -> str:
    answer = httpx.post(f"{url}/envs/{LIBRARY}/episodes", json={"task_id": task_id} if task_id else None)
    assert answer.status_code == 201, answer.text
    return answer.json()["episode_id"]


def both(servers, send) -> tuple[httpx.Response, httpx.Response]:
    """send(url, episode_id) on a fresh episode of each server (ids in answers read as "EPISODE")."""
    answers = []
    for server in servers:
        eid = episode(server.url)
        answer = send(server.url, eid)
        answer._content = answer.content.replace(eid.encode(), b"EPISODE")
        answers.append(answer)
    return tuple(answers)  # type: ignore[return-value]


def same(one: httpx.Response, two: httpx.Response) -> None:
    assert (one.status_code, one.headers.get("content-type")) == (two.status_code, two.headers.get("content-type"))
    if one.headers.get("content-type") == "application/json" and one.content:
        assert one.json() == two.json()
    else:
        assert one.content == two.content


REST_BODIES = [
    ("search_books", b'{"query": "le guin", "available_only": true}'),
    ("checkout_book", b'{"member_id": 2, "book_id": 3, "days": 7}'),
    ("checkout_book", b'{"member_id": 5, "book_id": 3}'),
    ("list_loans", b'{"member_id": 3, "status": "overdue"}'),
    ("search_books", b""),
    ("search_books", b"   "),
    ("search_books", b"[1, 2]"),
    ("search_books", b"42"),
    ("search_books", b'"{\\"query\\": \\"dune\\"}"'),
    ("search_books", b"{not json"),
    ("search_books", b"\xff\xfe{}"),
    ("search_books", b"[" * 100_000 + b"]" * 100_000),
    ("no_such_tool", b"{}"),
]


@pytest.mark.parametrize("tool, body", REST_BODIES, ids=[f"{t}-{i}" for i, (t, _) in enumerate(REST_BODIES)])
def test_rest_tool_calls_answer_as_the_fastapi_route(servers, tool, body):
    one, two = both(servers, lambda url, eid: httpx.post(f"{url}/episodes/{eid}/tools/{tool}", content=body))
    same(one, two)
    assert one.status_code == 200 and set(one.json()) in ({"ok", "result"}, {"ok", "error"})


def test_rest_errors_answer_as_the_fastapi_route(servers):
    for path in ("/episodes/nope/tools/search_books", "/episodes/nope/tools/", "/episodes//tools/x"):
        one, two = (httpx.post(f"{s.url}{path}", json={}) for s in servers)
        same(one, two)
    assert one.status_code in (404, 405)
    one, two = (httpx.get(f"{s.url}/episodes/nope/tools/search_books") for s in servers)
    same(one, two)
    assert one.status_code == 405


def _rpc(method: str, params: dict | None = None, id_: object = 1, **extra) -> bytes:
    message = {"jsonrpc": "2.0", "method": method, **({"id": id_} if id_ is not None else {}), **extra}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode()


MCP_POSTS = [  # (body, headers, takes the fast path)
    (_rpc("tools/call", {"name": "search_books", "arguments": {"query": "dune"}}), MCP, True),
    (_rpc("tools/call", {"name": "search_books", "arguments": {"query": "dune"}}, id_="abc"), MCP, True),
    (_rpc("tools/call", {"name": "search_books"}), MCP, True),
    (_rpc("tools/call", {"name": "search_books", "arguments": None}), MCP, True),
    (_rpc("tools/call", {"name": "checkout_book", "arguments": {"member_id": 5, "book_id": 3}}), MCP, True),
    (_rpc("tools/call", {"name": "list_loans", "arguments": {"member_id": 3, "status": "overdue"}}), MCP, True),
    (_rpc("tools/call", {"name": "nope", "arguments": {}}), MCP, True),
    (_rpc("tools/call", {"name": "search_books", "arguments": {"query": "dune"}}),
     {**MCP, "accept": "*/*"}, True),
    (_rpc("tools/call", {"name": "search_books", "arguments": {"query": "x"}, "_meta": {"progressToken": 1}}),
     MCP, False),
    (_rpc("tools/call", {"name": "search_books", "arguments": [1]}), MCP, False),
    (_rpc("tools/call", {"name": 7}), MCP, False),
    (_rpc("tools/call", {"name": "search_books"}, id_=True), MCP, False),
    (_rpc("tools/call", {"name": "search_books", "arguments": {"query": "x"}}),
     {k: v for k, v in MCP.items() if k != "mcp-protocol-version"}, False),
    (_rpc("tools/call", {"name": "search_books"}), {**MCP, "accept": "text/event-stream"}, False),
    (_rpc("tools/call", {"name": "search_books"}), {**MCP, "content-type": "text/plain"}, False),
    (_rpc("tools/list", {}), MCP, False),
    (_rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "t", "version": "1"}}), MCP, False),
    (_rpc("notifications/initialized", id_=None), MCP, False),
    (b"{not json", MCP, False),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}, "extra": 1}', MCP, False),
]


@pytest.mark.parametrize("body, headers, fast", MCP_POSTS, ids=[str(i) for i in range(len(MCP_POSTS))])
def test_mcp_posts_answer_as_the_sdk_transport(servers, body, headers, fast):
    sdk_calls = []
    mcp = servers[0].app.state.mcp
    handle = mcp.manager.handle_request

    async def counted(*args):
        sdk_calls.append(1)
        await handle(*args)

    mcp.manager.handle_request = counted
    try:
        one, two = both(servers, lambda url, eid: httpx.post(f"{url}/episodes/{eid}/mcp", content=body,
                                                             headers=headers))
    finally:
        mcp.manager.handle_request = handle
    same(one, two)
    assert bool(sdk_calls) is not fast


def test_batch_runs_each_episodes_calls_in_order_and_answers_in_place(servers):
    answers = []
    for server in servers:
        first, second = episode(server.url), episode(server.url)
        calls = [{"episode_id": first, "tool": "checkout_book", "arguments": {"member_id": 2, "book_id": 3}},
                 {"episode_id": second, "tool": "list_loans", "arguments": {"member_id": 2, "status": "active"}},
                 {"episode_id": first, "tool": "list_loans", "arguments": {"member_id": 2, "status": "active"}},
                 {"episode_id": "gone", "tool": "list_loans", "arguments": {}},
                 {"episode_id": first, "tool": "search_books", "arguments": [1]},
                 {"episode_id": second, "tool": "search_books", "arguments": '{"query": "dune"}'},
                 {"episode_id": second, "tool": "search_books"}]
        answer = httpx.post(f"{server.url}/batch", json={"calls": calls})
        assert answer.status_code == 200, answer.text
        results = answer.json()["results"]
        answers.append(results)
        assert results[0]["ok"] and results[5]["result"][0]["title"] == "Dune"
        assert results[6]["ok"] is False and "query" in results[6]["error"]  # no arguments: the schema's error
        loans = lambda r: {loan["book_id"] for loan in r["result"]}  # noqa: E731
        assert 3 in loans(results[2]) and 3 not in loans(results[1])  # in order, and only in its own episode
        assert results[3] == {"ok": False, "status": 404,
                              "error": "unknown episode 'gone'; create one with POST /envs/{env_id}/episodes"}
        assert results[4] == {"ok": False, "error": "arguments must be a JSON object, got list"}
        assert httpx.get(f"{server.url}/episodes/{first}").json()["calls"] == 2  # the refused call ran nothing
    assert answers[0] == answers[1]


@pytest.mark.parametrize("body", [b"", b"{bad", b"[]", b'{"calls": 3}', b'{"calls": [{"episode_id": "x"}]}',
                                  b'{"calls": [{"tool": "x", "episode_id": 1}]}',
                                  json.dumps({"calls": [{"episode_id": "x", "tool": "y"}] * (MAX_BATCH_CALLS + 1)})
                                  .encode()])
def test_bad_batches_are_clear_422s(servers, body):
    one, two = (httpx.post(f"{s.url}/batch", content=body, headers={"content-type": "application/json"})
                for s in servers)
    same(one, two)
    detail = one.json()["detail"]
    assert one.status_code == 422 and ("batch" in detail or "calls[0]" in detail), detail


def test_guards_still_stand_in_front_of_the_fast_lane(servers):
    eid = episode(servers[0].url)
    for path in (f"/episodes/{eid}/tools/search_books", "/batch", f"/episodes/{eid}/mcp"):
        assert httpx.post(servers[0].url + path, json={}, headers={"host": "evil.example"}).status_code == 421
        assert httpx.post(servers[0].url + path, json={}, headers={"origin": "http://evil.example"}).status_code == 403
        assert httpx.post(servers[0].url + path, content=b"x" * (9 << 20)).status_code == 413


def test_docs_and_health_describe_the_fast_routes(servers):
    paths = httpx.get(f"{servers[0].url}/openapi.json").json()["paths"]
    schema = paths["/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert schema["required"] == ["calls"] and "/episodes/{episode_id}/tools/{name}" in paths
    server = httpx.get(f"{servers[0].url}/health").json()["server"]
    assert server["loop"] in ("uvloop", "asyncio") and server["http"] in ("httptools", "h11")
