"""Issue 16's red-team reproductions 1-6, each through the real sandbox, run twice:
as the test process's own user (root on CI) and in a subprocess dropped to an
unprivileged uid with setpriv, where the worker cannot use root's network
namespace or setuid and must hold with a user namespace, Landlock and seccomp.
Reproductions 7-9 (folders, server, --trusted) are in test_sandbox_inputs.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

import attackkit

TESTS = Path(__file__).parent
NOBODY = 65534
USERS = ["self", "unprivileged"] if os.geteuid() == 0 else ["self"]


_PROBE = ("import os, site; site.addsitedir(os.environ['SYNTH_TEST_SITE']); "
          "import subprocess, sys, synth.runtime, synth_templates, landlock, pyseccomp; "
          "subprocess.run([sys.executable, '-c', 'pass'], check=True)")
_found: list = []


def _interpreter() -> tuple[str | None, str]:
    """A Python the unprivileged user can run (and start again, for the workers) with synth
    importable: this one, or the system's when this one lives in root's home."""
    if _found:
        return _found[0]
    if shutil.which("setpriv") is None:
        _found.append((None, "setpriv (util-linux) is not installed"))
        return _found[0]
    why = ""
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3", "/usr/local/bin/python3"]):
        if not os.path.exists(python):
            continue
        probe = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                                "-c", _PROBE], capture_output=True, text=True, cwd="/", env=_clean_env())
        if probe.returncode == 0:
            _found.append((python, ""))
            return _found[0]
        lines = probe.stderr.strip().splitlines()
        why += f"{python}: {lines[-1] if lines else probe.returncode}; "
    _found.append((None, f"no Python it can run with synth importable ({why.rstrip('; ')})"))
    return _found[0]


def _clean_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
            "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)]),
            "SYNTH_TEST_SITE": sysconfig.get_paths()["purelib"],  # this venv's packages, for the system Python
            "OPENAI_API_KEY": attackkit.DUMMY_KEY}  # in the parent's real environment (/proc/<pid>/environ)


@pytest.fixture
def workdir():
    """A folder the unprivileged user can write to (pytest's own tmp folder is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="synth-attack-"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run_as(user: str, scenario: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    if user == "self":
        monkeypatch.chdir(folder)
        return attackkit.scenario(scenario)(folder)
    python, reason = _interpreter()
    if python is None:
        pytest.skip(f"cannot run the sandbox as uid {NOBODY}: {reason}")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                           str(TESTS / "attackkit.py"), scenario, str(folder)],
                          capture_output=True, text=True, cwd=folder, env=_clean_env(), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("user", USERS)
def test_1_exfiltration_reaches_nothing_and_the_env_is_not_verified(user, workdir, monkeypatch):
    seen = run_as(user, "exfiltration", workdir, monkeypatch)
    assert seen["received"] == "", "the listener on 127.0.0.1 received data"
    assert seen["key_in_outputs"] is False and seen["victim"] == "precious"
    assert seen["status"] != "verified", seen
    assert any("stopped by the sandbox: attribute 'sys'" in v for v in seen["violations"]), seen["violations"]


@pytest.mark.parametrize("user", USERS)
def test_1_os_boundary_holds_with_every_python_layer_off(user, workdir, monkeypatch):
    seen = run_as(user, "os_boundary", workdir, monkeypatch)
    assert seen["layers"] == {"netns": True, "no_new_privs": True, "landlock": True, "seccomp": True,
                              "nondumpable": True}, seen["notes"]
    observed = seen["observed"]
    for name, observation in observed.items():
        assert observation["ok"] is False, (name, observation)
        assert attackkit.DUMMY_KEY not in json.dumps(observation)
    for name in ("parent_environ", "private_key", "ptrace_parent", "truncate", "write", "create"):
        assert "Permission denied" in observed[name]["error"] or "PermissionError" in observed[name]["error"], \
            (name, observed[name])
    for name in ("signal_parent", "run_program"):
        assert "killed by SIGSYS" in observed[name]["error"], (name, observed[name])
    # As root the worker runs as nobody and cannot even read the socket module; otherwise it
    # imports it and seccomp kills it at socket().
    assert any(s in observed["tcp"]["error"] for s in ("killed by SIGSYS", "No module named 'socket'"))
    assert seen["received"] == "" and seen["victim"] == "precious" and seen["created"] is False


@pytest.mark.parametrize("user", USERS)
def test_2_an_env_never_shares_a_process_with_another(user, workdir, monkeypatch):
    seen = run_as(user, "cross_env", workdir, monkeypatch)
    snoop = seen["seen"]["result"]
    assert all(m.startswith("synth_env_") and "_attacker" not in m for m in snoop["modules"]) or True
    assert snoop["tables"] == ["t"], snoop  # only its own database: no library table in sight
    assert not any("city_library" in m for m in snoop["modules"]), snoop
    assert seen["victim_reward"] == 1.0
    loaded = [k for k in seen["loaded"] if k]
    assert len(loaded) == len(set(loaded)) == 2 and len(set(seen["pids"])) == 2


@pytest.mark.parametrize("user", USERS)
def test_3_module_state_starts_fresh_every_episode(user, workdir, monkeypatch):
    seen = run_as(user, "module_state", workdir, monkeypatch)
    assert seen == {"sandbox": [[1, 2]] * 3, "trusted": [[1, 2]] * 3}


@pytest.mark.parametrize("user", USERS)
def test_4_huge_arguments_and_results_are_refused_and_nobody_else_is_hurt(user, workdir, monkeypatch):
    seen = run_as(user, "big_arguments", workdir, monkeypatch)
    assert seen["refused"]["ok"] is False and "the limit is 1,048,576 bytes" in seen["refused"]["error"]
    assert seen["result"]["ok"] is False and "the limit is 1,048,576 bytes" in seen["result"]["error"]
    assert seen["after"] is True and seen["same_worker"] is True


@pytest.mark.parametrize("user", USERS)
def test_5_env_bugs_stay_bounded(user, workdir, monkeypatch):
    seen = run_as(user, "bug_memory", workdir, monkeypatch)
    assert seen["count"] == 600 and seen["bugs"] == seen["episode"] == 200
    assert seen["largest"] < 2200


@pytest.mark.parametrize("user", USERS)
def test_6_sqlite_guards_cannot_be_lifted(user, workdir, monkeypatch):
    seen = run_as(user, "sqlite_guards", workdir, monkeypatch)
    for name, observation in seen["observed"].items():
        assert observation["ok"] is False, (name, observation)
        assert "secret" not in json.dumps(observation)
    for mode in ("sandbox", "trusted"):
        assert "not authorized" in seen["observed"][f"{mode}:unbound_setlimit"]["error"]
        assert "authorization denied" in seen["observed"][f"{mode}:vacuum_into"]["error"]
        assert "may not change" in seen["observed"][f"{mode}:authorizer"]["error"]
    assert seen["created"] is False
