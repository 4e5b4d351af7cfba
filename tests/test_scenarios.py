"""Scenario generation (expand -> classify -> dedup) against the fake model server.

Dedup uses the real bundled embedding model, so the scripted scenarios are
realistic, distinct descriptions (tests/data/scenario_drafts.json);
"vet_duplicate" is a deliberate rewording of "vet_appointments". The dedup
threshold and band are pinned (DEDUP) so tuning the defaults cannot move
these tests: every distinct pair scores below the band, the rewording above
the threshold.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from synth.artifacts import Scenario, Seed
from synth.config import Settings
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.embed import Embedder
from synth.pipeline.scenarios import generate_scenarios
from synth.pipeline.stages.scenarios.dedup import scenario_text
from synth.pipeline.stages.scenarios.expand import MAX_WORDS, MIN_WORDS
from synth.pipeline.store import RunStore

DRAFTS = json.loads((Path(__file__).parent / "data" / "scenario_drafts.json").read_text())
VET = Seed(name="veterinary clinic", description="clinics that treat pets and farm animals", category="healthcare")
LIBRARY = Seed(name="public library", description="lending libraries run by a city or a university",
               category="education")
CRUD_OK = Reply(json={"crud_able": True, "reason": "Its records and operations map onto a few related tables."})
DEDUP = {"dedup_threshold": 0.75, "dedup_borderline": 0.06}  # band [0.69, 0.75)
NOT_CRUD = Reply(json={"crud_able": False, "reason": "It depends on live video feeds from camera hardware."})


def batch(*keys: str, **reply) -> Reply:
    return Reply(json={"scenarios": [DRAFTS[k] for k in keys]}, **reply)


def name(key: str) -> str:
    return DRAFTS[key]["name"]


@pytest.fixture(scope="module")
def embedder():
    """One embedder (and one model load) for the whole module."""
    with Embedder(None) as e:
        yield e


def make_settings(fake_model, tmp_path, **overrides) -> Settings:
    values = dict(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                  retry_base_delay=0.01, timeout=10, max_attempts=2, **DEDUP)
    values.update(overrides)
    return Settings(**values)


def generate(fake_model, tmp_path, embedder, seeds, n, *, store=None, existing=(), **overrides):
    settings = make_settings(fake_model, tmp_path, **overrides)
    gateway = Gateway(settings, recorder=store)
    result = asyncio.run(generate_scenarios(seeds, n, gateway, settings, existing=existing, store=store,
                                            embedder=embedder))
    return result, gateway


def user_prompts(fake_model, stage: str, subject: str | None = None) -> list[str]:
    """The user message of each request to `stage` (and subject), in arrival order."""
    return [r.body["messages"][-1]["content"] for r in fake_model.requests
            if r.stage == stage and (subject is None or r.subject == subject)]


def taken_section(prompt: str) -> str:
    return prompt.split("Applications already taken", 1)[1].split("For each application", 1)[0]


def test_fixture_descriptions_are_valid_and_distinct(embedder):
    for key, draft in DRAFTS.items():
        assert MIN_WORDS <= len(draft["description"].split()) <= MAX_WORDS, key
    keys = [k for k in DRAFTS if k != "vet_duplicate"]
    vectors = embedder.embed([scenario_text(Scenario(**DRAFTS[k])) for k in keys])
    sims = vectors @ vectors.T
    floor = DEDUP["dedup_threshold"] - DEDUP["dedup_borderline"]
    assert (sims[~np.eye(len(keys), dtype=bool)] < floor).all()  # below the borderline band


def test_expansion_reaches_target_over_rounds_with_rotating_prompts(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments"), batch("vet_pharmacy"))
    fake_model.script.add("expand", "public_library", batch("library_circulation"), batch("library_rooms"))
    fake_model.script.add("classify", "*", CRUD_OK)
    result, _ = generate(fake_model, tmp_path, embedder, [VET, LIBRARY], 4)

    assert [s.name for s in result.kept] == [name("vet_appointments"), name("library_circulation"),
                                             name("vet_pharmacy"), name("library_rooms")]
    assert {s.seed for s in result.kept} == {VET.name, LIBRARY.name}
    assert result.rounds == 2 and result.candidates == 4 and result.crud_able == 4 and not result.rejected
    assert len(user_prompts(fake_model, "classify")) == 4  # every generated candidate was judged

    first, second = user_prompts(fake_model, "expand", "veterinary_clinic")
    assert 'category "healthcare"' in first  # round 1 focuses on the seed's own category
    assert 'category "healthcare"' not in second and "Focus for this round" in second
    assert "Applications already taken" not in first
    taken = taken_section(second)  # both seeds' round-1 names are listed as taken
    assert name("vet_appointments") in taken and name("library_circulation") in taken
    assert "Examples of the level of detail" in second and DRAFTS["vet_appointments"]["description"][:80] in second
    lib_first, lib_second = user_prompts(fake_model, "expand", "public_library")
    assert 'category "education"' in lib_first and name("vet_appointments") in taken_section(lib_second)


def test_classifier_rejections_keep_the_reason_and_a_rerun_resumes(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments", "live_wildlife", "vet_pharmacy"))
    fake_model.script.add("classify", "live_wildlife*", NOT_CRUD)
    fake_model.script.add("classify", "*", CRUD_OK)
    store = RunStore(tmp_path / "run")
    result, _ = generate(fake_model, tmp_path, embedder, [VET], 2, store=store)

    assert [s.name for s in result.kept] == [name("vet_appointments"), name("vet_pharmacy")]
    assert result.candidates == 3 and result.crud_able == 2
    [rejection] = result.rejected
    assert rejection.stage == "classify" and rejection.scenario.name == name("live_wildlife")
    assert "live video feeds" in rejection.reason and rejection.candidate_id == "veterinary_clinic/r01/1"
    judged = {row["item_id"]: row for row in store.items("classify")}
    assert judged["veterinary_clinic/r01/1"]["output"]["crud_able"] is False
    assert all(row["status"] == "done" for row in judged.values()) and len(judged) == 3
    assert store.get("expand", "veterinary_clinic/r01")["status"] == "done"

    before = len(fake_model.requests)
    again, _ = generate(fake_model, tmp_path, embedder, [VET], 2, store=store, cache_dir=tmp_path / "fresh")
    assert len(fake_model.requests) == before  # everything came from the run store, even with an empty cache
    assert again.kept == result.kept and again.rejected == result.rejected


def test_stall_ends_the_seed_with_a_recorded_reason_and_relaxes_dedup(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments"))  # the same answer every round
    fake_model.script.add("classify", "*", CRUD_OK)
    store = RunStore(tmp_path / "run")
    result, _ = generate(fake_model, tmp_path, embedder, [VET], 3, store=store, max_stall_rounds=2)

    assert [s.name for s in result.kept] == [name("vet_appointments")]
    assert len(user_prompts(fake_model, "expand")) == 3  # one good round, then two stalled ones
    reason = result.stalled[VET.name]
    assert reason.startswith("stalled: 2 round(s) in a row") and "duplicate: 1" in reason
    outcome = store.get("expand", "veterinary_clinic")
    assert outcome["status"] == "failed" and outcome["error"] == reason
    assert [r.stage for r in result.rejected] == ["dedup", "dedup"]
    assert all(r.nearest == name("vet_appointments") for r in result.rejected)
    assert result.threshold > DEDUP["dedup_threshold"]  # relaxed on each duplicate-stalled round, within its bound
    assert "1 of 3 wanted" in result.summary() and "1 seed(s) stalled" in result.summary()


def test_stalled_seed_is_topped_up_by_a_seed_with_room(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments"))
    fake_model.script.add("expand", "public_library", batch("library_circulation"), batch("library_rooms"),
                          batch("library_ill"))
    fake_model.script.add("classify", "*", CRUD_OK)
    result, _ = generate(fake_model, tmp_path, embedder, [VET, LIBRARY], 4, max_stall_rounds=1)

    assert len(result.kept) == 4
    assert sum(s.seed == LIBRARY.name for s in result.kept) == 3
    assert list(result.stalled) == [VET.name]


def test_fewer_scenarios_than_seeds_asks_only_the_seeds_needed(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "*", batch("library_rooms"))
    fake_model.script.add("classify", "*", CRUD_OK)
    third = Seed(name="city hall", category="government")
    result, _ = generate(fake_model, tmp_path, embedder, [VET, LIBRARY, third], 1)

    assert [s.name for s in result.kept] == [name("library_rooms")] and not result.rejected
    assert [r.subject for r in fake_model.requests if r.stage == "expand"] == ["veterinary_clinic"]


def test_near_duplicate_rewording_is_dropped_with_its_nearest_neighbour(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments", "vet_duplicate", "farm_vet"))
    fake_model.script.add("classify", "*", CRUD_OK)
    result, _ = generate(fake_model, tmp_path, embedder, [VET], 2)

    assert [s.name for s in result.kept] == [name("vet_appointments"), name("farm_vet")]
    [dup] = result.rejected
    assert dup.stage == "dedup" and dup.nearest == name("vet_appointments") and dup.similarity >= 0.75


def test_invalid_answer_is_repaired_with_the_problem_fed_back(fake_model, tmp_path, embedder):
    short = dict(DRAFTS["vet_pharmacy"], description="A pharmacy stock app for a vet hospital. " * 4)
    fake_model.script.add("expand", "veterinary_clinic", Reply(json={"scenarios": [short]}), batch("vet_pharmacy"))
    fake_model.script.add("classify", "*", CRUD_OK)
    result, _ = generate(fake_model, tmp_path, embedder, [VET], 1)

    assert [s.name for s in result.kept] == [name("vet_pharmacy")]
    repair = fake_model.requests[1].body["messages"][-1]["content"]
    assert "description has 32 words; it must have 150-300" in repair
    assert not result.failures


def test_failed_items_are_recorded_without_stopping_the_stage(fake_model, tmp_path, embedder):
    fake_model.script.add("expand", "veterinary_clinic", Reply(fault="400"))  # fails for good, every round
    fake_model.script.add("expand", "public_library", batch("library_circulation", "library_rooms"),
                          batch("library_ill"))
    fake_model.script.add("classify", "community_room*", Reply(text="I would rather not say."))  # never valid
    fake_model.script.add("classify", "*", CRUD_OK)
    store = RunStore(tmp_path / "run")
    result, _ = generate(fake_model, tmp_path, embedder, [VET, LIBRARY], 2, store=store, max_stall_rounds=1)

    assert [s.name for s in result.kept] == [name("library_circulation"), name("library_ill")]
    failed = {(f.stage, f.item_id) for f in result.failures}
    assert failed == {("expand", "veterinary_clinic/r01"), ("classify", "public_library/r01/1")}
    [rejection] = result.rejected
    assert rejection.stage == "classify" and rejection.reason.startswith("classification failed:")
    assert "the model call failed" in result.stalled[VET.name]
    assert {r["item_id"] for r in store.items("expand", "failed")} >= {"veterinary_clinic/r01"}
    assert store.get("classify", "public_library/r01/1")["status"] == "failed"


@pytest.mark.parametrize("duplicate", [True, False])
def test_borderline_pair_is_decided_by_the_model_judge(fake_model, tmp_path, embedder, duplicate):
    a, b = (Scenario(**DRAFTS[k]) for k in ("vet_appointments", "vet_boarding"))
    va, vb = embedder.embed([scenario_text(a), scenario_text(b)])
    similarity = float(va @ vb)
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments", "vet_boarding"),
                          batch("farm_vet"))
    fake_model.script.add("classify", "*", CRUD_OK)
    fake_model.script.add("dedup_judge", "*", Reply(json={"is_duplicate": duplicate,
                                                          "reason": "Both run the same pet check-in desk."}))
    # Put the pair in the borderline band: just under the threshold.
    result, _ = generate(fake_model, tmp_path, embedder, [VET], 2,
                         dedup_threshold=round(similarity + 0.02, 4), dedup_borderline=0.05)

    assert [r.subject for r in fake_model.requests if r.stage == "dedup_judge"] == [
        "kennel_stay_planner~paw_ledger_appointment_desk"]
    if duplicate:
        assert [s.name for s in result.kept] == [a.name, name("farm_vet")]
        [rejection] = result.rejected
        assert rejection.stage == "dedup" and "judge: duplicate" in rejection.reason
        assert "same pet check-in desk" in rejection.reason and rejection.nearest == a.name
    else:
        assert [s.name for s in result.kept] == [a.name, b.name] and not result.rejected


def test_budget_stop_ends_cleanly_and_a_rerun_continues(fake_model, tmp_path, embedder):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/*": {"input": 10000.0, "output": 0.0}}))  # 100 prompt tokens = $1
    cost = dict(prompt_tokens=100, completion_tokens=0)
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments", "vet_pharmacy", **cost),
                          batch("farm_vet", **cost))
    fake_model.script.add("classify", "*", Reply(json=CRUD_OK.json_, **cost))
    store = RunStore(tmp_path / "run")
    # $1 expand + 2 x $1 classify, then the second round's call is refused.
    result, gateway = generate(fake_model, tmp_path, embedder, [VET], 3, store=store, prices_file=prices,
                               max_cost=2.5)

    assert result.budget_stopped and "budget of $2.50 reached" in result.budget_message
    assert [s.name for s in result.kept] == [name("vet_appointments"), name("vet_pharmacy")]
    assert not result.stalled and "stopped by the budget" in result.summary()
    assert len(fake_model.requests) == 3

    again, _ = generate(fake_model, tmp_path, embedder, [VET], 3, store=store, prices_file=prices, max_cost=100)
    assert not again.budget_stopped and len(again.kept) == 3
    assert len(user_prompts(fake_model, "expand")) == 2  # round 1 was not asked again


def _cli_script(fake_model) -> None:
    fake_model.script.add("expand", "veterinary_clinic", batch("vet_appointments", "live_wildlife"),
                          batch("vet_pharmacy"))
    fake_model.script.add("expand", "public_library", batch("library_circulation"), batch("library_rooms"),
                          batch("library_ill"))
    fake_model.script.add("classify", "live_wildlife*", NOT_CRUD)
    fake_model.script.add("classify", "*", CRUD_OK)


def test_cli_writes_scenarios_and_rejections_and_dedups_against_the_output_folder(fake_model, tmp_path, embedder,
                                                                                  monkeypatch):
    from synth.cli import app

    for key, value in DEDUP.items():
        monkeypatch.setenv(f"SYNTH_{key.upper()}", str(value))
    _cli_script(fake_model)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# two seeds\nveterinary clinic | clinics for pets and farm animals | healthcare\n"
                     "public library | lending libraries | education\n")
    out = tmp_path / "gen" / "scenarios.jsonl"
    out.parent.mkdir()
    earlier = dict(DRAFTS["library_circulation"], seed="public library")
    (out.parent / "scenarios_earlier.jsonl").write_text(json.dumps(earlier) + "\n")
    fake_model.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}), repeat_last=True)
    args = ["scenarios", "--seeds", str(seeds), "-n", "4", "--model", "openai/test-model",
            "--base-url", fake_model.openai_base_url, "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
            "--out-dir", str(tmp_path / "state")]

    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert run.stderr.startswith("model check: openai/test-model answers")  # checked before any stage
    assert run.stdout.splitlines()[0] == "candidates 6 / crud-able 5 / unique 4 / rejected 2"
    kept = [Scenario.model_validate_json(line) for line in out.read_text().splitlines()]
    assert [s.name for s in kept] == [name(k) for k in ("vet_appointments", "vet_pharmacy", "library_rooms",
                                                          "library_ill")]
    rejected = [json.loads(line) for line in out.with_suffix(".rejected.jsonl").read_text().splitlines()]
    by_name = {r["scenario"]["name"]: r for r in rejected}
    assert by_name[name("live_wildlife")]["stage"] == "classify"
    assert "live video feeds" in by_name[name("live_wildlife")]["reason"]
    assert by_name[name("library_circulation")]["stage"] == "dedup"
    assert by_name[name("library_circulation")]["nearest"] == name("library_circulation")
    # The run's state goes to the output folder (--out-dir), not next to the scenarios file.
    assert list((tmp_path / "state" / "runs").iterdir()) and not (out.parent / "runs").exists()

    before = len(fake_model.requests)
    rerun = CliRunner().invoke(app, args)  # same command: resumes, its own output is not "existing"
    assert rerun.exit_code == 0, rerun.output
    assert [r.stage for r in fake_model.requests[before:]] == ["ping"]  # only the model check
    assert [Scenario.model_validate_json(line) for line in out.read_text().splitlines()] == kept


def test_cli_missing_seed_file_is_a_one_line_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "synth", "scenarios", "--seeds", str(tmp_path / "nope.txt"), "-n", "3",
         "--model", "openai/test-model", "--out", str(tmp_path / "s.jsonl")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {tmp_path / 'nope.txt'}: seed file not found"]
