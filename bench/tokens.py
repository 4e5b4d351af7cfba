"""Tokens and cost of the offline demo: real prompts, scripted answers.

Runs `synth run`'s pipeline on the three demo seeds (seeds/demo.txt) against
the tests' fake model server, scripted with the demo's recorded answers
(seeds/demo/*.json): every prompt is the one a real model would get, sent
through the official SDK, and the fake server counts tokens the way the demo's
replay provider does (about four characters a token) and simulates provider
prompt caching (OpenAI automatic prefix caching; Anthropic cache_control). It
runs once over the OpenAI wire and once over the Anthropic wire and prints,
per env and stage, calls, prompt tokens (of which read from the provider's
cache) and completion tokens, then the totals, the prompt tokens per verified
env against the baseline, and the cost under the two price tables of
synth/llm/prices.json (gpt-4.1-mini, claude-sonnet-4-5) as the gateway priced
each call (cache reads at the cached-input rate, Anthropic cache writes at
theirs) and with every prompt token at the plain input rate.

The baseline is the same demo before this change (commit f97ce57: 156 calls,
740,661 prompt tokens for 3 verified envs, measured from its run.sqlite with the
same token count); `--baseline RUN_SQLITE` recomputes it from another run.

    python bench/tokens.py [--baseline generated/runs/<run_id>/run.sqlite]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sqlite3
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # SDK clients closed after their loop: noise only
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_server import FakeModelServer  # noqa: E402

from synth.artifacts import Scenario, slugify  # noqa: E402
from synth.config import Settings  # noqa: E402
from synth.llm.replay import load_recordings  # noqa: E402
from synth.llm.usage import PriceTable  # noqa: E402
from synth.pipeline.progress import Progress  # noqa: E402
from synth.pipeline.runner import run_pipeline  # noqa: E402
from synth.pipeline.seeds import load_seeds  # noqa: E402

BASELINE = {"prompt_tokens": 740_661, "calls": 156, "envs": 3}
WIRES = {"openai": "openai/gpt-4.1-mini", "anthropic": "anthropic/claude-sonnet-4-5"}


class Quiet(Progress):
    def refresh(self, **_: object) -> None:
        pass


def run_demo(wire: str, work: Path) -> tuple[list[dict], dict, dict[str, str]]:
    """Run the demo over one wire format; return every recorded call and the run summary."""
    seeds = load_seeds(ROOT / "seeds" / "demo.txt")
    script = load_recordings(ROOT / "seeds" / "demo")
    with FakeModelServer(script) as fake:
        base = fake.openai_base_url if wire == "openai" else fake.anthropic_base_url
        settings = Settings(model=WIRES[wire], base_url=base, out=work / "gen", cache_dir=work / "cache",
                            retry_base_delay=0.01, max_attempts=1,
                            templates=0)  # the build and the check loop: bench/tasks.py measures the templates
        summary = run_pipeline(seeds, len(seeds), settings, Quiet())
    run = work / "gen" / "runs" / summary["run_id"]
    db = sqlite3.connect(run / "run.sqlite")
    db.row_factory = sqlite3.Row
    calls = [dict(r) for r in db.execute("SELECT * FROM calls WHERE status != 'error'")]
    db.close()
    # expand calls are named after their seed (its slug); every later call after its env.
    names = {}
    for line in (run / "scenarios.jsonl").read_text().splitlines():
        scenario = Scenario.model_validate_json(line)
        names[slugify(scenario.seed)] = scenario.env_id
    return calls, summary, names


def env_of(subject: str, names: dict[str, str]) -> str:
    head = subject.split("/", 1)[0]
    return names.get(head, head)


def per_stage(calls: list[dict], names: dict[str, str]) -> dict[str, dict[str, dict[str, int]]]:
    out: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    for c in calls:
        cell = out[env_of(c["subject"], names)][c["stage"]]
        cell["calls"] += 1
        cell["prompt"] += c["prompt_tokens"]
        cell["cached"] += c["cached_tokens"]
        cell["completion"] += c["completion_tokens"]
    return out


def uncached_cost(calls: list[dict], model: str, prices: PriceTable) -> float:
    """What the calls would cost with every prompt token at the plain input rate."""
    return sum(prices.cost(model, c["prompt_tokens"], c["completion_tokens"]) for c in calls)


def baseline_from(path: Path) -> dict:
    db = sqlite3.connect(path)
    calls, prompt = db.execute("SELECT count(*), sum(prompt_tokens) FROM calls WHERE status != 'error'").fetchone()
    db.close()
    return {"prompt_tokens": prompt, "calls": calls, "envs": BASELINE["envs"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="run.sqlite of a baseline demo run (default: the figure "
                                                      "measured at commit f97ce57)")
    args = parser.parse_args()
    baseline = baseline_from(args.baseline) if args.baseline else BASELINE
    prices = PriceTable.load()
    results = {}
    with tempfile.TemporaryDirectory(prefix="synth-bench-tokens-") as tmp:
        for wire in WIRES:
            results[wire] = run_demo(wire, Path(tmp) / wire)

    calls, summary, names = results["openai"]
    table = per_stage(calls, names)
    verified = summary["funnel"]["verified"]
    print(f"demo: {verified}/{len(summary['envs'])} envs verified; real prompts, scripted answers\n")
    print(f"{'env':<30} {'stage':<13} {'calls':>5} {'prompt':>9} {'cached':>9} {'completion':>10}")
    for env in sorted(table):
        for stage in sorted(table[env]):
            c = table[env][stage]
            print(f"{env:<30} {stage:<13} {c['calls']:>5} {c['prompt']:>9,} {c['cached']:>9,} {c['completion']:>10,}")
        tot = {k: sum(c[k] for c in table[env].values()) for k in ("calls", "prompt", "cached", "completion")}
        print(f"{env:<30} {'(env total)':<13} {tot['calls']:>5} {tot['prompt']:>9,} {tot['cached']:>9,} "
              f"{tot['completion']:>10,}\n")
    prompt = sum(c["prompt_tokens"] for c in calls)
    per_env = prompt / max(1, verified)
    base_env = baseline["prompt_tokens"] / baseline["envs"]
    print(f"total: {len(calls)} calls, {prompt:,} prompt tokens, "
          f"{sum(c['completion_tokens'] for c in calls):,} completion tokens")
    print(f"prompt tokens per verified env: {per_env:,.0f} (baseline {base_env:,.0f}, {baseline['calls']} calls "
          f"for {baseline['envs']} envs): ratio {per_env / base_env:.2f}\n")
    print(f"{'wire / price table':<38} {'prompt':>9} {'cached':>9} {'share':>6} {'cost':>9} {'no cache':>9}")
    for wire, (calls, summary, _) in results.items():
        model = WIRES[wire]
        p, c = sum(x["prompt_tokens"] for x in calls), sum(x["cached_tokens"] for x in calls)
        with_cache = sum(x["cost"] for x in calls)  # as the gateway priced them: cache reads and writes
        without = uncached_cost(calls, model, prices)
        print(f"{wire + ' / ' + model:<38} {p:>9,} {c:>9,} {c / max(1, p):>6.0%} ${with_cache:>8.4f} "
              f"${without:>8.4f}")
    print(json.dumps({"prompt_tokens_per_verified_env": round(per_env), "baseline_per_env": round(base_env),
                      "ratio": round(per_env / base_env, 3)}))


if __name__ == "__main__":
    main()
