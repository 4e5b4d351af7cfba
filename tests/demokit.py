"""The offline demo's output, built once per test session: `synth run -n 3 --templates 0` with no API key (three verified
envs from the recorded answers in seeds/demo/). Tests get a copy of their own to read or change."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


def offline_env(**extra: str) -> dict[str, str]:
    """The environment of a `synth` subprocess that must run offline: no API keys, no SYNTH_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


def demo_output(tmp_path_factory: pytest.TempPathFactory, dest: Path) -> Path:
    """A copy of the demo's `generated/` folder (envs/, runs/, failed/ if any) at `dest`."""
    built = tmp_path_factory.getbasetemp() / "demo-once"
    out = built / "generated"
    if not (out / "runs").is_dir():
        built.mkdir(exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "-n", "3", "--templates", "0"],
                              cwd=built,
                              env=offline_env(), capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "3 of 3 wanted verified env(s): done" in done.stderr
    shutil.copytree(out, dest, ignore=shutil.ignore_patterns(".cache"))
    return dest


def demo_envs(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A copy of the demo's three verified env folders (a folder holding only them)."""
    return demo_output(tmp_path_factory, tmp_path_factory.mktemp(name) / "generated") / "envs"
