"""`synth serve` over the Open Reward Standard. The `openreward` package's own client
plays the library env from a venv of its own (openreward pins sse-starlette==2.3.6,
every mcp 2.x needs sse-starlette>=3, so it cannot sit next to synth): gold actions
earn 1.0, a wrong answer less, two sessions stay isolated, malformed calls get
errors and leave the session usable. The fast tests check the wire with httpx."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from envkit import TOOLS, served_library

LIBRARY = "city_library"
ORS_CLIENT = "openreward==0.1.167"  # the release this face was checked against
HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from served_library(tmp_path_factory, "ors")


@pytest.fixture
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def sse_events(response: httpx.Response) -> list[tuple[str, str]]:
    events, name = [], None
    for line in response.text.splitlines():
        if line.startswith("event:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("data:") and name:
            events.append((name, line.split(":", 1)[1].strip()))
    return events


def open_session(http: httpx.Client, **body) -> str:
    (_, sid), _ = sse_events(http.post("/create_session"))
    created = http.post("/create", headers={"X-Session-ID": sid, "X-Deployment": LIBRARY}, json=body)
    assert created.status_code == 200, created.text
    return sid


def call(http: httpx.Client, sid: str, name: str, arguments: dict) -> dict:
    response = http.post(f"/{LIBRARY}/call", headers={"X-Session-ID": sid}, json={"name": name, "input": arguments})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert [e for e, _ in events] == ["task_id", "end"]
    return json.loads(events[-1][1])


def test_listing_routes_with_a_prefix_or_the_deployment_header(http):
    assert http.get(f"/{LIBRARY}/splits").json() == [{"name": "train", "type": "train"},
                                                      {"name": "test", "type": "test"}]
    tasks = http.post("/tasks", headers={"X-Deployment": LIBRARY}, json={"split": "train"}).json()
    assert tasks["env_name"] == LIBRARY and [t["task_id"] for t in tasks["tasks"]] == ["task_01", "task_02", "task_03"]
    assert "gold" not in tasks["tasks"][0] and "expected_answer" not in tasks["tasks"][0]
    assert http.post("/tasks", json={"split": "test"}).json()["tasks"][0]["task_id"] == "task_04"  # the only env
    tools = http.get(f"/{LIBRARY}/tools").json()
    assert [t["name"] for t in tools["tools"]] == [t.name for t in TOOLS]
    assert tools["terminal_tool"] == {"name": "submit_answer", "arg": "answer",
                                      "description": tools["terminal_tool"]["description"]}
    assert http.get("/list_environments").json() == [LIBRARY]
    bad = [http.post(f"/{LIBRARY}/tasks", json={"split": "dev"}), http.post(f"/{LIBRARY}/task",
                                                                           json={"split": "train", "index": 7}),
           http.get("/atlantis/tools")]
    assert [r.status_code for r in bad] == [400, 400, 404]
    assert "Invalid split" in bad[0].json()["detail"] and "unknown env 'atlantis'" in bad[2].json()["detail"]


def test_a_session_on_the_wire(http, server):
    sid = open_session(http, task_spec={"task_id": "task_02"}, env_name=LIBRARY)
    assert http.post("/create", headers={"X-Session-ID": sid}, json={"split": "train", "index": 0}).status_code == 400
    prompt = http.get(f"/{LIBRARY}/prompt", headers={"X-Session-ID": sid}).json()
    assert prompt[0]["text"].startswith("This is Maya Patel")
    assert http.post("/ping", headers={"X-Session-ID": sid}).json() == {"status": "ok"}
    assert call(http, sid, "get_member", {"email": "maya.patel@example.com"})["output"]["reward"] is None
    assert call(http, sid, "fly", {})["reason"] == "not_found"
    assert call(http, sid, "checkout_book", {"member_id": 2})["reason"] == "input_validation"
    assert call(http, sid, "checkout_book", {"member_id": 2, "book_id": 3})["output"]["finished"] is False
    done = call(http, sid, "submit_answer", {"answer": "Dune is checked out to you."})
    assert done["output"]["reward"] == 1.0 and done["output"]["finished"] is True
    assert call(http, sid, "list_loans", {"member_id": 2})["reason"] == "episode_finished"
    assert server.app.state.registry.stats()["live"] >= 1
    http.post("/delete", headers={"X-Session-ID": sid})
    assert http.post("/ping", headers={"X-Session-ID": sid}).status_code == 404
    assert http.get(f"/{LIBRARY}/prompt").status_code == 400  # no X-Session-ID


def test_an_expired_episode_ends_its_session(http, server):
    sid = open_session(http, split="test", index=0)
    live = server.app.state.ors.sessions[sid].live
    http.delete(f"/episodes/{live.id}")  # gone by any route: REST, idle expiry, shutdown
    gone = http.get(f"/{LIBRARY}/task_tools", headers={"X-Session-ID": sid})
    assert gone.status_code == 410 and "Session deleted" in gone.json()["detail"]


def ors_python(tmp_path: Path) -> Path:
    """A Python with the openreward client: $SYNTH_TEST_ORS_PYTHON, else a fresh venv."""
    given = os.environ.get("SYNTH_TEST_ORS_PYTHON")
    if given:
        return Path(given)
    venv = tmp_path / "ors-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", ORS_CLIENT],
                             capture_output=True, text=True, timeout=900)
    if install.returncode != 0:
        errors = [line for line in install.stderr.splitlines() if line.startswith("ERROR")]
        pytest.skip(f"pip install {ORS_CLIENT} failed: {' | '.join(errors[-3:]) or install.stderr[-500:]}")
    return python


@pytest.mark.slow
def test_the_openreward_client_plays_the_env(server, tmp_path):
    python = ors_python(tmp_path)
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout  # openreward's own venv is consistent
    done = subprocess.run([str(python), str(HERE / "ors_client_check.py"), server.url, LIBRARY],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["splits"] == ["train", "test"] and out["train"] == ["task_01", "task_02", "task_03"]
    assert out["test"] == ["task_04"] and out["num_train"] == 3 and out["task_1"] == "task_02"
    assert out["range"] == ["task_01", "task_02"]
    assert out["env_tools"] == out["session_tools"] == [t.name for t in TOOLS] and out["terminal"] == "submit_answer"
    assert out["prompt"].startswith("This is Maya Patel") and out["final_by_message"] is True
    assert [role for role, _ in out["messages"]] == ["system", "user"]
    assert out["member"]["member_id"] == 2 and out["member_reward"] is None and out["member_finished"] is False
    # malformed calls: errors with ORS reasons, and the session went on
    assert [e[0] for e in out["errors"]] == ["not_found", "input_validation"]
    assert "'member_id' must be an integer" in out["errors"][1][1]
    assert "reserve it instead" in out["tool_error"] and out["loan"] == "Dune"
    assert out["other_loans"] == []  # the second session of the same task has its own database
    assert out["gold_reward"] == 1.0 and out["gold_finished"] is True
    assert out["gold_checks"][-1] == "all requirements met" and out["after_finish"] == "episode_finished"
    assert out["wrong_reward"] < 1.0 and out["wrong_finished"] is True
    assert len(out["parallel_rewards"]) == 3 and all(r < 1.0 for r in out["parallel_rewards"])
    assert server.app.state.registry.stats()["live"] == 0  # every session's episode was closed
