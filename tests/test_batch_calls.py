"""Many episodes' tool calls in one go (synth.runtime.batch.call_many over
SandboxPool.call_many, which pipelines the calls on one worker): each call is
answered as Episode.call answers it alone, calls on one episode keep their
order, and a worker that dies mid-pipeline loses exactly what it held."""

from __future__ import annotations


import resource

import pytest

from attackkit import tiny_env
from envkit import make_library_env
from synth.runtime import Env, SandboxPool
from synth.runtime.batch import call_many, lane_of

CALLS = [
    ("search_books", {"query": "le guin", "available_only": True}),
    ("get_member", {"email": "tom.becker@example.com"}),
    ("checkout_book", '{"member_id": 2, "book_id": 3, "days": 7}'),  # arguments as JSON text
    ("checkout_book", {"member_id": 5, "book_id": 3}),  # over the member's limit: the tool refuses
    ("list_loans", {"member_id": 3, "status": "overdue"}),  # an enum the schema refuses
    ("list_loans", {"member_id": 2, "status": "all"}),  # sees the checkout above, in order
    ("delete_everything", {}),
    ("search_books", "{not json"),
    ("return_book", {"loan_id": 9}),
]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    with SandboxPool(workers=1, call_timeout=5.0) as pool:
        with Env.load(make_library_env(tmp_path_factory.mktemp("batch")), pool=pool) as env:
            yield env


def test_a_batch_answers_each_call_as_a_lone_call_would_in_order(library):
    alone = library.episode("task_01")
    expected = [alone.call(tool, arguments) for tool, arguments in CALLS]
    first, second = library.episode("task_01"), library.episode("task_01")
    assert lane_of(first) == lane_of(second)  # one worker: the batch is pipelined on it
    interleaved = [(ep, tool, arguments) for tool, arguments in CALLS for ep in (first, second)]
    answers = call_many(interleaved)
    assert answers[0::2] == expected and answers[1::2] == expected
    assert [s.observation for s in first.trajectory] == expected  # recorded like lone calls
    assert any(not o["ok"] for o in expected) and any(o["ok"] for o in expected)
    first.close()
    assert call_many([(first, "search_books", {"query": "x"}), (second, "search_books", {"query": "dune"})]) == [
        {"ok": False, "error": "the episode is closed"}, second.call("search_books", {"query": "dune"})]
    for ep in (alone, second):
        ep.close()


def test_many_large_calls_pipeline_without_blocking(library):
    """More request bytes than a pipe holds: the pool writes ahead only what the pipe can take."""
    episodes = [library.episode() for _ in range(4)]
    query = "x" * 9000
    answers = call_many([(episodes[i % 4], "search_books", {"query": query}) for i in range(120)])
    assert answers == [{"ok": True, "result": []}] * 120
    for ep in episodes:
        ep.close()


def test_arguments_over_the_limit_are_refused_in_place(tmp_path):
    with SandboxPool(workers=1, call_timeout=5.0, max_argument_bytes=2000) as pool, \
            Env.load(make_library_env(tmp_path), pool=pool) as env, env.episode() as ep:
        big, small = {"query": "y" * 5000}, {"query": "dune"}
        answers = call_many([(ep, "search_books", small), (ep, "search_books", big), (ep, "search_books", small)])
        assert answers[0] == answers[2] and answers[0]["ok"]
        assert answers[1]["ok"] is False and "the limit is 2,000 bytes" in answers[1]["error"]
        assert answers[1] == ep.call("search_books", big)


@pytest.mark.parametrize("body, reason", [
    ("import os\nos.abort()", "killed by SIGABRT"),
    ("while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
     "timed out after 1 s"),
])
def test_a_worker_dying_mid_pipeline_loses_its_episodes_and_the_pool_recovers(tmp_path, body, reason):
    root = tiny_env(tmp_path, "dying", {"evil": body, "count": "return db.execute('SELECT count(*) FROM t')"
                                                                ".fetchone()[0]"})
    with SandboxPool(workers=1, call_timeout=0.5, grace=0.5, ast_check=False, restricted=False) as pool, \
            Env.load(root, pool=pool) as env:
        a, b, c = env.episode(), env.episode(), env.episode()
        answers = call_many([(a, "count", {}), (b, "evil", {}), (c, "count", {}), (a, "count", {})])
        assert answers[0] == {"ok": True, "result": 1}
        assert answers[1]["ok"] is False and f"stopped its sandbox worker ({reason})" in answers[1]["error"]
        lost = {"ok": False, "error": f"episode lost: worker crashed ({reason})"}
        assert answers[2:] == [lost, lost]
        assert env.bugs[-1].kind in ("killed", "crash")
        assert call_many([(a, "count", {})]) == [lost] and a.call("count") == lost
        with env.episode() as fresh:  # a new worker serves new episodes
            assert call_many([(fresh, "count", {})] * 3) == [{"ok": True, "result": 1}] * 3
        for ep in (a, b, c):
            ep.close()


def test_a_batch_that_fails_with_calls_in_flight_never_leaves_the_pipe_out_of_step(tmp_path):
    root = tiny_env(tmp_path, "interrupted", {"count": "return db.execute('SELECT count(*) FROM t').fetchone()[0]"})
    with SandboxPool(workers=1, call_timeout=5.0) as pool, Env.load(root, pool=pool) as env:
        first, second = env.episode(), env.episode()
        with pytest.raises(Exception):  # something that cannot be sent, after a call already was
            pool.call_many([(first._handle, "count", {}), (second._handle, "count", {"bad": lambda: 0})])
        lost = "episode lost: worker crashed (a batch of calls on it was interrupted)"
        assert first.call("count") == {"ok": False, "error": lost}  # its unread reply is never taken for another's
        with env.episode() as fresh:
            assert call_many([(fresh, "count", {})] * 2) == [{"ok": True, "result": 1}] * 2


# A tool that takes its worker's reply pipe over: one announces a reply of 1 GiB and streams
# zeros, the other sends a reply of a shape host.py never produces, then one of its own.
_WRITER = "import json, os, pickle, struct, sys\nfd = json.loads(sys.argv[1])['wfd']\n"
ANNOUNCE_1GIB = _WRITER + "os.write(fd, struct.pack('!I', 1 << 30))\nwhile True:\n    os.write(fd, bytes(1 << 16))"
MALFORMED = (_WRITER + "data = pickle.dumps(('ok', 'forged', 'extra'))\n"
             "os.write(fd, struct.pack('!I', len(data)) + data)\nreturn 'mine'")


@pytest.mark.parametrize("body, reason", [
    (ANNOUNCE_1GIB, "announced a reply of 1,073,741,824 bytes, over its limit of 165,536"),
    (MALFORMED, "sent a malformed reply"),
])
def test_a_pipelined_reply_is_bounded_and_checked_like_a_lone_one(tmp_path, body, reason):
    """The pipelined path reads each reply with the call's limit (--max-result-bytes plus framing)
    and checks its shape: the worker is killed unread, and the calls written after it are lost."""
    root = tiny_env(tmp_path, "takeover", {"evil": body, "count": "return db.execute('SELECT count(*) FROM t')"
                                                                   ".fetchone()[0]"})
    with SandboxPool(workers=1, call_timeout=5.0, max_result_bytes=100_000, ast_check=False, restricted=False,
                     audit=False) as pool, Env.load(root, pool=pool) as env:
        a, b = env.episode(), env.episode()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        answers = call_many([(a, "count", {}), (b, "evil", {}), (a, "count", {}), (b, "count", {})])
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert answers[0] == {"ok": True, "result": 1}
        assert answers[1]["ok"] is False and f"stopped its sandbox worker ({reason})" in answers[1]["error"]
        lost = {"ok": False, "error": f"episode lost: worker crashed ({reason})"}
        assert answers[2:] == [lost, lost]
        assert grown_mb < 50  # nothing of the announced gigabyte was read
        with env.episode() as fresh:
            assert call_many([(fresh, "count", {})] * 2) == [{"ok": True, "result": 1}] * 2
