"""A new user's first minutes with `synth run`, as they would type it.

The rich display is exercised on a real pseudo-terminal (the path piped output
never takes); the offline demo needs no model server; the failing-model cases
use no key, or the fake model server, and must stop before any stage.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

from fake_server import FakeModelServer

from synth.llm.script import Reply

REPO = Path(__file__).resolve().parents[1]


def synth_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra})
    return env


def synth(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synth", *args], cwd=cwd, env=synth_env(**env),
                          capture_output=True, text=True, timeout=600)


def run_in_pty(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600, *,
               interrupt_when: Callable[[], bool] | None = None, typed: list[float] | None = None) -> tuple[int, str]:
    """Run with stdin, stdout and stderr on a pseudo-terminal; (exit status, everything it printed).

    With `interrupt_when`, the terminal is the process's controlling terminal and Ctrl-C is typed on it
    (the line discipline sends SIGINT to the foreground process group, as for a user) once it holds;
    the time it was typed is appended to `typed`."""
    master, slave = pty.openpty()

    def controlling_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        # A user's shell starts commands with Ctrl-C at its default; a test process may have inherited it
        # ignored (an earlier test's library), and Python then never turns SIGINT into KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(args, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            preexec_fn=controlling_terminal if interrupt_when else None)
    os.close(slave)
    chunks, deadline, sent = [], time.monotonic() + timeout, False
    try:
        while time.monotonic() < deadline:
            if interrupt_when is not None and not sent and interrupt_when():
                os.write(master, b"\x03")
                sent = True
                if typed is not None:
                    typed.append(time.monotonic())
            ready, _, _ = select.select([master], [], [], 0.2 if interrupt_when else 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL) if interrupt_when else proc.kill()
            proc.wait()
        os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def plain_text(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def readme_main_command() -> list[str]:
    """The `synth ...` part of the README's main command (the rest installs it)."""
    readme = (REPO / "README.md").read_text()
    block = readme.split("<!-- main-command -->")[1].split("<!-- /main-command -->")[0]
    command = block.strip().strip("`").removeprefix("bash").strip().split("&&")[-1].split()
    assert command[0] == "synth", command
    return command[1:]


def envs(out: Path, status: str = "verified") -> set[str]:
    return {p.parent.name for p in (out / "envs").glob("*/env.json")
            if json.loads(p.read_text())["status"] == status}


def test_main_command_on_a_terminal_prints_the_funnel_and_n_1_then_adds_one_env(tmp_path):
    out = tmp_path / "out"
    code, text = run_in_pty([sys.executable, "-m", "synth", *readme_main_command(), "--out", str(out)],
                            cwd=tmp_path, env=synth_env())
    shown = plain_text(text)
    assert code == 0, shown[-3000:]
    assert "Traceback" not in shown and "running the offline demo" in shown
    assert re.search(r"seeds\s*┃\s*candidates\s*┃\s*crud-able\s*┃\s*unique\s*┃\s*built\s*┃\s*verified", shown)
    assert "2 of 2 wanted verified env(s): done" in shown
    assert "verify" in shown and "model     calls" in shown  # the bars and the usage line were drawn
    first = envs(out)
    assert len(first) == 2
    for env in first:  # each verified env got its tasks from templates too
        assert len((out / "envs" / env / "tasks.jsonl").read_text().splitlines()) >= 200
        assert (out / "envs" / env / "task_templates.jsonl").exists()
    assert not (tmp_path / "generated").exists()  # --out elsewhere: no ./generated/.cache either

    # Right after, in the same folder: -n 1 verifies one new env (the demo holds 3 domains).
    more = synth("run", "-n", "1", "--out", str(out), "--plain", "--templates", "0", cwd=tmp_path)
    assert more.returncode == 0, more.stderr[-3000:]
    assert len(envs(out)) == 3 and first < envs(out)
    assert "1 of 1 wanted verified env(s): done" in more.stderr
    assert "2 scenario(s) already in" in more.stderr and "from other runs are kept" in more.stderr

    # The same command again resumes its run: the env it made counts toward -n, and it says so.
    again = synth("run", "-n", "1", "--out", str(out), "--plain", "--templates", "0", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(1 from an earlier attempt of this run, same seeds, counted toward -n): done" in again.stderr

    # Nothing left to replay offline: one line that says what to do.
    full = synth("run", "-n", "3", "--out", str(out), cwd=tmp_path)  # (-n 2 would resume the first run)
    assert full.returncode == 2
    assert full.stderr.strip().splitlines()[-1].startswith("error: the offline demo holds 3 domains and")
    assert "--model" in full.stderr and len(full.stderr.strip().splitlines()) == 1

    # `synth stats` lists the stages and the funnel in pipeline order, not alphabetically.
    run_dir = next(p for p in sorted((out / "runs").iterdir()) if (p / "summary.json").exists())
    stats = json.loads(synth("stats", str(run_dir), "--json", cwd=tmp_path).stdout)
    assert list(stats["funnel"]) == ["seeds", "candidates", "crud_able", "unique", "built", "verified"]
    stages = list(stats["usage"]["stages"])
    assert stages.index("expand") < stages.index("classify") < stages.index("tasks") < stages.index("gold")


def test_asking_the_demo_for_more_than_it_holds_says_so_and_builds_what_it_has(tmp_path):
    done = synth("run", "-n", "5", "--plain", "--templates", "0", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "running the offline demo (3 env(s), not 5: the demo holds 3 domains" in done.stderr
    assert len(envs(tmp_path / "out")) == 3


def test_n_must_be_at_least_one(tmp_path):
    zero = synth("run", "-n", "0", cwd=tmp_path)
    assert zero.returncode == 2
    assert zero.stderr.strip().splitlines() == [
        "error: -n is the number of verified environments wanted; it must be at least 1, got 0"]


def test_own_seeds_with_no_model_and_no_key_is_one_line_that_says_to_pass_model(tmp_path):
    (tmp_path / "my.txt").write_text("hotel booking | rooms, guests and stays | hospitality\n")
    proc = synth("run", "--seeds", "my.txt", "-n", "2", cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no model: offline, only the bundled demo runs")
    assert "pass --model provider/model" in lines[0]
    assert "running the offline demo" not in proc.stderr and not (tmp_path / "generated").exists()


def test_a_model_without_its_key_fails_before_any_stage(tmp_path):
    (tmp_path / "my.txt").write_text("hotel booking | rooms, guests and stays | hospitality\n")
    proc = synth("run", "--seeds", "my.txt", "-n", "2", "--model", "openai/x", "--out", "out", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: model check failed before any stage: openai/x: OPENAI_API_KEY is not set; export it, or pass "
        "--base-url for a local server"]
    assert not (tmp_path / "out").exists()  # no run folder, no cache: nothing started, nothing retried


def test_a_bad_key_fails_before_any_stage_with_one_line(tmp_path):
    (tmp_path / "my.txt").write_text("hotel booking | rooms, guests and stays | hospitality\n")
    with FakeModelServer() as server:
        server.script.add("*", "*", Reply(fault="401"))
        proc = synth("run", "--seeds", "my.txt", "-n", "2", "--model", "openai/x", "--base-url",
                     server.openai_base_url, "--out", "out", cwd=tmp_path, OPENAI_API_KEY="sk-wrong")
        stages = {r.stage for r in server.requests}
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: model check failed before any stage: openai/x: HTTP 401")
    assert "OPENAI_API_KEY" in lines[0]
    assert stages == {"ping"} and not (tmp_path / "out").exists()
