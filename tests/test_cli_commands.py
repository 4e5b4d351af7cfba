"""First-use fixes in the commands around `synth run`: show, check, export, serve, cache,
rollout, stats, and the small things (file modes, failure grouping, headers, help)."""

from __future__ import annotations

import json
import os
import re
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner
from verifykit import copy_env, make_verified_library

from synth.cli import app
from synth_validators import GATE_NAMES, STATIC_GATES
from synth.llm.script import Reply

REPO = Path(__file__).resolve().parents[1]


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def user_error(result) -> str:
    """The message of the one-line `error:` the console script prints (exit 2) for this result."""
    from synth.errors import SynthError

    assert isinstance(result.exception, SynthError), (result.exception, result.output)
    return str(result.exception)


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    """A verified library env; tests copy it before breaking anything."""
    return make_verified_library(tmp_path_factory.mktemp("lib"))


def broken_copies(library: Path, root: Path) -> dict[str, Path]:
    envs = root / "envs"
    found = {"good": copy_env(library, envs / "city_library")}
    found["syntax"] = copy_env(library, envs / "syntax_library")
    with (found["syntax"] / "tools.py").open("a") as fh:
        fh.write("\ndef broken(:\n")
    found["nodb"] = copy_env(library, envs / "nodb_library")
    (found["nodb"] / "db" / "initial.sqlite").unlink()
    return found


# ---------------------------------------------------------------------------- show


def test_show_lists_problems_and_exits_1_instead_of_a_traceback(library, tmp_path):
    env = copy_env(library, tmp_path / "city_library")
    with (env / "tasks.jsonl").open("a") as fh:
        fh.write("not json\n")
    (env / "db" / "initial.sqlite").unlink()
    result = invoke("show", env)
    assert result.exit_code == 1 and result.exception is None or isinstance(result.exception, SystemExit)
    assert "problem: tasks.jsonl line" in result.output and "not valid JSON" in result.output
    assert "problem: db/initial.sqlite is missing" in result.output
    as_json = invoke("show", env, "--json")
    data = json.loads(as_json.output)
    assert as_json.exit_code == 1 and len(data["problems"]) == 2 and data["tasks"]


def test_show_of_an_invalid_env_json_is_a_one_line_error(library, tmp_path):
    env = copy_env(library, tmp_path / "city_library")
    (env / "env.json").write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "synth", "show", str(env)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {env}/env.json is not valid JSON")


def test_show_of_a_good_env_has_no_cut_words_and_a_readable_usage_line(library, tmp_path):
    env = copy_env(library, tmp_path / "city_library")
    report = json.loads((env / "report.json").read_text())
    report["verify_usage"] = {"cost": 0.0123, "prompt_tokens": 12345, "completion_tokens": 678}
    (env / "report.json").write_text(json.dumps(report))
    result = invoke("show", env)
    assert result.exit_code == 0, result.output
    assert "usage: tokens 12,345 in / 678 out, cost $0.0123" in result.output and "{" not in result.output
    from synth.folder.summary import clip

    assert clip("one two three four", 12) == "one two …"
    assert clip("short", 12) == "short"


# ---------------------------------------------------------------------------- check


def test_check_reports_every_env_merges_repeated_errors_and_says_what_it_changed(library, tmp_path):
    found = broken_copies(library, tmp_path)
    bad_manifest = copy_env(library, tmp_path / "envs" / "bad_manifest")
    (bad_manifest / "env.json").write_text("{oops")
    result = invoke("check", tmp_path)
    assert result.exit_code == 1, result.output
    out = result.output
    gates = len(GATE_NAMES)
    assert f"ok   city_library: verified ({gates}/{gates} gates)" in out
    assert re.search(r"FAIL bad_manifest: error\n +could not be checked: .*bad_manifest/env.json", out)
    assert re.search(r"FAIL city_library in \S+/nodb_library: failed \(\d+/" + str(gates) + r" gates\)", out)
    assert re.search(r"FAIL city_library in \S+/syntax_library: failed \(\d+/" + str(gates) + r" gates\)", out)
    # one load error, one line: not once per executing gate
    assert out.count("the env could not be loaded") == 2
    executing = ", ".join(g for g in GATE_NAMES if g not in STATIC_GATES)
    assert f"FAIL {executing}: the env could not be loaded" in out
    assert "status changed: verified -> failed (env.json and report.json updated)" in out
    assert "1/4 env(s) verified" in out
    # envs/ holds verified envs only: the ones that failed moved to failed/ and the output says where
    assert f"moved to {tmp_path / 'failed' / 'nodb_library'}" in out
    assert not found["nodb"].exists() and sorted(p.name for p in (tmp_path / "envs").iterdir()) == [
        "bad_manifest", "city_library"]  # an env that could not be checked stays where it was
    assert json.loads((tmp_path / "failed" / "nodb_library" / "env.json").read_text())["status"] == "failed"


def test_check_quiet_and_json(library, tmp_path):
    found = broken_copies(library, tmp_path)
    invoke("check", tmp_path)  # records the failed statuses and moves those envs to failed/
    quiet = invoke("check", tmp_path / "failed", "--quiet")
    assert quiet.exit_code == 1
    assert "ok " not in quiet.output and "syntax_library: failed" in quiet.output
    assert quiet.output.strip().splitlines()[-1] == "0/2 env(s) verified"
    good = invoke("check", tmp_path, "-q")
    assert good.exit_code == 0 and good.output.strip() == "1/1 env(s) verified"
    data = json.loads(invoke("check", tmp_path / "envs" / "city_library", tmp_path / "failed", "--json").output)
    assert data["verified"] == 1
    by_folder = {Path(e["path"]).name: e for e in data["envs"]}
    assert by_folder["nodb_library"]["status"] == "failed" and by_folder["nodb_library"]["changed"] is False
    assert {g["name"] for g in by_folder["city_library"]["gates"]} >= {"database", "solvable", "regression"}


# ---------------------------------------------------------------------------- export


def test_export_skips_envs_whose_code_cannot_load_and_says_which_and_why(library, tmp_path):
    broken_copies(library, tmp_path / "src")
    result = invoke("export", "awm", tmp_path / "src", "--out", tmp_path / "awm")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("awm: 1 scenario(s)")
    assert re.search(r"skipped .*syntax_library: its code cannot load \(tools.py line \d+: syntax error", result.output)
    assert re.search(r"skipped .*nodb_library: its code cannot load \(db/initial.sqlite is missing\)", result.output)


def test_export_to_a_path_of_the_wrong_kind_is_a_one_line_error(library, tmp_path):
    copy_env(library, tmp_path / "src" / "envs" / "city_library")
    existing_file = tmp_path / "taken.txt"
    existing_file.write_text("x")
    folder = invoke("export", "awm", tmp_path / "src", "--out", existing_file)
    assert "is a file; awm writes a folder" in user_error(folder)
    proc = subprocess.run([sys.executable, "-m", "synth", "export", "verl", str(tmp_path / "src"), "--out",
                           str(existing_file)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        f"error: --out {existing_file} is a file; verl writes a folder, pass a folder path"]


# ---------------------------------------------------------------------------- serve


def test_serve_on_an_impossible_or_busy_port_is_one_line_before_serving(library, tmp_path):
    env = copy_env(library, tmp_path / "city_library")
    bad = subprocess.run([sys.executable, "-m", "synth", "serve", str(env), "--port", "99999"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --port 99999 is not a TCP port; pass 1-65535"]
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = subprocess.run([sys.executable, "-m", "synth", "serve", str(env), "--port", str(port)],
                              capture_output=True, text=True, timeout=120)
    assert busy.returncode == 2 and "serving" not in busy.stdout
    assert busy.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port} (Address already in use); pick another --port"]


# ---------------------------------------------------------------------------- cache


def test_cache_commands_never_create_a_folder_and_reject_an_unknown_stage(fake_model, tmp_path):
    missing = tmp_path / "nope"
    stats = invoke("cache", "stats", "--cache-dir", missing)
    assert stats.exit_code == 0 and "no model-call cache there" in stats.output and not missing.exists()
    cleared = invoke("cache", "clear", "--cache-dir", missing, "-y")
    assert cleared.exit_code == 0 and "nothing to delete" in cleared.output and not missing.exists()

    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))
    from synth.cli.model import Pong
    from synth.config import Settings
    from synth.llm import Gateway
    import asyncio

    gw = Gateway(Settings(model="openai/m", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "c"))
    asyncio.run(gw.structured(Pong, [{"role": "user", "content": "ping"}], stage="ping", subject="x"))
    bogus = invoke("cache", "clear", "--cache-dir", tmp_path / "c", "--stage", "bogus", "-y")
    assert "no cached responses of stage 'bogus'; stages in" in user_error(bogus) and "ping" in user_error(bogus)
    kept = json.loads(invoke("cache", "stats", "--cache-dir", tmp_path / "c", "--json").output)
    assert kept["entries"] == 1


# ---------------------------------------------------------------------------- rollout


def test_rollout_counts_errored_episodes_as_errors_and_exits_1(library, fake_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    copy_env(library, tmp_path / "envs" / "city_library")
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))  # the model check passes
    fake_model.script.add("rollout", "*", Reply(fault="400"))
    out = tmp_path / "traj.jsonl"
    result = invoke("rollout", tmp_path / "envs", "--model", "openai/m", "--base-url", fake_model.openai_base_url,
                    "--tasks", "2", "--out", out, "--max-attempts", "1")
    assert result.exit_code == 1, result.output
    assert "2 written (0 passed, 0 not passed, 2 errored)" in result.output
    assert "no reward (no episode was scored)" in result.output and "mean reward 0.000" not in result.output
    assert "2 episode(s) errored" in result.output
    # Exporting them for SFT: nothing qualifies, and --include-failed is not suggested when it was given.
    sft = invoke("export", "sft", out, "--out", tmp_path / "sft.jsonl", "--include-failed")
    assert "2 failed rollout" in user_error(sft) and "--include-failed" not in user_error(sft)
    bad_split = invoke("rollout", tmp_path / "envs", "--model", "openai/m", "--out", out, "--split", "validation")
    assert bad_split.exit_code == 2 and "validation" in bad_split.output


# ---------------------------------------------------------------------------- small things


def test_atomic_writes_get_the_mode_a_plain_write_would(tmp_path):
    from synth.atomic import write_atomic
    from synth.pipeline.scenario_files import write_jsonl

    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    write_atomic(tmp_path / "atomic.txt", "x")
    write_jsonl(tmp_path / "rows.jsonl", [{"a": 1}])
    mode = stat.S_IMODE(plain.stat().st_mode)
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "rows.jsonl").stat().st_mode) == mode
    os.chmod(tmp_path / "atomic.txt", 0o640)
    write_atomic(tmp_path / "atomic.txt", "y")  # an existing file keeps its mode
    assert stat.S_IMODE((tmp_path / "atomic.txt").stat().st_mode) == 0o640


def test_failure_groups_mask_numbers_but_not_model_names():
    from synth.pipeline.runner import reason_group

    a = reason_group("openai/gpt-4.1-mini: HTTP 429: rate limited (gave up after 6 attempts)")
    b = reason_group("openai/gpt-4.1-mini: HTTP 503: rate limited (gave up after 2 attempts)")
    assert a == b == "openai/gpt-4.1-mini: HTTP N: rate limited (gave up after N attempts)"
    assert reason_group("tools.py line 12: syntax error") == "tools.py line N: syntax error"


def test_every_synth_command_the_docs_and_seed_files_mention_exists():
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    commands |= {g.name for g in app.registered_groups}
    texts = [(REPO / "README.md").read_text(), *(p.read_text() for p in (REPO / "seeds").glob("*.txt"))]
    mentioned = {m for text in texts for m in re.findall(r"`synth ([a-z][a-z-]*[a-z])", text)}
    assert mentioned and mentioned <= commands, mentioned - commands


def test_pytest_configuration_has_no_unknown_options():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/test_seeds.py"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "Unknown config option" not in proc.stdout + proc.stderr
