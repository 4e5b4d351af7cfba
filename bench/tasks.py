"""Tasks at scale: what `synth tasks` adds to each env, what it costs, and how fast its instances are checked.

For every env folder (a copy; the folder itself is left alone), with the offline demo's recorded templates:
- baseline: every gate on the env as it is (what `synth check` runs), timed per hand-written task, and the
  tokens its verification spent per hand-written task (report.json `verify_usage`);
- `synth tasks` in this process: tasks added, templates kept (read / write), tokens per new task, and the
  instantiation and model-free checking time per instance (the checks run several instances at a time on
  one env load); as ratios to the baseline's per-task figures;
- the same checks of a sample of the new instances one at a time, as the gates ran before they were
  batched: the speed-up of the batching.
It prints the machine's load average too, since other work on a shared machine slows every figure.

    python bench/tasks.py [ENV_DIR ...]

With no folder it builds the offline demo first (`synth run -n 3 --templates 0` with no key, in a
temporary folder) and measures its three envs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from synth.config import Settings  # noqa: E402
from synth.folder.format import read_env_draft  # noqa: E402
from synth.llm import Gateway  # noqa: E402
from synth.pipeline.tasks.check import InstanceChecker  # noqa: E402
from synth.pipeline.tasks.step import add_tasks  # noqa: E402
from synth.runtime.sandbox import SandboxPool  # noqa: E402

SAMPLE = 40  # new instances checked again one at a time


def demo_envs(out: Path) -> list[Path]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--out", str(out), "-n", "3", "--plain",
                           "--templates", "0"], env={**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("error: the offline demo did not build:\n" + done.stderr[-2000:])
    return sorted(p for p in (out / "envs").iterdir() if p.is_dir())


def gates_per_task(env_dir: Path, pool: SandboxPool) -> float:
    """Seconds of every gate per task of the env (the baseline: what `synth check` spends)."""
    from synth_validators import run_all

    tasks = len(read_env_draft(env_dir).tasks)
    started = time.perf_counter()
    gates = run_all(env_dir, pool=pool, settings=Settings())
    if not all(g.passed for g in gates):
        sys.exit(f"error: {env_dir} does not pass its gates; the baseline needs a verified env")
    return (time.perf_counter() - started) / tasks


def one_at_a_time(env_dir: Path, pool: SandboxPool, sample: int) -> tuple[float, float]:
    """Seconds per instance to check `sample` new instances (on one loaded env) batched and one at a time."""
    import synth_validators.common as common
    from synth.runtime import Env

    draft = read_env_draft(env_dir)
    tasks = [t for t in draft.tasks if t.template_id][:sample]
    env = Env.load(env_dir, pool=pool)
    try:
        checker = InstanceChecker(env, draft, Settings())
        started = time.perf_counter()
        checker.check(tasks)
        batched = (time.perf_counter() - started) / len(tasks)
        threads, common.TASK_THREADS = common.TASK_THREADS, 1
        try:
            started = time.perf_counter()
            checker.check(tasks)
            single = (time.perf_counter() - started) / len(tasks)
        finally:
            common.TASK_THREADS = threads
    finally:
        env.close()
    return batched, single


def measure(env_dir: Path, work: Path, pool: SandboxPool) -> dict:
    copy = shutil.copytree(env_dir, work / env_dir.name)
    report = json.loads((copy / "report.json").read_text())
    usage = report.get("verify_usage") or {}
    hand = len(read_env_draft(copy).tasks)
    baseline = gates_per_task(copy, pool)
    settings = Settings(model="replay/demo", replay_file=ROOT / "seeds" / "demo", no_cache=True,
                        cache_dir=work / "cache")
    result = asyncio.run(add_tasks(copy, Gateway(settings), settings, pool=pool))
    spent = result.seconds.get("instantiate", 0.0) + result.seconds.get("check", 0.0)
    batched, single = one_at_a_time(copy, pool, SAMPLE)
    kept = result.kept_templates()
    return {"env": env_dir.name, "hand": hand, "added": result.added, "read": sum(t.kind == "read" for t in kept),
            "write": sum(t.kind == "write" for t in kept), "dropped": len(result.templates) - len(kept),
            "tokens_new": result.tokens_per_task or 0.0,
            "tokens_hand": (usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)) / max(1, hand),
            "ms_instance": 1000 * spent / max(1, result.instances_checked), "ms_hand": 1000 * baseline,
            "checked": result.instances_checked, "ms_batched": 1000 * batched, "ms_single": 1000 * single,
            "agents_s": result.seconds.get("agents", 0.0), "status": result.status}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="*", type=Path, help="env folders (default: the offline demo, built first)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synth-bench-tasks-") as tmp:
        work = Path(tmp)
        envs = args.envs or demo_envs(work / "demo")
        pool = SandboxPool(workers=2)
        try:
            rows = [measure(e, work / "copies", pool) for e in envs]
        finally:
            pool.close()
    print(f"load average {' '.join(open('/proc/loadavg').read().split()[:3])} on {os.cpu_count()} core(s)")
    head = ("env", "tasks before", "added", "templates r/w (dropped)", "tokens per new task",
            "x per hand-written", "ms per instance", "x gates per hand-written", "batched vs one at a time")
    print(" | ".join(head))
    for r in rows:
        print(" | ".join([
            r["env"], str(r["hand"]), str(r["added"]), f"{r['read']}/{r['write']} ({r['dropped']})",
            f"{r['tokens_new']:,.0f}", f"{r['tokens_new'] / r['tokens_hand']:.3f}" if r["tokens_hand"] else "-",
            f"{r['ms_instance']:.0f} ({r['checked']} checked)", f"{r['ms_instance'] / r['ms_hand']:.2f}",
            f"{r['ms_batched']:.0f} vs {r['ms_single']:.0f} ms ({r['ms_single'] / r['ms_batched']:.2f}x)"]))
    added = sum(r["added"] for r in rows)
    checked = sum(r["checked"] for r in rows)
    tokens = sum(r["tokens_new"] * r["added"] for r in rows)
    seconds = sum(r["ms_instance"] * r["checked"] for r in rows) / 1000
    print(f"total: {added} new tasks in {len(rows)} env(s), {tokens / max(1, added):,.0f} tokens per new task, "
          f"{checked} instances instantiated and checked in {seconds:.1f} s ({1000 * seconds / max(1, checked):.0f} ms "
          f"each); the reward agents took {sum(r['agents_s'] for r in rows):.1f} s; every env "
          + ("still verified" if all(r["status"] == "verified" for r in rows) else "NOT all verified"))


if __name__ == "__main__":
    main()
