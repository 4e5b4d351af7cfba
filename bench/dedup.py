"""Benchmark the dedup stage on synthetic scenario descriptions.

Generates N scenario descriptions of 150-300 words deterministically (seed
domains from seeds/domains.txt, sentence templates, their entities; about one in
six is a reworded variant of an earlier one, so there is something to drop),
then runs the dedup stage on them with a cold embedding cache and again with
the warm cache, and prints embedding throughput, total dedup time and peak
memory (ru_maxrss).

    python bench/dedup.py [--n 10000] [--threads 2] [--batch-size 16] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.artifacts import Scenario  # noqa: E402
from synth.pipeline.embed import DEFAULT_BATCH_SIZE, DEFAULT_MAX_TOKENS, Embedder  # noqa: E402
from synth.pipeline.seeds import load_bundled_seeds  # noqa: E402
from synth.pipeline.stages.scenarios.dedup import dedup, scenario_text  # noqa: E402

VARIANT_SHARE = 1 / 6
PREFIXES = ["Nova", "Blue", "Swift", "Clear", "Bright", "True", "Peak", "North", "Harbor", "Open", "Prime", "Keen"]
SUFFIXES = ["Desk", "Hub", "Flow", "Track", "Base", "Works", "Point", "Board", "Line", "Ledger", "Manager", "Cloud"]
OPERATORS = ["an independent business", "a family-run company", "a regional chain with a dozen sites",
             "a national operator", "a city department", "a university", "a nonprofit organisation",
             "a franchise network", "a two-person start-up", "a large enterprise with several divisions"]
ROLES = [("administrators", "front-line staff", "customers"), ("managers", "coordinators", "members"),
         ("supervisors", "agents", "clients"), ("owners", "employees", "visitors"),
         ("dispatchers", "field workers", "account holders"), ("officers", "clerks", "residents")]
METRICS = ["volume per week", "revenue per month", "average handling time", "cancellation rate",
           "backlog by age", "utilisation by site", "satisfaction scores", "cost per unit",
           "on-time rate", "growth against last year"]
CHANNELS = ["email", "text message", "push notification", "a letter", "an in-app banner"]

INTRO = [
    "{name} is the {kind} software used by {operator} to keep track of {e0} and {e1}.",
    "{name} runs the day-to-day {kind} work of {operator}, from {e0} to {e2}.",
    "{operator_cap} uses {name} as its {kind} system, with {e1} and {e0} at its core.",
    "{name} gives {operator} one place for {e0}, {e1} and {e2}.",
]
# Body sentences: templates whose slots are filled from the scenario's topic
# (its seed's entities, then entities borrowed from other seeds), so scenarios
# share phrasing, as real ones do, but differ in what they are about.
BODY = [
    "{R} keep a record of every {a} with its {b}, {c} and {d}.",
    "Each {a} belongs to one {b} and may have several {c}.",
    "{R} can search {a} by {b} or {c} and export the results.",
    "When a {a} changes, the {b} and the {c} are updated automatically.",
    "A {a} cannot be closed while its {b} is still open.",
    "{R} approve {a} above a limit that is set per {b}.",
    "The app reminds {R2} by {channel} about {a} that are due.",
    "Prices for {a} depend on the {b} and the {c}.",
    "{R} schedule {a} on a calendar of {b}, avoiding clashes with {c}.",
    "Every {a} moves from {b} to {c} and is archived after a year.",
    "{R2} request {a} online and follow their status until the {b} is confirmed.",
    "Stock of {a} goes down when {b} are issued and up when {c} arrive.",
    "{R} assign {a} to {b} based on {c} and current workload.",
    "Imported {a} are checked against existing {b} to avoid duplicates.",
    "Notes, photos and documents can be attached to any {a} or {b}.",
    "{R} record the {a} for each {b}, and the app totals them per {c}.",
]
REPORTS = [
    "Reports show {metric} and {metric2}, broken down by {a} and {b}.",
    "Dashboards let {R} compare {metric} across {a} and export the figures.",
    "Each month the system summarises {metric} for every {a}.",
]


def _entities(seed_description: str) -> list[str]:
    return [p.strip() for p in re.split(r",| and ", seed_description) if p.strip()]


def _fill(template: str, rng: random.Random, values: dict, topic: list[str]) -> str:
    # Early topic entries (the seed's own entities) are drawn most often.
    picks = {slot: topic[min(int(rng.expovariate(0.2)), len(topic) - 1)] for slot in "abcd"}
    text = template.format(**values, **picks)
    return text[0].upper() + text[1:]


def _describe(name: str, seed, rng: random.Random, slots: dict) -> str:
    topic, roles, operator = slots["topic"], slots["roles"], slots["operator"]
    values = {
        "name": name, "kind": seed.name, "operator": operator, "operator_cap": operator[0].upper() + operator[1:],
        "e0": topic[0], "e1": topic[1], "e2": topic[2], "R": roles[0], "R2": roles[2],
        "channel": rng.choice(CHANNELS), "metric": slots["metrics"][0], "metric2": slots["metrics"][1],
    }
    target_words = rng.randint(170, 280)
    text = rng.choice(INTRO).format(**values)
    while len(text.split()) < target_words - 15:
        values["R"] = rng.choice(roles)
        text += " " + _fill(rng.choice(BODY), rng, values, topic)
    return text + " " + _fill(rng.choice(REPORTS), rng, values, topic)


def synthetic_scenarios(n: int, seed: int = 7) -> list[Scenario]:
    """N deterministic scenarios, about VARIANT_SHARE of them rewordings of earlier ones."""
    rng = random.Random(seed)
    seeds = load_bundled_seeds()
    pool = sorted({e for s in seeds for e in _entities(s.description)})
    made: list[tuple[Scenario, object, dict]] = []
    for i in range(n):
        if made and rng.random() < VARIANT_SHARE:  # reworded variant: same topic, new sentences and name
            _, seed_domain, slots = made[rng.randrange(len(made))]
        else:
            seed_domain = seeds[rng.randrange(len(seeds))]
            own = _entities(seed_domain.description)
            slots = {
                "operator": rng.choice(OPERATORS), "roles": rng.choice(ROLES), "metrics": rng.sample(METRICS, 2),
                "topic": rng.sample(own, len(own)) + rng.sample(pool, 12),
            }
        name = f"{rng.choice(PREFIXES)}{rng.choice(SUFFIXES)} {seed_domain.name.title()} {i}"
        scenario = Scenario(name=name, description=_describe(name, seed_domain, rng, slots),
                            category=seed_domain.category, seed=seed_domain.name)
        made.append((scenario, seed_domain, slots))
    return [m[0] for m in made]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="number of scenarios")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help="cut-off per text (speed/accuracy trade-off; see docs/dedup.md)")
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    started = time.perf_counter()
    scenarios = synthetic_scenarios(args.n)
    words = [len(s.description.split()) for s in scenarios]
    print(f"generated {len(scenarios)} scenarios in {time.perf_counter() - started:.1f}s; "
          f"words/description min {min(words)} mean {sum(words) / len(words):.0f} max {max(words)}; "
          f"torch threads {torch.get_num_threads()}, batch size {args.batch_size}")

    with tempfile.TemporaryDirectory() as cache_dir:
        embedder = Embedder(cache_dir, batch_size=args.batch_size, max_tokens=args.max_tokens)
        loading = time.perf_counter()
        embedder.model  # load outside the timed embedding (reported separately)
        load_s = time.perf_counter() - loading
        tokens = embedder.model.tokenizer([scenario_text(s) for s in scenarios[:500]], truncation=True,
                                          max_length=embedder.max_tokens)["input_ids"]
        mean_tokens = sum(len(t) for t in tokens) / len(tokens)

        cold = time.perf_counter()
        result = dedup(scenarios, embedder)
        cold_s = time.perf_counter() - cold
        embedded = embedder.computed

        warm = time.perf_counter()
        again = dedup(scenarios, Embedder(cache_dir, max_tokens=args.max_tokens))
        warm_s = time.perf_counter() - warm

        # Worst case for the decision logic: threshold 1, so every scenario is
        # kept and each is compared with up to N-1 kept vectors.
        worst = time.perf_counter()
        cached = Embedder(cache_dir, max_tokens=args.max_tokens)
        everything = dedup(scenarios, cached, threshold=1.0, borderline=0.0)
        worst_s = time.perf_counter() - worst
        assert len(everything.kept) == len({s.name for s in scenarios})

    assert [d.rule for d in again.decisions] == [d.rule for d in result.decisions], "warm run decided differently"
    counts = ", ".join(f"{rule} {n}" for rule, n in sorted(result.counts().items()))
    print(f"model load: {load_s:.1f}s; mean tokens embedded per text: {mean_tokens:.0f}")
    print(f"dedup (cold cache): {cold_s:.1f}s total for {len(scenarios)} scenarios; "
          f"embedding {embedded} texts took {embedder.encode_seconds:.1f}s = "
          f"{embedded / embedder.encode_seconds:.1f} texts/s")
    print(f"dedup (warm cache, rerun): {warm_s:.1f}s; all {len(everything.kept)} kept (threshold 1.0): {worst_s:.1f}s")
    print(f"kept {len(result.kept)}, dropped {len(result.dropped)} ({counts}); threshold {result.threshold}")
    print(f"peak memory (ru_maxrss): {peak_rss_mb():.0f} MB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
