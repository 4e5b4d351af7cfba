"""`synth export verl`: parquet rows in RLHFDataset's shape, and the exported agent loop
run the way verl's AgentLoopWorker runs it (tests/verl_interface.py) on a live `synth
serve`, with two small local chat tokenizers whose templates, like Llama 3.1's and recent
Qwen ones, need a user-role message; the lengths come from the exported README's command."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from envkit import TASKS, TOOLS
from exportkit import make_context_library
from synth.cli import app
from synth.use.agent import AgentContext, agent_messages
from synth.use.export import export
from synth.use.server import background
from verl_interface import ScriptedServer, readme_overrides, run_agent_loop, verl_config

TOKENIZERS = Path(__file__).parent / "data" / "tokenizers"
GOLD = {t.task_id: t for t in TASKS}
VERL_COLUMNS = {"data_source", "prompt", "ability", "agent_name", "reward_model", "extra_info"}


@pytest.fixture(scope="module")
def env_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("verl")
    make_context_library(root)
    return root


@pytest.fixture(scope="module")
def server(env_root: Path):
    srv, _ = background(env_root)
    with srv:
        yield srv


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TOKENIZERS / name)


def call(name: str, **arguments) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def rows_of(out: Path, split: str = "train") -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(out / f"{split}.parquet").to_pylist()


def test_parquet_follows_the_rlhf_dataset_contract(env_root: Path, tmp_path: Path):
    import pyarrow.parquet as pq
    import yaml

    out = tmp_path / "verl"
    result = CliRunner().invoke(app, ["export", "verl", str(env_root), "--out", str(out),
                                      "--server-url", "http://trainer-host:8000"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "agent_loop.yaml", "synth_agent_loop.py",
                                                      "test.parquet", "train.parquet"]
    train, test = pq.read_table(out / "train.parquet"), pq.read_table(out / "test.parquet")
    assert set(train.column_names) == VERL_COLUMNS and train.num_rows == 3 and test.num_rows == 1
    assert str(train.schema.field("prompt").type) == "list<element: struct<role: string, content: string>>"
    context = AgentContext.of_env(env_root / "envs" / "city_library")
    for index, row in enumerate(train.to_pylist()):
        task = GOLD[row["extra_info"]["task_id"]]
        assert row["data_source"] == "synth/city_library" and row["ability"] == "tool_use"
        assert row["agent_name"] == "synth_agent" and row["reward_model"]["style"] == "rule"
        assert row["prompt"] == agent_messages(context, task.instruction)  # the one system prompt builder
        truth = json.loads(row["reward_model"]["ground_truth"])
        assert truth["env_id"] == "city_library" and truth["task_id"] == task.task_id
        assert row["extra_info"] == {"split": "train", "index": index, "env_id": "city_library",
                                     "task_id": task.task_id, "probes": [], "template_id": None,
                                     "calibration": None}  # no report.json probes, no template, no calibration
    system = train.to_pylist()[0]["prompt"][0]["content"]
    assert "Today is 2025-06-02 (Monday)" in system and "acting for Maya Patel" in system
    assert test.to_pylist()[0]["extra_info"]["task_id"] == "task_04"
    assert yaml.safe_load((out / "agent_loop.yaml").read_text()) == [
        {"name": "synth_agent", "_target_": "synth_agent_loop.SynthAgentLoop"}]
    source = (out / "synth_agent_loop.py").read_text()
    compile(source, "synth_agent_loop.py", "exec")
    assert '"http://trainer-host:8000"' in source
    readme = (out / "README.md").read_text()
    assert "counted with Qwen3 (bundled)'s chat template" in result.output and "data.max_prompt_length=" in readme
    assert "pip install verl cachetools" in readme  # verl imports cachetools without declaring it


@pytest.mark.parametrize("tokenizer_name", ["llama_style", "qwen_style"])
def test_agent_loop_with_templates_that_need_a_user_prefix(tokenizer_name, env_root, server, tmp_path, monkeypatch):
    tokenizer = load_tokenizer(tokenizer_name)
    with pytest.raises(Exception):  # the template refuses the message-less prefix older loops rendered
        tokenizer.apply_chat_template([{}], tokenize=False)
    out = tmp_path / "verl"
    report = export("verl", env_root, out, tokenizer=str(TOKENIZERS / tokenizer_name), max_turns=6)
    assert "warning" not in report and f"counted with {TOKENIZERS / tokenizer_name}" in report
    overrides = readme_overrides((out / "README.md").read_text())
    config = verl_config(overrides + ["data.apply_chat_template_kwargs.enable_thinking=false"])
    assert config.actor_rollout_ref.rollout.prompt_length == config.data.max_prompt_length > 512
    assert config.actor_rollout_ref.rollout.multi_turn.max_tool_response_length > 256
    monkeypatch.setenv("SYNTH_SERVER_URL", server.url)

    row = next(r for r in rows_of(out) if r["extra_info"]["task_id"] == "task_02")
    replies = [call("get_member", email="maya.patel@example.com"), call("search_books", query="Dune"),
               "Checking it out now." + call("checkout_book", member_id=2, book_id=3), "Dune is yours for 14 days."]
    scripted = ScriptedServer(tokenizer, replies)
    output = asyncio.run(run_agent_loop(out, config, tokenizer, scripted, row, monkeypatch))

    assert output.reward_score == 1.0 and output.extra_fields["synth_passed"] is True
    assert output.extra_fields["synth_checks"] == {f"check_{i}": 1.0 for i in range(7)}
    assert output.num_turns == 1 + 4 + 3
    # the whole prompt, system prompt and every tool schema included, as the template renders it
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                               "parameters": t.parameters}} for t in TOOLS]
    full = tokenizer.apply_chat_template(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=False,
                                         enable_thinking=False)
    assert output.prompt_ids == tokenizer.encode(full, add_special_tokens=False)
    assert len(output.prompt_ids) <= config.data.max_prompt_length
    prompt_text = tokenizer.decode(output.prompt_ids, skip_special_tokens=False)
    assert "You are an assistant working inside" in prompt_text and "reserve_book" in prompt_text
    generated = [t for t, m in zip(output.response_ids, output.response_mask) if m == 1]
    assert tokenizer.decode(generated, skip_special_tokens=False) == "".join(r + tokenizer.eos_token for r in replies)
    observed = tokenizer.decode([t for t, m in zip(output.response_ids, output.response_mask) if m == 0],
                                skip_special_tokens=False)
    assert "Maya Patel" in observed and '"title": "Dune"' in observed
    assert "You are a helpful assistant" not in observed and "Environment: test" not in observed
    # each later turn continues the same token sequence
    assert scripted.prompts[1] == output.prompt_ids + output.response_ids[:len(scripted.prompts[1]) - len(
        output.prompt_ids)]
    if tokenizer_name == "qwen_style":  # apply_chat_template_kwargs reach every render
        assert observed.count("<think>") == 3
    assert httpx.get(f"{server.url}/health").json()["episodes"]["live"] == 0  # the loop closed its episode


def test_multi_turn_limits_are_honoured(env_root, server, tmp_path, monkeypatch):
    tokenizer = load_tokenizer("qwen_style")
    out = tmp_path / "verl"
    export("verl", env_root, out, tokenizer=str(TOKENIZERS / "qwen_style"))
    overrides = readme_overrides((out / "README.md").read_text()) + [
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1",
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=40",
        "actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=left",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2"]
    config = verl_config(overrides)
    monkeypatch.setenv("SYNTH_SERVER_URL", server.url)
    row = next(r for r in rows_of(out) if r["extra_info"]["task_id"] == "task_02")
    replies = [call("search_books", query="Dune") + call("get_member", email="maya.patel@example.com"),
               call("checkout_book", member_id=2, book_id=3), "never asked"]
    scripted = ScriptedServer(tokenizer, replies)
    output = asyncio.run(run_agent_loop(out, config, tokenizer, scripted, row, monkeypatch))
    observed = tokenizer.decode([t for t, m in zip(output.response_ids, output.response_mask) if m == 0],
                                skip_special_tokens=False)
    assert "...(truncated)" in observed  # the search result cut to 40 characters, left side kept
    assert "not run: at most 1 tool call(s) are run per turn" in observed
    assert len(scripted.prompts) == 2 and output.num_turns == 1 + 2 + 1  # stopped after 2 assistant turns
    assert output.reward_score < 1.0  # the checkout was never run


def test_prompt_longer_than_the_written_length_warns_and_never_truncates(env_root, server, tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "verl"
    result = CliRunner().invoke(app, ["export", "verl", str(env_root), "--out", str(out), "--tokenizer",
                                      str(TOKENIZERS / "llama_style"), "--max-prompt-length", "300",
                                      "--max-response-length", "2048"])
    assert result.exit_code == 0, result.output
    assert "warning: 4 prompt(s) are longer than --max-prompt-length 300" in result.output
    readme = (out / "README.md").read_text()
    assert "data.max_prompt_length=300" in readme and "data.max_response_length=2048" in readme
    assert "**Warning:** 4 prompt(s) are longer than 300 tokens" in readme

    tokenizer = load_tokenizer("llama_style")
    config = verl_config(readme_overrides(readme))
    monkeypatch.setenv("SYNTH_SERVER_URL", server.url)
    row = rows_of(out)[0]
    with pytest.raises(ValueError, match=r"over actor_rollout_ref.rollout.prompt_length=300; set "
                                         r"data.max_prompt_length to at least \d+"):
        asyncio.run(run_agent_loop(out, config, tokenizer, ScriptedServer(tokenizer, ["hi"]), row, monkeypatch))
    assert httpx.get(f"{server.url}/health").json()["episodes"]["live"] == 0


def test_bad_tokenizer_is_a_clear_error(env_root, tmp_path):
    result = CliRunner().invoke(app, ["export", "verl", str(env_root), "--out", str(tmp_path / "o"),
                                      "--tokenizer", str(tmp_path / "nowhere")])
    assert result.exit_code != 0
    assert "--tokenizer" in str(result.exception) + result.output


def test_hermes_parser():
    from synth.pipeline.prompts import render_template

    source = render_template("export", "verl/synth_agent_loop.py.j2", server_url="http://x", max_turns=3,
                             synth_version="t", agent_name="synth_agent")
    namespace: dict = {"__file__": "synth_agent_loop.py", "__name__": "synth_agent_loop"}
    head = source.split("@register(")[0].replace(
        "from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register\n", "")
    exec(compile(head, "synth_agent_loop.py", "exec"), namespace)
    parse = namespace["parse_tool_calls"]
    assert parse('hi <tool_call>{"name": "x", "arguments": {"a": 1}}</tool_call>') == (
        "hi", [{"name": "x", "arguments": {"a": 1}}])
    assert parse("<tool_call>{oops</tool_call>")[1] == [{"name": None, "arguments": "{oops"}]
    assert namespace["truncate"]("abcdefghij", 4, "middle") == "ab...(truncated)...ij"
