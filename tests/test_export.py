"""`synth export sft` from trajectories and `synth export verifiers`.

sft rows come from real rollouts against the fake model; the verifiers package is
installed with verifiers==0.4.0 into a separate virtualenv, loaded there, and run
with `vf-eval` exactly as its README says against the fake model server (slow).
verl, AWM and gold SFT have test files of their own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envkit import GOLD_ANSWERS, TASKS, TOOLS, make_library_env
from fake_server import FakeModelServer
from sse_relay import SseRelay
from synth.config import Settings
from synth.errors import InputError
from synth.llm import Gateway
from synth.llm.script import Reply, ToolCall
from synth.use.export import export
from synth.use.rollout import rollout_async
from synth.use.server import background

GOLD = {t.task_id: t for t in TASKS}


@pytest.fixture(scope="module")
def env_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("export")
    make_library_env(root / "envs")
    return root


# --------------------------------------------------------------------------- sft


def gold_player(info):
    task_id = info.subject.split("/", 1)[1]
    gold, done = GOLD[task_id].gold, len(info.tool_results)
    if task_id == "task_04":  # this one plays badly: no tool call at all
        return Reply(text="I could not do it.")
    if done < len(gold):
        return Reply(tool_calls=[ToolCall(name=gold[done].tool, arguments=dict(gold[done].arguments))])
    return Reply(text=GOLD_ANSWERS[task_id] or "Done.")


@pytest.fixture
def trajectories(fake_model, env_root: Path, tmp_path: Path) -> Path:
    fake_model.script.add("rollout", "*", handler=gold_player)
    gateway = Gateway(Settings(model="openai/test-model", base_url=fake_model.openai_base_url,
                               cache_dir=tmp_path / "cache", retry_base_delay=0.01))
    out = tmp_path / "runs" / "traj.jsonl"
    summary = asyncio.run(rollout_async(env_root, gateway, out, window=1))
    assert summary.passed == 3 and summary.written == 4
    return out


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sft_rows_keep_passed_trajectories_with_tools(trajectories: Path, tmp_path: Path):
    report = export("sft", trajectories, tmp_path / "sft.jsonl")
    assert "3 rows" in report and "1 not passed" in report
    rows = read_jsonl(tmp_path / "sft.jsonl")
    assert sorted(r["task_id"] for r in rows) == ["task_01", "task_02", "task_03"]
    row = next(r for r in rows if r["task_id"] == "task_02")
    assert set(row) == {"messages", "tools", "env_id", "task_id", "reward", "tokens"} and row["reward"] == 1.0
    assert [t["function"]["name"] for t in row["tools"]] == [t.name for t in TOOLS]
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    call = row["messages"][6]["tool_calls"][0]
    assert call["type"] == "function" and call["function"] == {"name": "checkout_book",
                                                               "arguments": {"member_id": 2, "book_id": 3}}
    tool_msg = row["messages"][7]
    assert tool_msg["tool_call_id"] == call["id"] and tool_msg["name"] == "checkout_book"
    assert json.loads(tool_msg["content"])["title"] == "Dune"
    assert all(isinstance(m["content"], str) for m in row["messages"])

    # folder input (the windowed samples beside it are not trajectories), JSON-string arguments, all rows
    export("sft", trajectories.parent, tmp_path / "all.jsonl", include_failed=True, arguments="json")
    every = read_jsonl(tmp_path / "all.jsonl")
    assert len(every) == 4
    strings = [c["function"]["arguments"] for r in every for m in r["messages"] for c in m.get("tool_calls", [])]
    assert strings and all(isinstance(a, str) and isinstance(json.loads(a), dict) for a in strings)


def test_sft_input_errors(tmp_path: Path, env_root: Path):
    with pytest.raises(InputError, match="no trajectories"):
        export("sft", tmp_path / "missing.jsonl", tmp_path / "o.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(InputError, match="bad.jsonl:1: not a trajectory"):
        export("sft", bad, tmp_path / "o.jsonl")
    with pytest.raises(InputError, match="unknown export format"):
        export("csv", env_root, tmp_path / "o")


# --------------------------------------------------------------------------- verifiers


def test_verifiers_package_layout(env_root: Path, tmp_path: Path):
    out = tmp_path / "pkg"
    report = export("verifiers", env_root, out, name="city-tasks", server_url="http://h:9")
    assert "module city_tasks" in report
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert files == ["README.md", "city_tasks/__init__.py", "city_tasks/common.py", "city_tasks/tasks.jsonl",
                     "city_tasks/taskset.py", "city_tasks/toolset.py", "pyproject.toml"]
    for py in (out / "city_tasks").glob("*.py"):
        compile(py.read_text(), str(py), "exec")
    rows = read_jsonl(out / "city_tasks" / "tasks.jsonl")
    assert [(r["task_id"], r["split"]) for r in rows] == [("task_01", "train"), ("task_02", "train"),
                                                          ("task_03", "train"), ("task_04", "test")]
    assert rows[0]["system_prompt"].startswith("You are an assistant")
    assert rows[0]["instruction"] == TASKS[0].instruction
    assert 'name = "city-tasks"' in (out / "pyproject.toml").read_text()
    with pytest.raises(InputError, match="--name"):
        export("verifiers", env_root, out, name="Bad Name")


VERIFIERS_CHECK = textwrap.dedent('''
    """Run inside a virtualenv holding verifiers==0.4.0 and the exported package."""
    import asyncio, json, sys
    from importlib.metadata import version
    from types import SimpleNamespace

    import httpx
    import verifiers
    import verifiers.v1 as vf

    module_name, taskset_id, url = sys.argv[1], sys.argv[2], sys.argv[3]
    package = __import__(module_name)
    out = {"verifiers": verifiers.__version__, "mcp": version("mcp")}
    env = vf.load_environment(vf.resolve_env_config({"taskset": {"id": taskset_id, "task": {"server_url": url}}}))
    tasks = list(env.taskset)
    out["harnesses"] = sorted(type(h).__name__ for h in env._harnesses.values())
    out["tasks"] = [t.key for t in tasks]
    out["train"] = len(list(package.load_environment(server_url=url, split="train").taskset))
    task = next(t for t in tasks if t.data.task_id == "task_02")
    out["prompt"] = task.data.prompt
    (toolset,) = task.toolsets(task.config)

    def trace_of(state):
        trace = SimpleNamespace(state=state, last_reply="Dune is checked out to you.", info={}, metrics={})
        trace.record_metrics = trace.metrics.update
        return trace

    async def play():
        from mcp.server.mcpserver import MCPServer
        await toolset.setup_task(task.data)
        server = MCPServer("synth-check")
        toolset.register(server)
        listed = await server.list_tools()
        called = await server.call_tool("checkout_book", {"member_id": 2, "book_id": 3})
        trace = trace_of(package.SynthState(episode_id=toolset.episode_id))
        reward = await task.synth_reward(trace)
        idle = await task.synth_reward(trace_of(package.SynthState()))
        return listed, called, reward, trace.metrics, idle

    listed, called, reward, metrics, idle = asyncio.run(play())
    out.update(tools={t.name: t.input_schema for t in listed}, call=called.content[0].text, reward=reward,
               metrics=metrics, idle_reward=idle)

    async def mcp_client(episode_url):
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client
        async with streamable_http_client(episode_url) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                called = await session.call_tool("search_books", {"query": "Dune"})
                return json.loads(called.content[0].text)[0]["title"]

    created = httpx.post(f"{url}/envs/city_library/episodes", json={}).json()
    out["mcp_client_call"] = asyncio.run(mcp_client(created["mcp_url"]))
    print(json.dumps(out))
''')


def readme_command(readme: str, values: dict[str, str]) -> str:
    """The README's vf-eval block as a shell script, its `export X=...` lines set to `values`."""
    block = readme.split("<!-- vf-eval-command -->", 1)[1].split("<!-- /vf-eval-command -->", 1)[0]
    lines = [line for line in block.strip().splitlines() if not line.startswith("```")]
    out = []
    for line in lines:
        if line.startswith("export "):
            name = line.split()[1].split("=", 1)[0]
            line = f"export {name}={shlex.quote(values[name])}"
        out.append(line)
    return "\n".join(out) + "\n"


def play_gold(info):
    """The fake model plays each task's gold solution, then answers."""
    task = next(t for t in TASKS if t.instruction in info.prompt_text)
    done = len(info.tool_results)
    if done < len(task.gold):
        return Reply(tool_calls=[ToolCall(name=task.gold[done].tool, arguments=dict(task.gold[done].arguments))])
    return Reply(text=GOLD_ANSWERS[task.task_id] or "Done.")


@pytest.mark.slow
def test_verifiers_package_installs_loads_and_runs_vf_eval(env_root: Path, tmp_path: Path):
    pkg = tmp_path / "pkg"
    export("verifiers", env_root, pkg)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # what the exported README installs: the package (with verifiers) and uv
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "verifiers==0.4.0", str(pkg), "uv"], capture_output=True, text=True, timeout=900)
    if install.returncode != 0:
        errors = [line for line in install.stderr.splitlines() if line.startswith("ERROR")]
        pytest.skip(f"pip install verifiers==0.4.0 failed: {' | '.join(errors[-3:]) or install.stderr[-500:]}")
    script = tmp_path / "check.py"
    script.write_text(VERIFIERS_CHECK)
    srv, _ = background(env_root)
    with srv:
        done = subprocess.run([str(python), str(script), "synth_envs", "synth-envs", srv.url], capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["verifiers"] == "0.4.0" and out["mcp"] == "2.0.0"
        assert out["harnesses"] == ["SynthHarness"]
        assert out["tasks"] == [f"city_library/task_0{i}" for i in range(1, 5)] and out["train"] == 3
        assert out["prompt"] == GOLD["task_02"].instruction
        assert out["tools"] == {t.name: t.parameters for t in TOOLS}  # the portable schemas, as exported
        assert json.loads(out["call"])["title"] == "Dune"
        assert out["reward"] == 1.0 and out["idle_reward"] < 0.5  # a claim with nothing done earns little
        assert out["metrics"] == {f"check_{i}": 1.0 for i in range(7)}
        assert out["mcp_client_call"] == "Dune"  # mcp 2.0's client against synth serve's MCP endpoint

        # vf-eval with the command the exported README gives, against the fake model server
        # (behind a relay that streams, as verifiers' chat harness asks to)
        with FakeModelServer() as fake, SseRelay(fake.openai_base_url) as relay:
            fake.script.add("*", "*", handler=play_gold)
            command = readme_command((pkg / "README.md").read_text(), {
                "SYNTH_SERVER_URL": srv.url, "OPENAI_BASE_URL": relay.base_url, "OPENAI_API_KEY": "test",
                "MODEL": "fake-model"})
            env = {**os.environ, "PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
            run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=900)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    (traces_file,) = (tmp_path / "outputs").glob("*/traces.jsonl")
    traces = [t for line in traces_file.read_text().splitlines() for t in json.loads(line)["traces"]]
    scored = {t["task"]["data"]["id"]: (t["rewards"]["synth_reward"]["score"], t["metrics"]) for t in traces}
    assert sorted(scored) == [f"city_library/task_0{i}" for i in range(1, 5)]
    assert all(score == 1.0 for score, _ in scored.values()), scored
    assert set(scored["city_library/task_02"][1]) == set(out["metrics"])  # one metric per check, named by index
