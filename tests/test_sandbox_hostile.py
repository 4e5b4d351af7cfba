"""Issue 22: what a red team still got through with hostile env folders and tool code, each
finding as a test. The scenarios that run env code (hostilekit.py) run as the test process's
user (root on CI) and again dropped to an unprivileged uid, like test_sandbox_attacks.py's."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_sandbox_attacks import USERS, run_as, workdir  # noqa: F401 - workdir is a fixture

from attackkit import tiny_env
from synth.errors import InputError
from synth.runtime import CodeRejected, Env, SandboxPool, check_source, wire
from synth.runtime.guards import MAX_CHECKS

TIMEOUT = 120  # a command that waits on a FIFO would never end: this makes it a failure instead


# --------------------------------------------------------------------------- 1: verdicts forged from tools.py


@pytest.mark.parametrize("user", USERS)
def test_the_frame_walk_from_tools_leaves_later_results_and_rewards_untouched(user, workdir, monkeypatch):
    seen = run_as(user, "frame_walk", workdir, monkeypatch)
    assert "match on attribute 'gi_frame' is not allowed" in seen["code_check"]
    assert "defining __del__ is not allowed" in seen["code_check"]
    guarded = seen["audit"]  # code check off, every other layer on
    assert guarded["planted"]["ok"] and guarded["same_worker"]
    assert guarded["victim_call"]["result"]["name"] == "Maya Patel"  # an episode opened before the attack
    honest = guarded["victim_wrong"]
    assert honest["rubric"] < 0.5 and honest["state"] == 0.0 and guarded["later_wrong"] == honest
    assert guarded["later_gold"] == {"rubric": 1.0, "state": 1.0, "error": None}
    # Without the audit hook the finalizer does reach the tools worker's Host (so the test is
    # not vacuous) and forges its tool results; the verdict is still computed in a worker that
    # never ran tool code, on the episode's real database.
    bare = seen["no_audit"]
    assert bare["victim_call"] == {"ok": True, "result": "forged"}
    assert bare["victim_wrong"]["rubric"] == honest["rubric"] and bare["later_wrong"]["rubric"] == honest["rubric"]


# --------------------------------------------------------------------------- 2: state across episodes


@pytest.mark.parametrize("user", USERS)
def test_stdlib_changes_stay_in_their_own_episode(user, workdir, monkeypatch):
    seen = run_as(user, "stdlib_state", workdir, monkeypatch)
    attempts = seen["attempts"]
    assert attempts["patch_encoder"]["result"] == "cannot set 'encode' attribute of immutable type 'JSONEncoder'"
    assert attempts["set_precision"]["result"] == "0.33"  # its own episode sees its own context
    assert attempts["seed"]["result"] == seen["seeded"]  # and its own generator
    assert "stopped by the sandbox: registering <class 'int'>" in attempts["register_abc"]["error"]
    assert seen["own"]["result"]["third"] == "0.33"
    for other in ("victim", "later"):  # opened before the changes, and after them
        result = seen[other]["result"]
        assert result["third"] == "0.3333333333333333333333333333" and result["mapping"] is False
        assert result["draws"] != seen["seeded"]
    assert seen["victim_wrong"]["rubric"] < 0.5 and seen["victim_wrong"]["state"] == 0.0
    assert seen["later_gold"] == {"rubric": 1.0, "state": 1.0, "error": None}


def test_the_code_check_refuses_frame_patterns_class_patches_and_finalizers():
    cases = {
        "def g():\n    yield 1\nmatch g():\n    case object(gi_frame=f):\n        pass": "match on attribute 'gi_frame'",
        "match x:\n    case object(f_back=f):\n        pass": "match on attribute 'f_back'",
        "match x:\n    case object(format=f):\n        pass": "match on attribute 'format'",
        "import json\njson.JSONEncoder.encode = None": "changing attributes of imported 'json'",
        "import json\njson.decoder.x.y = None": "changing attributes of imported 'json'",
        "class A:\n    def __del__(self):\n        pass": "defining __del__ is not allowed",
        "__name__ = 'json'": "use of '__name__' is not allowed",
    }
    for src, fragment in cases.items():
        assert any(fragment in p for p in check_source(src)), (src, check_source(src))
    assert check_source("match row:\n    case {'id': i}:\n        pass\nif __name__ == 'x':\n    pass") == []


HELPERS = {  # standard-library helpers that would read, write or evaluate what env code names
    "update_wrapper": "import functools\nfunctools.update_wrapper(type('H', (), {})(), sorted, assigned=('__globals__',))",
    "wraps": "import functools\nfunctools.wraps(sorted, updated=('__globals__',))",
    "global_enum": "import enum\nenum.global_enum(enum.Enum('E', {'dumps': 1}, module='json'))",
    "foreign_dataclass": "import dataclasses\n"
                         "dataclasses.dataclass(type('X', (), {'__annotations__': {'a': int}, '__module__': 'json'}))",
    "singledispatch": "import functools\nfunctools.singledispatch(len)",
    "default_context": "return str(decimal.DefaultContext)",
}


def test_stdlib_helpers_that_name_attributes_modules_or_code_are_refused(tmp_path):
    bodies = {**HELPERS, "standard_wraps": "import functools\n@functools.wraps(sorted)\ndef f(x):\n    return x\n"
                                          "import dataclasses\n@dataclasses.dataclass\nclass P:\n    a: int = 1\n"
                                          "return [f([2, 1]), P().a]"}
    with SandboxPool(workers=1, call_timeout=5.0) as pool, Env.load(tiny_env(tmp_path, "helpers", bodies),
                                                                   pool=pool) as env:
        for name in HELPERS:
            with env.episode() as ep:
                observed = ep.call(name)
            assert observed["ok"] is False and "stopped by the sandbox" in observed["error"], (name, observed)
        with env.episode() as ep:
            assert ep.call("standard_wraps") == {"ok": True, "result": [[2, 1], 1]}


# --------------------------------------------------------------------------- 3 and 4: hostile env folders


@pytest.mark.parametrize("user", USERS)
def test_a_symlinked_report_json_is_refused_by_check_and_nothing_enters_the_folder(user, workdir, monkeypatch):
    seen = run_as(user, "linked_report", workdir, monkeypatch)
    assert seen["exit_code"] == 1 and "report.json: a symbolic link" in seen["output"], seen["output"]
    assert seen["leaked"] == [] and seen["still_a_link"] and seen["env_json_unchanged"]


def _fifo(env: Path, rel: str) -> None:
    (env / rel).unlink(missing_ok=True)
    os.mkfifo(env / rel)


def _synth(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], capture_output=True, text=True, timeout=TIMEOUT)


def test_fifo_review_and_report_files_are_refused_at_once_by_check_export_serve_show_and_view(tmp_path):
    from verifykit import make_verified_library

    from synth.use.server.app import load_envs
    from synth.view.envdata import load_detail
    from synth.view.index import read_row

    for rel in ("review.json", "report.json"):
        root = tmp_path / rel / "envs"
        env = make_verified_library(root)
        _fifo(env, rel)
        check = _synth("check", str(env))
        assert check.returncode == 1, check.stdout + check.stderr
        if rel == "report.json":
            assert "report.json: not a regular file" in check.stdout, check.stdout
        export = _synth("export", "sft", str(root), "--from", "gold", "--out", str(tmp_path / f"{rel}.jsonl"))
        if rel == "review.json":  # an unreadable review leaves the env out (its reviewer's intent is unknown)
            assert export.returncode == 2 and "review.json is unreadable" in export.stderr, export.stderr
            assert "not a regular file" in export.stderr
        else:  # report.json only feeds the probe rewards of each row
            assert export.returncode == 0, export.stderr
        loaded: list = []
        serving = threading.Thread(target=lambda: loaded.append(load_envs(root)), daemon=True)
        serving.start()
        serving.join(TIMEOUT)
        assert not serving.is_alive(), f"loading envs waited on the FIFO {rel}"
        skipped = {s["path"]: s["reason"] for s in loaded[0].skipped}
        assert (str(env) in skipped) == (rel == "review.json"), skipped
        for served in loaded[0].envs.values():
            served.close()
        show = _synth("show", str(env))  # and the commands that only look
        assert show.returncode in (0, 1) and "Traceback" not in show.stderr, show.stderr
        pages: list = []
        viewing = threading.Thread(target=lambda: pages.append((read_row(env, "k"), load_detail(env))), daemon=True)
        viewing.start()
        viewing.join(TIMEOUT)
        assert not viewing.is_alive() and "not a regular file" in "; ".join(
            [pages[0][0].error or ""] + pages[0][1].problems), pages


def test_links_to_dev_zero_are_refused_without_reading(tmp_path):
    from verifykit import make_verified_library

    from synth.folder.summary import env_summary

    env = make_verified_library(tmp_path / "envs")
    for rel in ("report.json", "tools.py"):
        (env / rel).unlink()
        (env / rel).symlink_to("/dev/zero")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="tools.py: a symbolic link"):
        Env.load(env)
    check = _synth("check", str(env))
    assert check.returncode == 1 and "a symbolic link" in check.stdout, check.stdout
    summary = env_summary(env)
    assert any("report.json cannot be read" in p and "symbolic link" in p for p in summary["problems"])
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB: nothing was read


def test_a_file_synth_writes_replaces_a_link_in_its_place(tmp_path):
    from synth.atomic import write_json_atomic

    target = tmp_path / "elsewhere.json"
    target.write_text('{"keep": true}')
    target.chmod(0o600)
    link = tmp_path / "report.json"
    link.symlink_to(target)
    write_json_atomic(link, {"fresh": True})
    assert not link.is_symlink() and json.loads(link.read_text()) == {"fresh": True}
    assert json.loads(target.read_text()) == {"keep": True} and link.stat().st_mode & 0o777 != 0o600


# --------------------------------------------------------------------------- 5: big answers from a worker


@pytest.mark.parametrize("user", USERS)
def test_a_1gib_reply_and_400000_checks_fail_their_call_only(user, workdir, monkeypatch):
    seen = run_as(user, "big_replies", workdir, monkeypatch)
    assert seen["skipped"] == []
    checks = seen["many_checks"]
    assert checks["rubric"] == 0.0 and f"at most {MAX_CHECKS} checks; this one returned 400,000" in checks["error"]
    assert seen["hostile_after_checks"] == {"ok": True, "result": "ok"}  # a verifier error, not a lost episode
    assert seen["big_reply"]["ok"] is False
    assert "announced a reply of 1,073,741,824 bytes, over its limit of 4,259,840" in seen["big_reply"]["error"]
    assert seen["hostile_fresh_episode"] == {"ok": True, "result": "ok"} and seen["honest_after"] is True
    # The honest env answered, correctly, while the 400,000 checks were being built (a second or
    # more); bench/hostile.py measures how fast.
    assert seen["honest_during_checks"] >= 3 and seen["honest_during_reply"] >= 0
    assert seen["memory_growth_mb"] < 100  # the announced gigabyte was never read


def test_a_reply_over_its_limit_is_refused_before_it_is_read():
    import select
    import struct
    import time

    read_end, write_end = os.pipe()
    try:
        os.write(write_end, struct.pack("!I", 1 << 30) + b"x" * 1000)
        poller = select.poll()
        poller.register(read_end, select.POLLIN)
        with pytest.raises(wire.ReplyTooLarge) as refused:
            wire.recv_untrusted(read_end, poller, time.monotonic() + 5, limit=1 << 20)
        assert refused.value.size == 1 << 30 and len(os.read(read_end, 4096)) == 1000  # the body is still unread
    finally:
        os.close(read_end)
        os.close(write_end)


def test_code_the_check_refuses_never_reaches_a_worker(tmp_path):
    bodies = {"walk": "match db:\n    case object(gi_frame=f):\n        return 1"}
    with SandboxPool(workers=1, call_timeout=5.0) as pool:
        with pytest.raises(CodeRejected):
            Env.load(tiny_env(tmp_path, "refused", bodies), pool=pool)
        assert pool.stats()[0]["pid"] is None and pool.verifiers.stats()[0]["pid"] is None


def test_a_snapshot_over_the_database_limit_is_refused_and_the_episode_goes_on(tmp_path, monkeypatch):
    from synth.runtime import host

    monkeypatch.setattr(host, "db_limit", lambda size: size + 8192)  # the worker's rule, with a tiny allowance
    bodies = {"grow": "db.execute('CREATE TABLE big (x)')\n"
                      "db.execute('INSERT INTO big VALUES (?)', ('x' * 100000,))\nreturn 'grown'",
              "count": "return db.execute('SELECT count(*) FROM t').fetchone()[0]"}
    with Env.load(tiny_env(tmp_path, "growing", bodies), trusted=True) as env, env.episode("task_01") as ep:
        assert ep.call("grow") == {"ok": True, "result": "grown"}
        reward = ep.evaluate("done")
        assert reward.reward == 0.0 and "the episode's database grew to" in reward.error and "the limit is" in reward.error
        assert ep.call("count") == {"ok": True, "result": 1}
