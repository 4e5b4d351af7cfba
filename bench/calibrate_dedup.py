"""Calibrate the dedup threshold for the bundled embedding model.

Embeds both sides of every labelled pair in tests/data/dedup_pairs.jsonl
(exactly the text the dedup stage embeds), prints each pair's cosine
similarity, the threshold that best separates "duplicate" from "distinct"
pairs, its margins, and a borderline band.

    python bench/calibrate_dedup.py [--pairs FILE] [--max-tokens N]

Threshold: the midpoint of the gap between the highest distinct pair and the
lowest duplicate pair when the labels separate; otherwise the cut with the
fewest errors. Band: from the threshold down to the 75th percentile of the
distinct pairs, so the top quarter of "different app, same domain" pairs is
kept only while its category has room (and is what a judge model would see).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from synth.artifacts import Scenario  # noqa: E402
from synth.pipeline.embed import DEFAULT_MAX_TOKENS, Embedder  # noqa: E402
from synth.pipeline.stages.scenarios.dedup import scenario_text  # noqa: E402

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data" / "dedup_pairs.jsonl"
BAND_PERCENTILE = 75


def load_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def pair_similarities(pairs: list[dict], embedder: Embedder) -> np.ndarray:
    a = embedder.embed([scenario_text(Scenario(**p["a"])) for p in pairs])
    b = embedder.embed([scenario_text(Scenario(**p["b"])) for p in pairs])
    return (a * b).sum(axis=1)


def best_threshold(dup: np.ndarray, distinct: np.ndarray) -> tuple[float, int]:
    """(threshold, errors): widest-gap midpoint if separable, else the fewest-errors cut."""
    if dup.min() > distinct.max():
        return float((dup.min() + distinct.max()) / 2), 0
    values = np.sort(np.concatenate([dup, distinct]))
    cuts = (values[:-1] + values[1:]) / 2
    errors = [int((dup < c).sum() + (distinct >= c).sum()) for c in cuts]
    best = int(np.argmin(errors))
    return float(cuts[best]), errors[best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    args = parser.parse_args()

    pairs = load_pairs(args.pairs)
    sims = pair_similarities(pairs, Embedder(None, max_tokens=args.max_tokens))
    labels = np.array([p["label"] for p in pairs])
    dup, distinct = sims[labels == "duplicate"], sims[labels == "distinct"]

    print(f"{'similarity':>10}  {'label':<9}  pair")
    for i in np.argsort(-sims):
        p = pairs[i]
        print(f"{sims[i]:>10.3f}  {p['label']:<9}  {p['a']['name']}  ~  {p['b']['name']}")
    print()
    print(f"duplicate pairs: n={len(dup)} min={dup.min():.3f} median={np.median(dup):.3f} max={dup.max():.3f}")
    print(f"distinct pairs:  n={len(distinct)} min={distinct.min():.3f} median={np.median(distinct):.3f} "
          f"p{BAND_PERCENTILE}={np.percentile(distinct, BAND_PERCENTILE):.3f} max={distinct.max():.3f}")

    cut, errors = best_threshold(dup, distinct)
    threshold = round(cut, 2)
    band_floor = min(round(float(np.percentile(distinct, BAND_PERCENTILE)), 2), threshold)
    borderline = round(threshold - band_floor, 2)
    print(f"best separating threshold: {cut:.4f} ({errors} misclassified); gap "
          f"[{distinct.max():.3f}, {dup.min():.3f}] is {dup.min() - distinct.max():+.3f} wide")
    print(f"suggested: threshold={threshold:.2f} borderline={borderline:.2f} "
          f"(band [{band_floor:.2f}, {threshold:.2f}))")
    print(f"margins at {threshold:.2f}: lowest duplicate {dup.min() - threshold:+.3f} above, "
          f"highest distinct {threshold - distinct.max():+.3f} below")
    in_band = (sims >= band_floor) & (sims < threshold)
    print(f"in band: {int((in_band & (labels == 'distinct')).sum())} distinct, "
          f"{int((in_band & (labels == 'duplicate')).sum())} duplicate; "
          f"merged at threshold: {int((dup >= threshold).sum())}/{len(dup)} duplicates, "
          f"{int((distinct >= threshold).sum())}/{len(distinct)} distinct")


if __name__ == "__main__":
    main()
