"""Grounded and cheaper prompts: the env's shared context (today, the signed-in user, the schema,
the rules, the tools) comes first and byte-identical across an env's calls, so provider prompt
caching applies and cached tokens are recorded and priced; the expand prompt lists what is taken;
data shown to a model is cut by rows; gold sees only the tables and tools its tasks touch; agents
are told today's date and who they act for."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import buildkit as bk
from envkit import make_library_env
from synth.artifacts import ActingUser, Scenario, Seed, Task
from synth.config import Settings
from synth.folder.database import build_database
from synth.folder.format import read_env_draft, write_env
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.llm.usage import PriceTable
from synth.pipeline.build import build_env
from synth.pipeline.stages.envcontext import EnvContext, data_dump, sample_rows
from synth.pipeline.stages.scenarios.expand import SeedProgress, expand_messages
from synth.pipeline.stages.check.gold_scope import gold_messages
from synth.pipeline.store import RunStore
from synth.runtime.sandbox import SandboxPool
from synth.use.rollout import rollout_async

ENV_STAGES_AFTER_DATA = ("tool_spec", "tool_code")


@pytest.fixture
def pool():
    with SandboxPool(workers=1, call_timeout=5) as p:
        yield p


def built_vet(fake_model, tmp_path: Path, pool, provider: str = "openai", prices: Path | None = None):
    bk.script_build(fake_model.script)
    base = fake_model.openai_base_url if provider == "openai" else fake_model.anthropic_base_url
    settings = Settings(model=f"{provider}/test-model", base_url=base, cache_dir=tmp_path / "cache",
                        retry_base_delay=0.01, out=tmp_path / "out", prices_file=prices)
    store = RunStore(tmp_path / "run")
    gateway = Gateway(settings, recorder=store)
    result = asyncio.run(build_env(bk.SCENARIO, gateway, settings, settings.out, pool=pool))
    assert result.status == "built", result.reason
    return result, gateway, store


def system_of(request) -> str:
    body = request.body
    if "system" in body:
        return "".join(b["text"] for b in body["system"])
    return next(m["content"] for m in body["messages"] if m["role"] == "system")


def test_today_and_the_signed_in_user_are_in_the_env_and_every_later_prompt(fake_model, tmp_path, pool):
    result, _, _ = built_vet(fake_model, tmp_path, pool)
    manifest = json.loads((result.path / "env.json").read_text())
    assert manifest["today"] == "2025-06-02"
    assert manifest["acting_user"] == {"table": "veterinarians", "id": 1, "name": "Dr. Hannah Reed",
                                       "role": "veterinarian"}
    rules = json.loads((result.path / "rules.json").read_text())
    assert [t["table"] for t in rules["transitions"]] == ["appointments", "invoices"]
    data = [r for r in fake_model.requests if r.stage == "data"][0]
    assert "Current date: 2025-06-02 (Monday)" in system_of(data)
    assert 'Give its id as "acting_user_id"' in data.body["messages"][-1]["content"]
    later = [r for r in fake_model.requests if r.stage in ENV_STAGES_AFTER_DATA]
    assert later and all("Signed-in user: Dr. Hannah Reed, veterinarian (row 1 of table veterinarians)"
                         in system_of(r) and "Current date: 2025-06-02 (Monday)" in system_of(r) for r in later)
    # The shared context leads and is byte-identical across the calls that share it.
    code = [system_of(r) for r in fake_model.requests if r.stage == "tool_code"]
    assert len(set(code)) == 1 and "invoice_total_matches_treatments" in code[0] and "book_appointment(" in code[0]
    assert all(r.body["messages"][0]["role"] == "system" for r in later)


def test_agents_are_told_today_and_who_they_act_for(fake_model, tmp_path):
    env = make_library_env(tmp_path / "gen" / "envs")
    draft = read_env_draft(env)
    draft.acting_user = ActingUser(table="members", id=1, name="Ana Souza", role="front-desk volunteer")
    write_env(draft, env)
    fake_model.script.add("rollout", "*", Reply(text="Nothing to do."))
    gateway = Gateway(Settings(model="openai/test-model", base_url=fake_model.openai_base_url,
                               cache_dir=tmp_path / "cache", retry_base_delay=0.01))
    asyncio.run(rollout_async(tmp_path / "gen", gateway, tmp_path / "t.jsonl", concurrency=1, max_turns=1))
    system = fake_model.requests[0].body["messages"][0]["content"]
    assert "Today is 2025-06-02 (Monday)" in system
    assert "You are acting for Ana Souza, front-desk volunteer (record 1 of the members table)" in system


def test_provider_prompt_caching_is_recorded_and_priced_openai(fake_model, tmp_path, pool):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/*": {"input": 10.0, "cached_input": 1.0, "output": 0.0}}))
    _, gateway, store = built_vet(fake_model, tmp_path, pool, prices=prices)
    calls = list(store._store.db["calls"].rows)
    cached = [c for c in calls if c["cached_tokens"]]
    assert cached and all(c["stage"] in ENV_STAGES_AFTER_DATA + ("data",) for c in cached)
    total = gateway.usage.total
    assert total.cached_tokens == sum(c["cached_tokens"] for c in calls) == store.usage()["total"]["cached_tokens"]
    expected = (total.prompt_tokens - total.cached_tokens) * 10.0 / 1e6 + total.cached_tokens * 1.0 / 1e6
    assert total.cost == pytest.approx(expected)
    assert total.cost < total.prompt_tokens * 10.0 / 1e6


def test_anthropic_requests_mark_the_shared_context_for_caching(fake_model, tmp_path, pool):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"anthropic/*": {"input": 3.0, "cached_input": 0.3, "cache_write": 3.75,
                                                  "output": 15.0}}))
    result, gateway, _ = built_vet(fake_model, tmp_path, pool, provider="anthropic", prices=prices)
    later = [r for r in fake_model.requests if r.stage in ENV_STAGES_AFTER_DATA]
    assert all(r.body["system"][-1]["cache_control"] == {"type": "ephemeral"} for r in later)
    # Two gold calls of the env: the second reads tools + the shared context from the provider's cache.
    from synth.artifacts import GoldAnswer

    draft = read_env_draft(result.path)
    db = build_database(draft.schema_sql, draft.data_sql)
    context = EnvContext.of(draft)
    fake_model.script.add("gold", "*", Reply(json={"actions": [{"tool": "find_owners", "arguments": {"name": "x"}}],
                                                   "expected_answer": "x", "verifier_body": "return []"}))
    before = gateway.usage.total.cached_tokens
    for task in draft.tasks[:2]:
        asyncio.run(gateway.structured(GoldAnswer, gold_messages(context, draft, db, [task]), stage="gold",
                                       subject=f"{draft.env_id}/{task.task_id}"))
    assert gateway.usage.total.cached_tokens - before >= len(context.system()) // 4 - 50
    assert PriceTable.load(prices).cost("anthropic/x", 1000, 0, cached_tokens=600, cache_write_tokens=400) == \
        pytest.approx((600 * 0.3 + 400 * 3.75) / 1e6)


def test_expand_lists_the_scenarios_taken_with_one_line_or_none():
    seed = Seed(name="public library", description="catalogue and loans", category="education")
    fresh = expand_messages(SeedProgress(seed=seed, index=0, target=3), 1, pool=[], count=3)
    assert "already taken" not in " ".join(m["content"] for m in fresh)
    kept = Scenario(name="Maple Street Library", category="education", seed="public library",
                    description="Maple Street Library runs the loans desk of a small town. It keeps members and books.")
    taken = expand_messages(SeedProgress(seed=seed, index=0, target=3), 2, pool=[kept], count=3)
    text = " ".join(m["content"] for m in taken)
    assert "- Maple Street Library: Maple Street Library runs the loans desk of a small town." in text
    assert "listed below as already taken" in taken[0]["content"]


def test_data_shown_to_models_is_cut_by_rows_and_every_table_is_represented():
    schema = "\n".join(f"CREATE TABLE t{i} (id INTEGER PRIMARY KEY, text TEXT);" for i in range(6))
    rows = "\n".join(f"INSERT INTO t{i} (id, text) VALUES " + ", ".join(f"({r}, '{'word ' * 40}{r}')"
                                                                        for r in range(1, 31)) + ";" for i in range(6))
    db = build_database(schema, rows)
    samples = sample_rows(db, per_table=3, limit=3000)
    lines = samples.splitlines()
    assert [line.split(" ")[0] for line in lines] == [f"t{i}" for i in range(6)]
    assert all(json.loads(line.split(": ", 1)[1]) for line in lines)  # every line is whole JSON
    dump = data_dump(db, rows=40, limit=4000)
    assert all(f"t{i} (30 rows)" in dump for i in range(6)) and "more rows not shown" in dump
    assert len(dump) < 6000
    only = data_dump(db, ["t1"])
    assert "t0 (30 rows): id | text  (rows not shown here)" in only and "  1 | word" in only


def test_gold_sees_only_the_tables_and_tools_its_task_touches():
    from synth.artifacts import ToolSpecAnswer
    from synth.folder.format import EnvDraft
    from synth.pipeline.stages.build.tool_spec import to_tool_specs

    tools = to_tool_specs(ToolSpecAnswer.model_validate(bk.tool_spec_answer()))
    draft = EnvDraft(env_id=bk.ENV_ID, title=bk.SCENARIO.name, scenario=bk.SCENARIO, schema_sql=bk.SCHEMA_SQL,
                     data_sql=bk.DATA_SQL, tools=tools, tool_bodies=bk.TOOL_BODIES)
    db = build_database(bk.SCHEMA_SQL, bk.DATA_SQL)
    context = EnvContext.of(draft)
    read = Task(task_id="task_01", kind="read", difficulty="easy",
                instruction="What phone number do we have on file for Daniel Okafor?")
    [system, user] = gold_messages(context, draft, db, [read])
    prompt = user["content"]
    assert "Daniel Okafor" in prompt and "invoices (4 rows)" in prompt
    assert "invoices (4 rows): id | appointment_id | total | status | issued_on | paid_on | payment_method  (rows " \
           "not shown here)" in prompt
    assert "def find_owners(" not in prompt and "def book_appointment(" not in prompt  # a read task needs no code
    assert "find_owners(" in system["content"]  # every tool is listed in the shared context
    write = Task(task_id="task_03", kind="write", difficulty="easy",
                 instruction="Please cancel appointment #8, Coco's nail trim on 2025-06-10.")
    prompt = gold_messages(context, draft, db, [write])[1]["content"]
    assert "def cancel_appointment(" in prompt and "def pay_invoice(" not in prompt and "def add_pet(" not in prompt
