"""Settings precedence, the run store, atomic writes, JSON extraction, the CLI entry points."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from synth.atomic import write_atomic
from synth.config import ConfigError, load_settings
from synth.llm.extract import NoJSONFound, extract_json
from synth.llm.script import Reply
from synth.pipeline.store import RunStore, derive_run_id


def test_settings_precedence(tmp_path):
    (tmp_path / "synth.toml").write_text('model = "openai/from-toml"\nconcurrency = 3\ntemperature = 0.1\n')
    env = {"SYNTH_CONCURRENCY": "5", "SYNTH_NO_CACHE": "true"}
    s = load_settings({"temperature": 0.9, "model": None}, cwd=tmp_path, environ=env)
    assert s.model == "openai/from-toml"  # toml over default; None flag = not given
    assert s.concurrency == 5  # env over toml
    assert s.temperature == 0.9  # flag over toml
    assert s.no_cache is True


def test_settings_errors_are_one_line(tmp_path):
    (tmp_path / "synth.toml").write_text("bogus = 1\n")
    with pytest.raises(ConfigError, match="unknown key\\(s\\) bogus"):
        load_settings(cwd=tmp_path, environ={})
    (tmp_path / "synth.toml").unlink()
    with pytest.raises(ConfigError, match="concurrency"):
        load_settings(cwd=tmp_path, environ={"SYNTH_CONCURRENCY": "lots"})


def test_run_store_resume(tmp_path):
    store = RunStore.open(tmp_path, "r1")
    store.write_config({"model": "x"})
    assert store.should_run("build", "a", max_attempts=2)
    store.start("build", "a")
    store.finish("build", "a", {"env": "a"})
    store.start("build", "b")
    store.fail("build", "b", "schema error")
    store.close()

    again = RunStore.open(tmp_path, "r1")  # the rerun of the same command
    assert not again.should_run("build", "a", max_attempts=2)
    assert again.get("build", "a")["output"] == {"env": "a"}
    assert again.should_run("build", "b", max_attempts=2)  # failed once, one attempt left
    again.start("build", "b")
    again.fail("build", "b", "schema error")
    assert not again.should_run("build", "b", max_attempts=2)
    assert again.counts() == {"build": {"done": 1, "failed": 1}}
    assert json.loads((tmp_path / "runs" / "r1" / "config.json").read_text()) == {"model": "x"}


def test_run_id_is_derived_from_inputs():
    assert derive_run_id({"seeds": "a", "n": 3}) == derive_run_id({"n": 3, "seeds": "a"})
    assert derive_run_id({"seeds": "a", "n": 3}) != derive_run_id({"seeds": "a", "n": 4})


def test_write_atomic_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "f.json"
    write_atomic(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


@pytest.mark.parametrize("text", [
    '{"a": 1}',
    'Here you go:\n```json\n{"a": 1}\n```\nAnything else?',
    'Sure. The answer is {"a": 1} as requested.',
    '```\n{"a": 1}\n```',
])
def test_extract_json_tolerates_wrapping(text):
    assert extract_json(text) == {"a": 1}


def test_extract_json_says_what_it_saw():
    with pytest.raises(NoJSONFound, match="starts: 'I cannot"):
        extract_json("I cannot help with that.")


def run_cli(*args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run([sys.executable, "-m", "synth", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def test_cli_version_and_help(tmp_path):
    assert run_cli("--version", cwd=tmp_path).stdout.startswith("synth ")
    out = run_cli("--help", cwd=tmp_path)
    assert out.returncode == 0 and "ping" in out.stdout


def test_ping_prints_figures(fake_model, tmp_path):
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))
    out = run_cli("ping", "--model", "openai/any", "--base-url", fake_model.openai_base_url, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "provider=openai model=any latency=" in out.stdout and "prompt_tokens=" in out.stdout


def test_ping_401_exits_nonzero_with_one_line(fake_model, tmp_path):
    fake_model.script.add("ping", "*", Reply(fault="401"))
    out = run_cli("ping", "--model", "openai/any", "--base-url", fake_model.openai_base_url, cwd=tmp_path)
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "HTTP 401" in lines[0] and "OPENAI_API_KEY" in lines[0]


def test_cache_stats_and_clear(fake_model, tmp_path):
    import asyncio

    from synth.cli.model import Pong
    from synth.config import Settings
    from synth.llm import Gateway

    fake_model.script.add("probe", "*", Reply(json={"ok": True, "word": "pong"}))
    gw = Gateway(Settings(model="openai/m", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "c"))
    asyncio.run(gw.structured(Pong, [{"role": "user", "content": "ping"}], stage="probe", subject="x"))
    stats = run_cli("cache", "stats", "--cache-dir", str(tmp_path / "c"), "--json", cwd=tmp_path)
    assert json.loads(stats.stdout)["entries"] == 1
    cleared = run_cli("cache", "clear", "--cache-dir", str(tmp_path / "c"), "--yes", cwd=tmp_path)
    assert "deleted 1" in cleared.stdout


def test_public_api_names_resolve():
    import synth

    missing = [name for name in synth.__all__ if not hasattr(synth, name)]
    assert missing == []


@pytest.mark.parametrize("kind", ["rich", "plain"])
def test_progress_shows_stage_counts_and_usage(kind, capsys):
    from synth.pipeline.progress import LineProgress, RichProgress

    progress = RichProgress() if kind == "rich" else LineProgress()
    progress.usage = lambda: {"calls": 7, "cached": 2, "prompt_tokens": 100, "completion_tokens": 20, "cost": 0.5}
    with progress:
        progress.stage("build", 2)
        progress.started("build")
        progress.finished("build", True)
        progress.started("build")
        progress.finished("build", False)
    err = capsys.readouterr().err
    assert "build" in err and "calls 7 (2 cached)" in err and "$0.5000" in err
    assert progress.stages["build"].done == 1 and progress.stages["build"].failed == 1
