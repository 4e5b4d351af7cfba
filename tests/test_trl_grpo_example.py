"""examples/trl_grpo_openenv.py as a user runs it: TRL's GRPOTrainer trains for one
optimizer step on the offline demo's envs served by `synth serve`, through OpenEnv,
with a tiny randomly initialised model and a tokenizer built offline (no download)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from synth.use.server import background

EXAMPLE = Path(__file__).parent.parent / "examples" / "trl_grpo_openenv.py"


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


@pytest.fixture(scope="module")
def demo_envs(tmp_path_factory) -> Path:
    """The offline demo's envs (`synth run` with no key)."""
    work = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--plain", "--templates", "0"], cwd=work, env=offline_env(),
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return work / "generated" / "envs"


def test_grpo_trains_one_step_on_the_demo_envs_through_openenv(demo_envs: Path, tmp_path: Path):
    srv, loaded = background(demo_envs)
    registry = srv.app.state.registry
    with srv:
        done = subprocess.run([sys.executable, str(EXAMPLE), "--server", srv.url, "--tiny", "--max-steps", "1",
                               "--num-generations", "2", "--max-completion-length", "16", "--max-tool-calls", "2",
                               "--output-dir", str(tmp_path / "out")], env=offline_env(), capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]
        deadline = time.monotonic() + 10
        while registry.stats()["live"] and time.monotonic() < deadline:  # the sockets closed with the process
            time.sleep(0.05)
        stats = registry.stats()
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["global_step"] == 1
    assert summary["loss_finite"] is True and math.isfinite(summary["loss"])
    assert summary["envs"] == sorted(loaded.envs)  # one TRL environment per served env
    assert summary["tasks"] == sum(t.split == "train" for env in loaded.envs.values() for t in env.tasks.values())
    assert len(summary["rewards"]) == 2 and all(0.0 <= r <= 1.0 for r in summary["rewards"])
    # every rollout was an OpenEnv episode of the server: one probe per env, then the group's two
    assert stats["created"] >= len(loaded.envs) + 2 and stats["live"] == 0
