"""Output budgets: every stage asks for at most its budget, an answer cut off at the output cap is
detected on both wire formats and never parsed as a broken answer, and stages whose answers grow
with the env split their work until it fits: a 25-table data stage and a 40-tool code stage
complete against a fake model whose output is capped."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from fake_server import FakeModelServer
from synth.artifacts import Rules, Scenario, ToolParam, ToolSpec
from synth.config import Settings
from synth.folder.database import open_bytes, table_counts
from synth.folder.toolschema import params_to_schema
from synth.llm import Gateway
from synth.llm.budgets import STAGE_BUDGETS, output_budget
from synth.llm.errors import OutputTruncated
from synth.llm.replay import ReplayProvider
from synth.llm.script import Reply, Script, approx_tokens
from synth.pipeline.stages.build.data import generate_data
from synth.pipeline.stages.repair import StageReport
from synth.pipeline.stages.build.tool_code import generate_tool_code, tool_draft
from synth.pipeline.store import RunStore
from synth.runtime.sandbox import SandboxPool


class Answer(BaseModel):
    city: str
    population: int


GOOD = {"city": "Lyon", "population": 522000}
ASK = [{"role": "user", "content": "Name a French city and its population."}]


def gateway_for(server: FakeModelServer, tmp_path: Path, provider: str = "openai", recorder=None,
                **overrides) -> Gateway:
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    values = dict(model=f"{provider}/test-model", base_url=base, cache_dir=tmp_path / "cache",
                  retry_base_delay=0.01, timeout=10)
    values.update(overrides)
    return Gateway(Settings(**values), recorder=recorder)


def sent_max_tokens(request) -> int:
    body = request.body
    return body.get("max_tokens") or body.get("max_completion_tokens")


# --------------------------------------------------------------------------- the gateway


def test_each_stage_asks_for_its_own_budget_within_the_models_cap(fake_model, tmp_path):
    fake_model.script.add("*", "*", Reply(json=GOOD))
    gateway = gateway_for(fake_model, tmp_path, max_tokens=6000)
    for stage in ("classify", "check_judge", "data"):
        asyncio.run(gateway.structured(Answer, [{"role": "user", "content": stage}], stage=stage, subject="x"))
    asked = {r.stage: sent_max_tokens(r) for r in fake_model.requests}
    # classify and check_judge ask for their own budgets; data's is capped at 6000
    assert asked == {"classify": STAGE_BUDGETS["classify"], "check_judge": STAGE_BUDGETS["check_judge"], "data": 6000}
    assert output_budget("data", 6000) == 6000 and output_budget("classify", 100_000) == 512


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_cut_off_answer_is_asked_again_at_the_cap_never_fed_back_as_broken(fake_model, tmp_path, provider):
    cut = '{"city": "Ly'
    fake_model.script.add("probe", "*", Reply(text=cut, truncated=True), Reply(json=GOOD))
    store = RunStore(tmp_path / "run")
    gateway = gateway_for(fake_model, tmp_path, provider, recorder=store, max_tokens=8192)
    value = asyncio.run(gateway.structured(Answer, ASK, stage="probe", subject="s", max_tokens=1000))
    assert value == Answer(**GOOD)
    first, second = fake_model.requests
    assert sent_max_tokens(first) == 1000 and sent_max_tokens(second) == 8192
    # The cut answer was not shown to the model as a broken one: the second request is the first again.
    assert second.body["messages"] == first.body["messages"]
    statuses = [r["status"] for r in store._store.db["calls"].rows]
    assert statuses == ["truncated", "ok"]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_an_answer_cut_at_the_cap_raises_output_truncated_and_is_not_cached(fake_model, tmp_path, provider):
    fake_model.script.add("probe", "*", Reply(text='{"city": "Ly', truncated=True))
    gateway = gateway_for(fake_model, tmp_path, provider)
    with pytest.raises(OutputTruncated, match="cut off at the output cap of 512 tokens"):
        asyncio.run(gateway.structured(Answer, ASK, stage="probe", subject="s", max_tokens=512, grow=False))
    assert len(fake_model.requests) == 1
    fake_model.script.rules.clear()
    fake_model.script.add("probe", "*", Reply(json=GOOD))
    again = asyncio.run(gateway.structured(Answer, ASK, stage="probe", subject="s", max_tokens=512, grow=False))
    assert again == Answer(**GOOD) and len(fake_model.requests) == 2  # nothing was served from the cache


def test_the_fake_server_and_the_replay_provider_cut_answers_at_max_tokens(fake_model, tmp_path):
    long_text = json.dumps({"city": "x" * 4000, "population": 1})
    fake_model.script.add("probe", "*", Reply(text=long_text))
    gateway = gateway_for(fake_model, tmp_path)
    with pytest.raises(OutputTruncated):
        asyncio.run(gateway.structured(Answer, ASK, stage="probe", subject="s", max_tokens=300, grow=False))
    body = fake_model.requests[0]
    assert sent_max_tokens(body) == 300
    recording = tmp_path / "rec.json"
    Script().add("probe", "*", Reply(text=long_text)).dump(recording)
    replay = Gateway(Settings(model="replay", replay_file=recording, cache_dir=tmp_path / "c2"),
                     provider=ReplayProvider(recording))
    with pytest.raises(OutputTruncated):
        asyncio.run(replay.structured(Answer, ASK, stage="probe", subject="s", max_tokens=300, grow=False))


# --------------------------------------------------------------------------- a 25-table data stage

N_TABLES = 25
ROWS = 12


def _wide_schema() -> str:
    parts = []
    for i in range(1, N_TABLES + 1):
        parent = f", parent_id INTEGER NOT NULL REFERENCES t{i - 1:02d}(id)" if i > 1 else ""
        parts.append(f"CREATE TABLE t{i:02d} (id INTEGER PRIMARY KEY{parent}, name TEXT NOT NULL, city TEXT, "
                     "amount REAL NOT NULL CHECK (amount >= 0), note TEXT);")
    return "\n".join(parts)


def _rows_for(table: str) -> str:
    i = int(table[1:])
    values = []
    for r in range(1, ROWS + 1):
        parent = f", {((r - 1) % ROWS) + 1}" if i > 1 else ""
        values.append(f"({r}{parent}, 'Record {r} of {table}', 'Springfield', {r * 3.5:.2f}, "
                      f"'a realistic note about record {r} of table {table}, with the details a clerk keeps: who "
                      f"asked for it, when it was last checked, and what is still to be done before it closes')")
    cols = "id, parent_id, name, city, amount, note" if i > 1 else "id, name, city, amount, note"
    return f"INSERT INTO {table} ({cols}) VALUES\n " + ",\n ".join(values) + ";"


def _data_handler(info):
    tables = [f"t{i:02d}" for i in range(1, N_TABLES + 1)] if "/" not in info.subject \
        else info.subject.split("/", 1)[1].split("+")
    return Reply(json={"inserts": "\n".join(_rows_for(t) for t in tables)})


def test_a_25_table_data_stage_completes_under_a_capped_output(tmp_path):
    scenario = Scenario(name="Wide Records Office", description="A records office with many kinds of records.",
                        category="government")
    script = Script().add("data", "wide_records_office*", handler=_data_handler)
    cap = 2000
    assert approx_tokens(_rows_for("t02")) * N_TABLES > 5 * cap  # far more than one answer can hold
    with FakeModelServer(script, output_cap=cap) as fake:
        gateway = gateway_for(fake, tmp_path, max_tokens=4096)
        report = StageReport()
        result = asyncio.run(generate_data(scenario, [], _wide_schema(), gateway, rounds=1, report=report,
                                           rules=Rules(), today="2025-06-02"))
        requests = [r for r in fake.requests if r.stage == "data"]
    conn = open_bytes(result.db_bytes, readonly=True)
    try:
        assert table_counts(conn) == {f"t{i:02d}": ROWS for i in range(1, N_TABLES + 1)}
    finally:
        conn.close()
    # Planned groups: several tables per request, parents first; some answers were still cut at the
    # model's cap (finish "length") and asked again for half the tables each.
    groups = [r.subject.split("/", 1)[1].split("+") for r in requests]
    assert len(groups) > 2 and all(len(g) >= 1 for g in groups)
    assert [t for g in result.groups for t in g] == [f"t{i:02d}" for i in range(1, N_TABLES + 1)]
    assert any("cut off at the output cap" in n for n in report.notes)
    cut = [g for g in groups if g not in result.groups]
    assert cut and all(any(set(done) < set(g) for done in result.groups) for g in cut)


# --------------------------------------------------------------------------- a 40-tool code stage

N_TOOLS = 40


def _tool(i: int) -> ToolSpec:
    return ToolSpec(name=f"get_item_{i:02d}", description=f"Look up item {i}'s record by id; fails if there is none.",
                    read_only=True, parameters=params_to_schema([ToolParam(name="item_id", type="integer")]))


def _body(name: str) -> str:
    lines = [f"# {name}: a careful lookup with a clear refusal (line {k})" for k in range(12)]
    return "\n".join(lines + [
        'row = db.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()',
        "if row is None:",
        '    raise ToolError(f"no item with id {item_id}")',
        "return dict(row)",
    ])


def _code_handler(info):
    names = [f"get_item_{i:02d}" for i in range(1, N_TOOLS + 1)] if "/" not in info.subject \
        else info.subject.split("/", 1)[1].split("+")
    return Reply(json={"functions": [{"name": n, "body": _body(n)} for n in names]})


def test_a_40_tool_code_stage_completes_under_a_capped_output_on_anthropic(tmp_path):
    scenario = Scenario(name="Item Desk", description="Items looked up by id.", category="retail")
    schema = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"
    data = "INSERT INTO items (id, name) VALUES (1, 'lamp'), (2, 'desk');"
    tools = [_tool(i) for i in range(1, N_TOOLS + 1)]
    draft = tool_draft(scenario, [], schema, data, tools)
    from synth.folder.database import build_database

    script = Script().add("tool_code", "item_desk*", handler=_code_handler)
    cap = 1500
    with FakeModelServer(script, output_cap=cap) as fake, SandboxPool(workers=1, call_timeout=5) as pool:
        gateway = gateway_for(fake, tmp_path, "anthropic", max_tokens=4096)
        report = StageReport()
        bodies = asyncio.run(generate_tool_code(draft, build_database(schema, data), gateway, pool=pool, rounds=0,
                                                report=report))
        requests = [r for r in fake.requests if r.stage == "tool_code"]
    assert sorted(bodies) == sorted(t.name for t in tools) and report.passed
    assert all(p["outcome"] in ("ok", "tool_error") for p in report.details["probes"].values())
    sizes = [len(r.subject.split("/", 1)[1].split("+")) for r in requests]
    assert len(requests) > 2 and max(sizes) > 1  # batches sized to the budget, several tools each
    assert any("cut off at the output cap" in n for n in report.notes)  # stop_reason "max_tokens" was seen
    assert all(sent_max_tokens(r) <= 4096 for r in requests)
