"""`synth export`: every format checked against its consumer's contract.

sft rows come from real rollouts against the fake model; verl rows are read back
with pyarrow and the exported agent loop is run (against a stub of verl's
AgentLoopBase) on a live `synth serve`; the AWM files are loaded the way AWM
loaders do, in a subprocess, and solve a task; the verifiers package is
installed with verifiers==0.4.0 into a separate virtualenv and loaded there.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from envkit import GOLD_ANSWERS, TASKS, TOOLS, make_library_env
from synth.cli import app
from synth.config import Settings
from synth.errors import InputError
from synth.export import export
from synth.llm import Gateway
from synth.llm.script import Reply, ToolCall
from synth.rollout import rollout_async
from synth.server import background

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
    assert set(row) == {"messages", "tools", "env_id", "task_id", "reward"} and row["reward"] == 1.0
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


# --------------------------------------------------------------------------- awm

AWM_LOADER = textwrap.dedent('''
    """Load synth's AWM export the way AWM-format loaders do and play one task."""
    import json, re, sqlite3, shutil, sys
    from pathlib import Path
    from fastapi.testclient import TestClient

    data, work = Path(sys.argv[1]), Path(sys.argv[2])
    task_id, answer = sys.argv[3], (sys.argv[4] or None)
    calls = json.loads(sys.argv[5])
    def jsonl(name):
        return [json.loads(l) for l in (data / name).read_text().splitlines() if l.strip()]
    scenario = jsonl("gen_scenario.jsonl")[0]["name"]
    index = lambda name: {e["scenario"]: e for e in jsonl(name)}
    tasks = index("gen_tasks.jsonl")[scenario]
    task_idx = tasks["task_ids"].index(task_id)
    schema, sample = index("gen_db.jsonl")[scenario]["db_schema"], index("gen_sample.jsonl")[scenario]["sample_data"]
    spec, env = index("gen_spec.jsonl")[scenario]["api_spec"], index("gen_envs.jsonl")[scenario]
    verifier = {(v["scenario"], v["task_idx"]): v for v in jsonl("gen_verifier.pure_code.jsonl")}[(scenario, task_idx)]
    assert verifier["task"] == tasks["tasks"][task_idx]

    initial = work / "initial.db"
    conn = sqlite3.connect(initial)
    conn.execute("PRAGMA foreign_keys=ON")
    for table in schema["tables"]:
        conn.execute(table["ddl"])
        for ddl in table["indexes"]:
            conn.execute(ddl)
    for table in sample["tables"]:
        for stmt in table["insert_statements"]:
            conn.execute(stmt)
    conn.commit()
    conn.close()
    final = work / "final.db"
    shutil.copyfile(initial, final)
    assert sqlite3.connect(env["db_path"]).execute("select count(*) from loans").fetchone() == (10,)

    namespace = {"DATABASE_PATH": f"sqlite:///{final}"}
    code = re.sub(r'if\\s+__name__\\s*==\\s*["\\']__main__["\\'].*', "", env["full_code"], flags=re.DOTALL)
    exec(code, namespace)
    client = TestClient(namespace["app"])
    endpoints = {e["operation_id"]: e for g in spec["api_groups"] for e in g["endpoints"]}
    statuses = []
    for name, arguments in calls:
        ep = endpoints[name]
        assert all(p["param_type"] == "body" for p in ep["request_params"].values())
        statuses.append(client.request(ep["method"], ep["path"], json=arguments).status_code)
    ns = {}
    exec(verifier["verification"]["code"], ns)
    result = ns["verify_task_completion"](initial_db_path=str(initial), final_db_path=str(final), final_answer=answer)
    print(json.dumps({"statuses": statuses, "result": result["result"], "reward": result["reward"],
                      "openapi": sorted(client.get("/openapi.json").json()["paths"])}))
''')


def _awm_play(data: Path, work: Path, task_id: str, answer: str | None, calls: list) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    script = work / "loader.py"
    script.write_text(AWM_LOADER)
    # generated code runs in a child process, never in the test runner
    done = subprocess.run([sys.executable, str(script), str(data), str(work), task_id, answer or "",
                           json.dumps(calls)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_awm_files_load_and_solve_tasks(env_root: Path, tmp_path: Path):
    out = tmp_path / "awm"
    assert "4 task(s)" in export("awm", env_root, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["databases", "gen_db.jsonl", "gen_envs.jsonl", "gen_sample.jsonl", "gen_scenario.jsonl",
                     "gen_spec.jsonl", "gen_tasks.jsonl", "gen_verifier.jsonl", "gen_verifier.pure_code.jsonl"]
    (db,) = read_jsonl(out / "gen_db.jsonl")
    assert [t["name"] for t in db["db_schema"]["tables"]] == ["members", "books", "loans", "reservations"]
    assert db["db_schema"]["tables"][2]["indexes"] == ["CREATE INDEX idx_loans_member ON loans(member_id);"]
    (sample,) = read_jsonl(out / "gen_sample.jsonl")
    assert [t["table_name"] for t in sample["sample_data"]["tables"]] == ["members", "books", "loans", "reservations"]
    (spec,) = read_jsonl(out / "gen_spec.jsonl")
    endpoint = {e["operation_id"]: e for g in spec["api_spec"]["api_groups"] for e in g["endpoints"]}
    assert endpoint["checkout_book"]["request_params"]["days"] == {
        "type": "integer", "param_type": "body", "required": False, "description": "Loan period in days"}
    assert len(read_jsonl(out / "gen_verifier.jsonl")) == 4
    # AWM's launcher (awm.core.server) rewrites the one `uvicorn.run(app` line of the __main__ block
    # (4-space indent) to mount FastApiMCP, rewrites `create_engine(` lines, and sets DATABASE_PATH
    (env,) = read_jsonl(out / "gen_envs.jsonl")
    run_lines = [line for line in env["full_code"].splitlines() if "uvicorn.run(app" in line]
    assert len(run_lines) == 1 and run_lines[0].startswith("    uvicorn.run(app")
    assert "create_engine(" not in env["full_code"] and 'os.environ.get("DATABASE_PATH")' in env["full_code"]

    gold = [[c.tool, dict(c.arguments)] for c in GOLD["task_02"].gold]
    played = _awm_play(out, tmp_path / "w1", "task_02", None, gold)
    assert played["statuses"] == [200, 200, 200] and played["result"] == "complete" and played["reward"] == 1.0
    assert "/api/checkout_book" in played["openapi"]
    idle = _awm_play(out, tmp_path / "w2", "task_02", None, [])
    assert idle["result"] == "others" and idle["reward"] < 1.0
    refused = _awm_play(out, tmp_path / "w3", "task_04", None, [["checkout_book", {"member_id": 1, "book_id": 4}]])
    assert refused["statuses"] == [400] and refused["result"] == "others"
    read = _awm_play(out, tmp_path / "w4", "task_01", "There are 2 copies.", [["search_books", {"query": "Left"}]])
    assert read["result"] == "complete"


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
        trace = SimpleNamespace(state=state, last_reply="Done.", info={}, metrics={})
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


@pytest.mark.slow
def test_verifiers_package_installs_and_loads_with_verifiers_0_4(env_root: Path, tmp_path: Path):
    pkg = tmp_path / "pkg"
    export("verifiers", env_root, pkg)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "verifiers==0.4.0", str(pkg)], capture_output=True, text=True, timeout=900)
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
    assert out["reward"] == 1.0 and out["idle_reward"] == 0.0
    assert out["metrics"] == {"check_exactly_one_new_loan": 1.0, "check_loan_is_maya_dune": 1.0,
                              "check_loan_period_14_days": 1.0, "check_only_dune_copies_changed": 1.0}
    assert out["mcp_client_call"] == "Dune"  # mcp 2.0's client against synth serve's MCP endpoint
