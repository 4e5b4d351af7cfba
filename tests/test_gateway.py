"""The model gateway through the real openai and anthropic SDKs against the fake server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from pydantic import BaseModel

from synth.config import Settings
from synth.llm import BudgetExceeded, Gateway, ModelError, ReplayMiss, StructuredOutputError
from synth.llm.script import Reply, Script
from synth.pipeline.store import RunStore


class Answer(BaseModel):
    city: str
    population: int


GOOD = {"city": "Lyon", "population": 522000}
ASK = [{"role": "user", "content": "Name a French city and its population."}]


def make_gateway(server, tmp_path, provider="openai", **overrides) -> Gateway:
    base = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    values = dict(
        model=f"{provider}/test-model", base_url=base, cache_dir=tmp_path / "cache", retry_base_delay=0.01,
        timeout=5, temperature=0.0,
    )
    values.update(overrides)
    return Gateway(Settings(**values))


def prompt(subject: str) -> list[dict]:
    # The cache key is the request, not the subject: distinct subjects need distinct prompts.
    return [{"role": "user", "content": f"{ASK[0]['content']} ({subject})"}]


def ask(gateway: Gateway, subject: str = "lyon", **kw):
    return asyncio.run(gateway.structured(Answer, prompt(subject), stage="probe", subject=subject, **kw))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_repeated_call_is_served_from_cache(fake_model, tmp_path, provider):
    fake_model.script.add("probe", "*", Reply(json=GOOD))
    first = ask(make_gateway(fake_model, tmp_path, provider))
    again = make_gateway(fake_model, tmp_path, provider)  # a new process would look the same
    second = ask(again)
    assert first == second == Answer(**GOOD)
    assert len(fake_model.requests) == 1
    assert again.usage.total.cached == 1 and again.usage.total.cost == 0


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_429_then_200_waits_at_least_retry_after(fake_model, tmp_path, provider):
    fake_model.script.add("probe", "*", Reply(fault="429", retry_after=1), Reply(json=GOOD))
    gateway = make_gateway(fake_model, tmp_path, provider)
    started = time.monotonic()
    assert ask(gateway) == Answer(**GOOD)
    assert time.monotonic() - started >= 1.0
    assert len(fake_model.requests) == 2
    assert gateway.limiter.limit < gateway.limiter.max  # backed off after the 429


def test_500_is_retried(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(fault="500"), Reply(fault="500"), Reply(json=GOOD))
    assert ask(make_gateway(fake_model, tmp_path)) == Answer(**GOOD)
    assert len(fake_model.requests) == 3


def test_timeout_is_retried(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(fault="timeout", delay=3), Reply(json=GOOD))
    assert ask(make_gateway(fake_model, tmp_path, timeout=0.5)) == Answer(**GOOD)
    assert len(fake_model.requests) == 2


def test_retries_are_bounded(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(fault="503"))
    with pytest.raises(ModelError, match="gave up after 3 attempts"):
        ask(make_gateway(fake_model, tmp_path, max_attempts=3))
    assert len(fake_model.requests) == 3


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_400_fails_at_once_with_one_line(fake_model, tmp_path, provider):
    fake_model.script.add("probe", "*", Reply(fault="400"))
    with pytest.raises(ModelError) as info:
        ask(make_gateway(fake_model, tmp_path, provider))
    message = str(info.value)
    assert "\n" not in message
    assert f"{provider}/test-model" in message and "HTTP 400" in message
    assert len(fake_model.requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_malformed_answer_repaired_and_not_cached(fake_model, tmp_path, provider):
    broken = '{"city": "Lyon", "population": "many'
    fake_model.script.add("probe", "*", Reply(text=broken), Reply(text="```json\n" + json.dumps(GOOD) + "\n```"))
    gateway = make_gateway(fake_model, tmp_path, provider)
    assert ask(gateway) == Answer(**GOOD)
    assert len(fake_model.requests) == 2
    second_prompt = json.dumps(fake_model.requests[1].body)
    assert "problems" in second_prompt  # the validation error went back to the model
    stored = gateway.cache._store.db.execute("select response from responses").fetchall()
    assert stored and all("many" not in row[0] for row in stored)
    # a rerun is free: the validated answer also sits under the first turn's key
    ask(make_gateway(fake_model, tmp_path, provider))
    assert len(fake_model.requests) == 2


def test_schema_violation_repaired_then_gives_up(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(json={"city": "Lyon"}))  # missing population, forever
    gateway = make_gateway(fake_model, tmp_path, repair_turns=2)
    with pytest.raises(StructuredOutputError, match="population"):
        ask(gateway)
    assert len(fake_model.requests) == 3
    assert gateway.cache.stats()["entries"] == 0


def test_semantic_check_feeds_back(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(json={"city": "Atlantis", "population": 1}), Reply(json=GOOD))
    check = lambda a: [] if a.city != "Atlantis" else ["Atlantis is not a real city"]  # noqa: E731
    assert ask(make_gateway(fake_model, tmp_path), check=check) == Answer(**GOOD)
    assert "Atlantis is not a real city" in json.dumps(fake_model.requests[1].body)


def test_in_flight_never_exceeds_limit(fake_model, tmp_path):
    fake_model.script.add("probe", "*", Reply(json=GOOD, delay=0.05))
    gateway = make_gateway(fake_model, tmp_path, concurrency=4)

    async def many():
        return await asyncio.gather(*[
            gateway.structured(Answer, prompt(f"s{i}"), stage="probe", subject=f"s{i}") for i in range(50)
        ])

    assert len(asyncio.run(many())) == 50
    assert len(fake_model.requests) == 50
    assert fake_model.max_in_flight <= 4
    assert gateway.limiter.peak == 4  # the limit was actually used


def test_tokens_and_cost_recorded(fake_model, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/test-model": {"input": 1000.0, "output": 2000.0}}))
    fake_model.script.add("probe", "*", Reply(json=GOOD, prompt_tokens=100, completion_tokens=50))
    store = RunStore(tmp_path / "run")
    gateway = Gateway(Settings(model="openai/test-model", base_url=fake_model.openai_base_url,
                               cache_dir=tmp_path / "c", prices_file=prices), recorder=store)
    ask(gateway)
    assert gateway.usage.total.prompt_tokens == 100 and gateway.usage.total.completion_tokens == 50
    assert gateway.usage.total.cost == pytest.approx(0.2)  # 100*1000/1e6 + 50*2000/1e6
    usage = store.usage()
    assert usage["stages"]["probe"] == {"calls": 1, "cached": 0, "prompt_tokens": 100, "completion_tokens": 50,
                                        "cost": pytest.approx(0.2), "cached_tokens": 0, "reused_tokens": 0}


def test_each_env_has_its_own_usage_though_envs_share_the_gateway(fake_model, tmp_path):
    # Trial 3: three envs ran the tasks step at once and each reported the same 1.13M tokens (the gateway's
    # total over those minutes). A step's figures now come from its env's own totals.
    fake_model.script.add("probe", "*", Reply(json=GOOD, prompt_tokens=100, completion_tokens=50))
    gateway = make_gateway(fake_model, tmp_path)
    before = gateway.usage.env("harbor_works")
    ask(gateway, "harbor_works/task_01")
    ask(gateway, "other_env/task_01")
    ask(gateway, "harbor_works/task_01")  # from the cache: counted at its first cost, apart
    ask(gateway, "harbor_works")
    mine = gateway.usage.env("harbor_works")
    assert (mine.calls - before.calls, mine.cached, mine.prompt_tokens, mine.reused_tokens) == (3, 1, 200, 150)
    assert gateway.usage.env("other_env").calls == 1 and gateway.usage.env("nobody").calls == 0
    assert gateway.usage.total.calls == 4 and gateway.usage.total.reused_tokens == 150


def test_budget_stops_new_calls(fake_model, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"openai/*": {"input": 10000.0, "output": 0.0}}))
    fake_model.script.add("probe", "*", Reply(json=GOOD, prompt_tokens=100))  # $1 a call
    gateway = make_gateway(fake_model, tmp_path, prices_file=prices, max_cost=2.5)
    for i in range(3):
        ask(gateway, subject=f"s{i}")
    with pytest.raises(BudgetExceeded, match="budget of \\$2.50 reached"):
        ask(gateway, subject="s3")
    assert len(fake_model.requests) == 3
    ask(gateway, subject="s0")  # cached work is still served once the budget is spent


def test_replay_serves_recordings_and_misses_clearly(tmp_path):
    rec = tmp_path / "rec.json"
    Script().add("probe", "lyon", Reply(text="Sure! ```json\n" + json.dumps(GOOD) + "\n```")).dump(rec)
    gateway = Gateway(Settings(model="replay", replay_file=rec, cache_dir=tmp_path / "c"))
    assert ask(gateway) == Answer(**GOOD)
    with pytest.raises(ReplayMiss, match="no recorded response for stage='probe' subject='paris'"):
        ask(gateway, subject="paris")


def test_chat_returns_tool_calls(fake_model, tmp_path):
    from synth.llm.script import ToolCall

    fake_model.script.add("agent", "*", Reply(tool_calls=[ToolCall(name="find_book", arguments={"title": "Dune"})]))
    tools = [{"type": "function", "function": {"name": "find_book", "description": "Find a book",
                                               "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}}]
    for provider in ("openai", "anthropic"):
        gateway = make_gateway(fake_model, tmp_path / provider, provider)
        out = asyncio.run(gateway.chat(ASK, stage="agent", subject="t1", tools=tools))
        assert out.tool_calls[0].name == "find_book" and out.tool_calls[0].arguments == {"title": "Dune"}


def test_non_ascii_subject_travels(fake_model, tmp_path):
    fake_model.script.add("probe", "café*", Reply(json=GOOD))
    assert ask(make_gateway(fake_model, tmp_path), subject="café crème") == Answer(**GOOD)
    assert fake_model.requests[0].subject == "café crème"


def test_edited_recordings_are_not_shadowed_by_the_cache(tmp_path):
    rec = tmp_path / "rec.json"
    Script().add("probe", "lyon", Reply(json=GOOD)).dump(rec)
    settings = Settings(model="replay", replay_file=rec, cache_dir=tmp_path / "c")
    assert ask(Gateway(settings)) == Answer(**GOOD)
    Script().add("probe", "lyon", Reply(json={"city": "Lyon", "population": 1})).dump(rec)
    assert ask(Gateway(settings)).population == 1
