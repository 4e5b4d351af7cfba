"""Hostile env code against each layer of the sandbox.

Layer 1, the static check, refuses nearly all of it before it runs, so the OS
layer (the worker process: audit hook, limits, no root, no network) is tested
with the static check and the restricted builtins switched off via the pool's
test-only parameters. Every hostile call must come back as an error
observation, leave no trace outside the worker, and leave the pool usable.
"""

from __future__ import annotations

import ctypes
import os
import select
import socket
import time
from pathlib import Path

import pytest

from envkit import library_draft, make_library_env, run_gold
from synth.artifacts import Scenario, Task, ToolSpec
from synth.folder.format import EnvDraft, render_tools_py, render_verifiers_py, write_env
from synth.runtime import CodeRejected, Env, SandboxPool, check_source

NO_PARAMS = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
CALL_TIMEOUT, GRACE = 0.5, 0.5


def hostile_env(tmp_path: Path, evil: str, name: str = "hostile") -> Path:
    """A one-table env whose tool `evil` runs `evil`; `poke` writes a row, `count` reads."""
    tools = [ToolSpec(name=n, description=n, read_only=n == "count", parameters=NO_PARAMS)
             for n in ("evil", "poke", "count")]
    draft = EnvDraft(
        env_id=name, title="Hostile", scenario=Scenario(name="Hostile", description="Hostile code.", category="test"),
        schema_sql="CREATE TABLE t (id INTEGER PRIMARY KEY);", data_sql="INSERT INTO t VALUES (1);",
        tools=tools, tasks=[Task(task_id="task_01", instruction="x", kind="write", difficulty="easy")],
        tool_bodies={"evil": evil, "poke": "db.execute('INSERT INTO t DEFAULT VALUES')\nreturn 'poked'",
                     "count": "return db.execute('SELECT count(*) FROM t').fetchone()[0]"},
        verifier_bodies={"task_01": "return [check('two_rows', final_db.execute('SELECT count(*) FROM t')"
                                    ".fetchone()[0] == 2)]"},
    )
    return write_env(draft, tmp_path / name)


@pytest.fixture(scope="module")
def open_pool():
    """Layers 1 and 2 off: only the worker process stands between the code and the machine."""
    with SandboxPool(workers=2, call_timeout=CALL_TIMEOUT, grace=GRACE, ast_check=False, restricted=False) as p:
        yield p


_LOADED: list = []


@pytest.fixture(autouse=True)
def _close_envs():
    """Each env holds its own worker: close what a test loaded, so the next finds a free one."""
    yield
    while _LOADED:
        _LOADED.pop().close()


def _pid(pool: SandboxPool, ep) -> int:
    return pool.stats()[ep._handle.slot]["pid"]


# --------------------------------------------------------------------------- layer 1: static check

HOSTILE = {
    "read_passwd": ("return open('/etc/passwd').read()", "use of 'open'"),
    "write_file": ("import pathlib\npathlib.Path('/tmp/x').write_text('x')", "import of 'pathlib'"),
    "socket": ("import socket\nsocket.create_connection(('127.0.0.1', 80))", "import of 'socket'"),
    "subprocess": ("import subprocess\nsubprocess.run(['id'])", "import of 'subprocess'"),
    "fork": ("import os\nos.fork()", "import of 'os'"),
    "from_import": ("from os import system\nsystem('id')", "import from os"),
    "dunder_escape": ("return ().__class__.__bases__[0].__subclasses__()", "private attribute '__class__'"),
    "module_walk": ("return json.decoder.re.enum.sys.modules", "attribute 'sys'"),
    "private_module_attr": ("import random\nreturn random._os", "private attribute '_os'"),
    "frame_walk": ("def g():\n    yield 1\nreturn g().gi_frame.f_back", "attribute 'gi_frame'"),
    "eval": ("return eval('1 + 1')", "use of 'eval'"),
    "builtins_name": ("return __builtins__", "use of '__builtins__'"),
    "getattr_dunder": ("return getattr(db, '__class__')", "getattr() on private attribute"),
    "format_escape": ("return '{0.__class__}'.format(db)", "format string"),
    "formatter": ("import string\nreturn string.Formatter().get_field('0', [db], {})", "attribute 'Formatter'"),
    "bare_sys": ("return sys.argv", "use of module 'sys'"),
    "load_extension": ("db.enable_load_extension(True)", "attribute 'enable_load_extension'"),
    "match_dunder": ("match db:\n    case object(__class__=c):\n        return c", "match on attribute '__class__'"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_static_check_refuses_hostile_code(name):
    body, fragment = HOSTILE[name]
    tool = ToolSpec(name="evil", description="x", read_only=True, parameters=NO_PARAMS)
    problems = check_source(render_tools_py("x", "X", [tool], {"evil": body}), "tools.py")
    assert any(fragment in p for p in problems), problems


def test_static_check_accepts_ordinary_env_code():
    draft = library_draft()
    assert check_source(render_tools_py("x", "X", draft.tools, draft.tool_bodies)) == []
    assert check_source(render_verifiers_py("x", "X", draft.tasks, draft.verifier_bodies)) == []
    ordinary = "signal = 3\ncode = 'A1'\nfrom datetime import date\nimport collections\nreturn {'signal': signal}"
    assert check_source(ordinary) == []  # variables named like modules are fine


def test_refused_code_never_reaches_a_worker(tmp_path):
    path = hostile_env(tmp_path, "import os\nos.system('touch /tmp/synth-refused')")
    with SandboxPool(workers=1, call_timeout=CALL_TIMEOUT) as pool:
        with pytest.raises(CodeRejected, match=r"tools.py refused .*line \d+: import of 'os' is not allowed"):
            Env.load(path, pool=pool)
        assert pool.stats()[0]["pid"] is None  # no worker was even started
        with pytest.raises(CodeRejected):
            Env.load(path, trusted=True)  # the trusted mode checks too


# --------------------------------------------------------------------------- layer 2: restricted builtins


def test_restricted_builtins_stop_what_the_static_check_would_have(tmp_path):
    cases = {
        "open": ("return open('/etc/passwd').read()", "NameError: name 'open' is not defined"),
        "import": ("import os\nreturn os.getcwd()", "stopped by the sandbox: import os"),
        "getattr": ("return getattr(db, '__class__')", "stopped by the sandbox: attribute '__class__' by name"),
        "eval": ("return eval('1')", "NameError: name 'eval' is not defined"),
    }
    with SandboxPool(workers=1, call_timeout=CALL_TIMEOUT, ast_check=False) as pool:
        for name, (body, expected) in cases.items():
            with Env.load(hostile_env(tmp_path, body, name), pool=pool) as env, env.episode() as ep:
                obs = ep.call("evil")
                assert obs["ok"] is False and expected in obs["error"], (name, obs)


# --------------------------------------------------------------------------- layer 3: the worker process


def _run(tmp_path: Path, pool: SandboxPool, body: str, name: str) -> tuple[dict, object, int]:
    while _LOADED:  # callers only look at the latest env
        _LOADED.pop().close()
    env = Env.load(hostile_env(tmp_path, body, name), pool=pool)
    _LOADED.append(env)
    ep = env.episode("task_01")
    pid = _pid(pool, ep)
    return ep.call("evil"), ep, pid


def test_worker_runs_unprivileged_without_network(open_pool):
    open_pool.warm()
    for info in (s["info"] for s in open_pool.stats()):
        assert info["uid"] == 65534, info  # nobody (as root), or unmapped in its own user namespace
        assert info["layers"] == {"netns": True, "no_new_privs": True, "landlock": True, "seccomp": True,
                                  "nondumpable": True}, info["notes"]
        assert info["pid"] != os.getpid()
    assert open_pool.missing_layers == [] and open_pool.unverifiable() is None
    libc = ctypes.CDLL(None)
    assert libc.prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE: this (parent) process is not dumpable


@pytest.mark.parametrize("body, blocked", [
    ("return open('/etc/passwd').read()", "open('/etc/passwd'"),
    ("try:\n    open('/etc/passwd').read()\nexcept Exception:\n    pass\nreturn 'swallowed'", "open('/etc/passwd'"),
    ("import sqlite3\nreturn sqlite3.connect('/etc/passwd').execute('select 1').fetchall()", "sqlite3.connect"),
])
def test_reading_files_is_stopped(tmp_path, open_pool, body, blocked):
    obs, ep, pid = _run(tmp_path, open_pool, body, "read")
    assert obs["ok"] is False and "stopped by the sandbox" in obs["error"] and blocked in obs["error"], obs
    assert ep.bugs[-1].kind == "violation"
    assert ep.call("count") == {"ok": True, "result": 1} and _pid(open_pool, ep) == pid


def test_writing_files_is_stopped(tmp_path, open_pool):
    target = tmp_path / "pwned"
    for i, body in enumerate([f"open({str(target)!r}, 'w').write('x')",
                              f"import os\nos.close(os.open({str(target)!r}, os.O_CREAT | os.O_WRONLY))",
                              f"db.execute(\"VACUUM INTO '{target}'\")",
                              f"db.execute(\"ATTACH DATABASE '{target}' AS x\")"]):
        obs, ep, _ = _run(tmp_path, open_pool, body, f"write{i}")
        assert obs["ok"] is False, obs
        assert not target.exists(), body


def test_network_is_unreachable(tmp_path, open_pool):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    try:
        for i, body in enumerate([f"import socket\nreturn str(socket.create_connection(('127.0.0.1', {port})))",
                                  f"import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {port}))"]):
            obs, _, _ = _run(tmp_path, open_pool, body, f"net{i}")
            assert obs["ok"] is False and "stopped by the sandbox" in obs["error"], obs
        assert select.select([server], [], [], 0.2)[0] == []  # nobody knocked
    finally:
        server.close()


@pytest.mark.parametrize("body, blocked", [
    ("import subprocess\nreturn subprocess.run(['touch', MARKER]).returncode", "subprocess"),
    ("import os\nreturn os.system('touch ' + MARKER)", "os.system"),
    ("import os\npid = os.fork()\nif pid == 0:\n    open(MARKER, 'w')\n    os._exit(0)\nreturn pid", "os.fork"),
    ("import os\nreturn os.posix_spawn('/usr/bin/touch', ['touch', MARKER], {})", "os.posix_spawn"),
])
def test_processes_cannot_be_started(tmp_path, open_pool, body, blocked):
    marker = tmp_path / "spawned"
    obs, ep, pid = _run(tmp_path, open_pool, body.replace("MARKER", repr(str(marker))), "proc")
    assert obs["ok"] is False and blocked in obs["error"], obs
    assert not marker.exists()
    assert _pid(open_pool, ep) == pid


def test_runaway_loop_is_interrupted_and_the_episode_survives(tmp_path, open_pool):
    start = time.monotonic()
    obs, ep, pid = _run(tmp_path, open_pool, "n = 0\nwhile True:\n    n += 1", "loop")
    assert obs == {"ok": False, "error": f"tool 'evil' timed out after {CALL_TIMEOUT:g} s"}
    assert time.monotonic() - start < CALL_TIMEOUT + GRACE + 2
    assert ep.bugs[-1].kind == "timeout"
    assert ep.call("poke")["ok"] and ep.call("count")["result"] == 2 and _pid(open_pool, ep) == pid


def test_memory_bomb_and_deep_recursion_fail_inside_the_worker(tmp_path, open_pool):
    obs, ep, pid = _run(tmp_path, open_pool, "return len(bytearray(8 * 1024 ** 3))", "memory")
    assert obs["ok"] is False and "MemoryError" in obs["error"], obs
    assert ep.call("count")["ok"] and _pid(open_pool, ep) == pid
    obs, ep, pid = _run(tmp_path, open_pool, "def f(n):\n    return f(n + 1) + 1\nreturn f(0)", "recursion")
    assert obs["ok"] is False and "RecursionError" in obs["error"], obs
    assert ep.call("count")["ok"] and _pid(open_pool, ep) == pid


def test_a_worker_that_will_not_stop_is_killed_and_only_its_episodes_are_lost(tmp_path):
    stubborn = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    crash = "import os\nos.abort()"
    with SandboxPool(workers=2, call_timeout=CALL_TIMEOUT, grace=GRACE, ast_check=False, restricted=False) as pool:
        for body, reason in ((stubborn, f"timed out after {CALL_TIMEOUT + GRACE:g} s"), (crash, "killed by SIGABRT")):
            with Env.load(hostile_env(tmp_path, body, "stubborn"), pool=pool) as env:
                victim, bystander = env.episode("task_01"), env.episode("task_01")
                assert victim._handle.slot != bystander._handle.slot
                assert bystander.call("poke")["ok"]
                old_pid = _pid(pool, victim)
                obs = victim.call("evil")
                assert obs["ok"] is False and f"stopped its sandbox worker ({reason})" in obs["error"], obs
                assert env.bugs[-1].kind in ("killed", "crash")
                lost = f"episode lost: worker crashed ({reason})"
                assert victim.call("count") == {"ok": False, "error": lost}
                assert victim.evaluate().error == lost
                victim.close()
                # the other worker's episode is untouched, and the pool serves new episodes
                assert bystander.call("count") == {"ok": True, "result": 2} and bystander.evaluate().passed
                with env.episode() as fresh:
                    assert fresh.call("count") == {"ok": True, "result": 1}
                assert pool.stats()[victim._handle.slot]["pid"] not in (None, old_pid)
                bystander.close()
            assert [s["episodes"] for s in pool.stats()] == [0, 0]


def test_the_pool_still_runs_real_envs_afterwards(tmp_path, open_pool):
    with Env.load(make_library_env(tmp_path), pool=open_pool) as env, env.episode("task_04") as ep:
        assert all(o["ok"] for o in run_gold(ep)) and ep.evaluate().passed


ORDINARY_BODY = '''\
import collections
import dataclasses
import enum
import random
import statistics
import time
from typing import NamedTuple

Point = collections.namedtuple("Point", "x y")


class Pair(NamedTuple):
    a: int
    b: int


@dataclasses.dataclass
class Box:
    w: int


Colour = enum.Enum("Colour", "RED GREEN")
when = datetime.datetime.strptime("2024-06-01 10:30", "%Y-%m-%d %H:%M")
rows = [dict(r) for r in db.execute("SELECT id FROM t")]
return {
    "point": Point(1, 2)._asdict(), "pair": Pair(3, 4).b, "box": dataclasses.asdict(Box(5)),
    "colour": Colour.RED.name, "when": when, "mean": statistics.mean([1, 2, 3]),
    "money": decimal.Decimal("1.10") + decimal.Decimal("2.20"), "uuid": len(str(uuid.uuid4())),
    "dice": random.Random(7).randint(1, 6) > 0, "json": json.loads(json.dumps({"k": [1]})),
    "match": re.sub(r"\\s+", " ", "a   b"), "rows": rows, "counter": collections.Counter("aab")["a"],
    "clock": time.time() > 0, "sqrt": math.sqrt(16),
}
'''


def test_ordinary_stdlib_code_works_in_the_locked_down_worker(tmp_path):
    """No false positives: common stdlib use passes every layer, lazily imported helpers included."""
    with SandboxPool(workers=1, call_timeout=5.0) as pool:
        with Env.load(hostile_env(tmp_path, ORDINARY_BODY, "ordinary"), pool=pool) as env, env.episode() as ep:
            obs = ep.call("evil")
            assert obs == {"ok": True, "result": {
                "point": {"x": 1, "y": 2}, "pair": 4, "box": {"w": 5}, "colour": "RED",
                "when": "2024-06-01T10:30:00", "mean": 2, "money": 3.3, "uuid": 36, "dice": True,
                "json": {"k": [1]}, "match": "a b", "rows": [{"id": 1}], "counter": 2, "clock": True,
                "sqrt": 4.0}}, obs
            assert env.bugs == []


def test_a_forked_child_starts_its_own_workers_and_leaves_the_parents_alone(tmp_path):
    with SandboxPool(workers=1, call_timeout=5.0) as pool, \
            Env.load(hostile_env(tmp_path, "return 1", "forked"), pool=pool) as env:
        ep = env.episode()
        assert ep.call("poke")["ok"]
        parent_worker = pool.stats()[0]["pid"]
        child = os.fork()
        if child == 0:  # pragma: no cover - runs in the child, reports through its exit code
            code = 1
            try:
                inherited = ep.call("count")
                with env.episode() as fresh:
                    own = fresh.call("count")
                code = 0 if ("episode lost" in inherited.get("error", "") and own == {"ok": True, "result": 1}
                             and pool.stats()[0]["pid"] not in (None, parent_worker)) else 2
                pool.close()
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ep.call("count") == {"ok": True, "result": 2} and pool.stats()[0]["pid"] == parent_worker
