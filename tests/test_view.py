"""`synth view` over HTTP (no browser): the pages, what they read from disk, replay and
Try it through the sandbox, review decisions and what export and serve do with them,
and the Host/Origin checks. The Chromium tests are in test_view_browser.py."""

from __future__ import annotations

import json
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from viewkit import (COWORK, LIBRARY, VET, add_broken_envs, add_review_history, demo_output, run_dir,
                     tool_source)

from synth_validators import GATE_NAMES
from synth.view.app import create_app
from synth.view.forms import form_arguments, form_fields
from synth.view.sources import resolve

ORIGIN = {"origin": "http://127.0.0.1"}


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = demo_output(tmp_path_factory, tmp_path_factory.mktemp("view") / "generated")
    add_review_history(out / "envs" / LIBRARY)
    add_broken_envs(out / "envs")
    return out


@pytest.fixture(scope="module")
def client(out: Path):
    with TestClient(create_app(resolve([out])), base_url="http://127.0.0.1") as c:
        yield c


def rows_of(html: str) -> list[str]:
    return re.findall(r'<tr class="[^"]*" data-env="([^"]+)"', html)


# ---------------------------------------------------------------------------- env list


def test_env_list_shows_every_env_and_each_broken_folder_on_its_own_row(client):
    page = client.get("/envs")
    assert page.status_code == 200
    assert set(rows_of(page.text)) == {LIBRARY, VET, COWORK, "zz_bad_json", "zz_no_manifest", COWORK}
    assert "env.json is unreadable" in page.text
    assert "no env.json: not an env folder" in page.text
    assert "review.json: &#39;decision&#39; must be one of approved, rejected" in page.text
    # the bad review copy keeps its real id and counts: only the review part is broken
    assert page.text.count(f'data-env="{COWORK}"') == 2
    assert f">all {len(GATE_NAMES)} pass<" in page.text


def test_env_list_filters_and_sorts(client, out: Path):
    assert rows_of(client.get("/envs?status=verified").text) == [COWORK, COWORK, LIBRARY, VET]
    assert rows_of(client.get("/envs?status=error").text) == ["zz_bad_json", "zz_no_manifest"]
    assert rows_of(client.get("/envs?category=healthcare").text) == [VET]
    assert rows_of(client.get("/envs?q=library+circulation").text) == [LIBRARY]
    assert rows_of(client.get("/envs?gate=robust").text) == []
    by_tables = rows_of(client.get("/envs?status=verified&sort=tables&desc=1").text)
    tables = {e: json.loads((out / "envs" / e / "env.json").read_text())["counts"]["tables"]
              for e in (LIBRARY, VET, COWORK)}
    assert [tables[e] for e in by_tables] == sorted((tables[e] for e in by_tables), reverse=True)


def test_env_list_filters_by_failed_gate_and_decision(tmp_path, out: Path):
    root = tmp_path / "envs"
    for name in (LIBRARY, VET):
        shutil.copytree(out / "envs" / name, root / name)
    report = json.loads((root / VET / "report.json").read_text())
    report["gates"]["results"]["discriminates"] = {"passed": False, "evidence": ["task_03 passes before acting"]}
    (root / VET / "report.json").write_text(json.dumps(report))
    with TestClient(create_app(resolve([root])), base_url="http://127.0.0.1") as c:
        assert rows_of(c.get("/envs?gate=discriminates").text) == [VET]
        assert c.post(f"/envs/{LIBRARY}/review", data={"decision": "rejected", "note": "too easy"}).status_code == 200
        assert rows_of(c.get("/envs?decision=rejected").text) == [LIBRARY]
        assert rows_of(c.get("/envs?decision=undecided").text) == [VET]
        assert "too easy" in c.get("/envs").text


def test_index_rereads_an_env_only_when_its_files_change(tmp_path, out: Path):
    root = tmp_path / "envs"
    shutil.copytree(out / "envs" / VET, root / VET)
    from synth.view.index import EnvIndex

    index = EnvIndex(resolve([root]))
    first = index.rows()[0]
    assert index.rows()[0] is first  # cached: nothing changed
    manifest = json.loads((root / VET / "env.json").read_text())
    manifest["title"] = "Renamed Clinic"
    (root / VET / "env.json").write_text(json.dumps(manifest))
    assert index.rows()[0].title == "Renamed Clinic"
    shutil.copytree(root / VET, root / "another")
    assert [r.key for r in index.rows()] == ["another", VET]


# ---------------------------------------------------------------------------- env page


def test_env_page_shows_schema_tools_tests_tasks_and_gates(client, out: Path):
    env = out / "envs" / LIBRARY
    page = client.get(f"/envs/{LIBRARY}").text
    conn = sqlite3.connect(env / "db" / "initial.sqlite")
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    fks = sum(len(conn.execute(f"PRAGMA foreign_key_list({t})").fetchall()) for t in tables)
    svg = page[page.index('<svg class="schema"'):page.index("</svg>", page.index('<svg class="schema"'))]
    assert sorted(re.findall(r'data-table="([^"]+)"', svg)) == tables
    assert svg.count('class="fk"') == fks > 0
    tools = json.loads((env / "tools.json").read_text())
    shown = re.findall(r'<details class="card tool" data-tool="([^"]+)"', page)
    assert sorted(shown) == sorted(t["name"] for t in tools)
    tests = [json.loads(line) for line in (env / "tests.jsonl").read_text().splitlines()]
    assert len(re.findall(r'<details class="test" data-test=', page)) == len(tests)
    assert "def renew_loan(" in page  # tool source
    for t in (json.loads(line) for line in (env / "tasks.jsonl").read_text().splitlines()):
        assert f'/tasks/{t["task_id"]}"' in page
    for gate in ("database", "tool_contract", "solvable", "discriminates", "deterministic", "robust", "regression"):
        assert f"<td>{gate}</td>" in page


def test_env_page_renders_repairs_probes_rules_today_and_acting_user(client, out: Path):
    page = client.get(f"/envs/{LIBRARY}").text
    repair = page[page.index('data-repair="renew_loan"'):]
    repair = repair[:repair.index("</details>")]
    assert "renewals is never incremented" in repair
    assert "renew_loan.1: loans.renewals unchanged (expected +1)" in repair
    assert "the renewal count stayed the same after a successful renewal" in repair
    assert '<span class="del">-    db.execute(&#34;UPDATE loans SET due_date = ?, renewals = renewals WHERE' in repair
    assert ('<span class="add">+    db.execute(&#34;UPDATE loans SET due_date = ?, renewals = renewals + 1 WHERE'
            in repair)
    assert 'data-repair="task_02"' in page and "repair of verifier" in page
    assert "available_copies_in_range" in page and "returned, lost" in page
    assert "2025-06-01" in page and "Dana Whitfield (circulation clerk; staff id 2)" in page
    assert "1 of 3 rewarded" in page  # the task table's probe column
    task = client.get(f"/envs/{LIBRARY}/tasks/task_01").text
    probes = task[task.index('id="probe-table"'):task.index("</table>", task.index('id="probe-table"'))]
    assert re.findall(r"<td>([a-z ]+)</td><td class=\"num\">([\d.]+)</td>", probes) == [
        ("empty answer", "0.000"), ("do nothing", "0.000"), ("stuffed answer", "1.000")]


def test_env_page_without_newer_records_degrades(tmp_path, out: Path):
    env = shutil.copytree(out / "envs" / VET, tmp_path / VET)  # as folders made before these records
    (env / "rules.json").unlink()
    manifest = json.loads((env / "env.json").read_text())
    manifest.pop("today"), manifest.pop("acting_user")
    (env / "env.json").write_text(json.dumps(manifest))
    report = json.loads((env / "report.json").read_text())
    for rnd in report["check_loop"]["rounds"]:
        rnd.pop("repairs", None)
    report.pop("probes", None)
    (env / "report.json").write_text(json.dumps(report))
    with TestClient(create_app(resolve([env])), base_url="http://127.0.0.1") as c:
        page = c.get(f"/envs/{VET}").text
        task = c.get(f"/envs/{VET}/tasks/task_01").text
    assert 'id="rules"' not in page and "acting user" not in page and "data-repair" not in page
    assert "No probe results in report.json for this task" in task


def test_repaired_round_without_recorded_repairs_says_so(tmp_path, out: Path):
    env = shutil.copytree(out / "envs" / LIBRARY, tmp_path / LIBRARY)
    report = json.loads((env / "report.json").read_text())
    del report["check_loop"]["rounds"][0]["repairs"]  # as the demo's report.json has it today
    (env / "report.json").write_text(json.dumps(report))
    with TestClient(create_app(resolve([env])), base_url="http://127.0.0.1") as c:
        page = c.get(f"/envs/{LIBRARY}").text
    assert "repaired tools: renew_loan" in page and "This report.json predates recorded repairs" in page
    assert "data-repair" not in page


def test_broken_env_pages_show_their_problem(client):
    page = client.get("/envs/zz_bad_json")
    assert page.status_code == 200 and "env.json: Expecting property name" in page.text
    assert "env.json: missing" in client.get("/envs/zz_no_manifest").text
    assert client.get("/envs/nothing_here").status_code == 404


def test_table_browser_pages_through_rows(client, out: Path):
    conn = sqlite3.connect(out / "envs" / LIBRARY / "db" / "initial.sqlite")
    total = conn.execute("SELECT count(*) FROM copies").fetchone()[0]
    first = client.get(f"/envs/{LIBRARY}/tables/copies").text
    assert f"{total} row(s)" in first
    cells = re.findall(r"<tr>(<td>.*?)</tr>", first[first.index('id="rows"'):])
    assert len(cells) == min(total, 50)
    assert client.get(f"/envs/{LIBRARY}/tables/nope").status_code == 404
    assert client.get(f"/envs/{LIBRARY}/tables/copies?page=2").status_code == 200


# ---------------------------------------------------------------------------- replay and Try it


def test_gold_replay_of_every_task_earns_full_reward_in_the_sandbox(client, out: Path):
    app = client.app
    tasks = [json.loads(line) for line in (out / "envs" / VET / "tasks.jsonl").read_text().splitlines()]
    for task in tasks:
        page = client.post(f"/envs/{VET}/tasks/{task['task_id']}/replay", headers=ORIGIN).text
        assert "reward 1.000" in page, task["task_id"]
        assert page.count('class="step') >= len(task["gold"])
        probes = page[page.index('id="live-probes"'):page.index("</table>", page.index('id="live-probes"'))]
        assert "suspicious" not in probes and probes.count("as expected") == (2 if task["kind"] == "read" else 1)
    from synth.runtime.sandbox import SandboxPool

    assert isinstance(app.app.state.live.env(out / "envs" / VET).backend, SandboxPool)
    assert not [m for m in sys.modules if m.startswith("synth_env_")]  # env code was never loaded here


def test_write_task_replay_shows_the_database_diff(client, out: Path):
    page = client.post(f"/envs/{LIBRARY}/tasks/task_02/replay", headers=ORIGIN).text
    step = page[page.index('id="step-1"'):]
    assert "return_copy" in step and "<h4>loans</h4>" in step and "returned_date" in step


def test_try_it_calls_tools_from_form_fields_and_evaluates(client, out: Path):
    opened = client.post(f"/envs/{LIBRARY}/try", data={"task_id": "task_04"}, follow_redirects=False)
    assert opened.status_code == 303
    episode = opened.headers["location"]
    page = client.get(episode).text
    assert 'name="a.query"' in page and "I&#39;m Helen Park" in page
    page = client.post(f"{episode}/call/find_members", data={"a.query": "21000789"}).text
    assert "Helen" in page and "no database change" in page
    page = client.post(f"{episode}/call/renew_loan", data={"a.loan_id": "not a number"}).text
    assert "loan_id" in page and "integer" in page  # the runtime's own argument error
    loans = json.loads((out / "envs" / LIBRARY / "tasks.jsonl").read_text().splitlines()[3])["gold"]
    renew = next(c for c in loans if c["tool"] == "renew_loan")
    page = client.post(f"{episode}/call/renew_loan", data={"a.loan_id": str(renew["arguments"]["loan_id"])}).text
    assert "<h4>loans</h4>" in page and "renewals" in page
    page = client.post(f"{episode}/evaluate", data={"answer": "Renewed: it is now due July 4, 2025."}).text
    assert "reward 1.000" in page
    assert client.post(f"{episode}/close", follow_redirects=False).status_code == 303
    assert client.get(episode).status_code == 404


def test_form_fields_and_arguments_follow_the_schema():
    schema = {"type": "object", "properties": {
        "member_id": {"type": "integer"}, "amount": {"type": "number"}, "urgent": {"type": "boolean"},
        "method": {"type": "string", "enum": ["cash", "card"]}, "tags": {"type": "array", "items": {"type": "integer"}},
        "note": {"type": "string"}}, "required": ["member_id"]}
    fields = {f["name"]: f for f in form_fields(schema)}
    assert {n: f["widget"] for n, f in fields.items()} == {
        "member_id": "number", "amount": "number", "urgent": "bool", "method": "select", "tags": "lines",
        "note": "text"}
    assert fields["member_id"]["required"] and fields["method"]["enum"] == ["cash", "card"]
    form = {"a.member_id": ["7"], "a.amount": ["2.50"], "a.urgent": ["false"], "a.method": ["card"],
            "a.tags": ["1\n2\n\n3"], "a.note": [""]}
    assert form_arguments(form, schema) == {"member_id": 7, "amount": 2.5, "urgent": False, "method": "card",
                                            "tags": [1, 2, 3]}
    assert form_arguments({"a.member_id": ["seven"]}, schema) == {"member_id": "seven"}  # the runtime says why
    assert form_arguments({"_json": ['{"member_id": 1}'], "a.member_id": ["9"]}, schema) == {"member_id": 1}
    assert form_arguments({"_json": ["[1]"]}, schema) == "[1]"


# ---------------------------------------------------------------------------- runs


def test_run_page_shows_funnel_stages_failures_and_costs(client, out: Path):
    run = run_dir(out)
    page = client.get(f"/runs/{run.name}").text
    summary = json.loads((run / "summary.json").read_text())
    funnel = page[page.index('id="funnel"'):page.index("</svg>", page.index('id="funnel"'))]
    for stage, n in summary["funnel"].items():
        assert f">{stage.replace('_', '-')}</text>" in funnel and f">{n} (" in funnel
    conn = sqlite3.connect(run / "run.sqlite")
    for stage, calls in conn.execute("SELECT stage, count(*) FROM calls GROUP BY stage"):
        assert f'#calls">{stage}</a></td><td class="num">{calls}</td>' in page
    assert page.count('<svg class="chart"') == 4  # funnel + tokens, cost, model time
    costs = page[page.index('id="env-costs"'):]
    for env_id in (LIBRARY, VET, COWORK):
        n = conn.execute("SELECT count(*) FROM calls WHERE subject = ? OR subject LIKE ?",
                         (env_id, env_id + "/%")).fetchone()[0]
        assert f'{env_id}</a></td>\n<td class="num">{n:,}</td>' in costs


def test_run_page_filters_model_calls(client, out: Path):
    run = run_dir(out)
    conn = sqlite3.connect(run / "run.sqlite")
    gold = conn.execute("SELECT count(*) FROM calls WHERE stage='gold'").fetchone()[0]
    page = client.get(f"/runs/{run.name}?stage=gold").text
    assert f"{gold} matching call(s)" in page
    table = page[page.index('id="calls-table"'):]
    assert len(re.findall(r"<tr><td>\d+</td><td>gold</td>", table)) == min(gold, 100)
    assert "<td>tasks</td>" not in table
    sub = client.get(f"/runs/{run.name}?subject={VET}/task_0").text
    n = conn.execute("SELECT count(*) FROM calls WHERE subject LIKE ?", (f"%{VET}/task_0%",)).fetchone()[0]
    assert f"{n} matching call(s)" in sub and n > 0


def test_run_failures_link_to_failed_envs_and_unfinished_runs_degrade(tmp_path, out: Path):
    gen = tmp_path / "generated"
    shutil.copytree(out / "runs", gen / "runs")
    shutil.copytree(out / "envs" / VET, gen / "failed" / VET)
    manifest = json.loads((gen / "failed" / VET / "env.json").read_text())
    manifest.update(status="failed", failure_reason="gate discriminates failed")
    (gen / "failed" / VET / "env.json").write_text(json.dumps(manifest))
    run = run_dir(gen)
    summary = json.loads((run / "summary.json").read_text())
    summary["failures"] = {"verify failed: gate discriminates failed": {"count": 1, "examples": [VET]}}
    (run / "summary.json").write_text(json.dumps(summary))
    with TestClient(create_app(resolve([run])), base_url="http://127.0.0.1") as c:
        page = c.get(f"/runs/{run.name}").text
        failures = page[page.index('id="failures"'):]
        assert f'<a href="/envs/{VET}">{VET}</a>' in failures
        assert c.get(f"/envs/{VET}").status_code == 200
        (run / "summary.json").unlink()
        page = c.get(f"/runs/{run.name}")
        assert page.status_code == 200 and "no summary.json yet" in page.text
        assert "gold</a></td>" in page.text  # stage usage still comes from run.sqlite


def test_home_lists_runs_and_env_counts(client, out: Path):
    page = client.get("/").text
    assert f'/runs/{run_dir(out).name}"' in page
    assert "6 env folder(s)" in page


# ---------------------------------------------------------------------------- review decisions


def test_review_is_written_and_export_and_serve_skip_rejected(tmp_path, out: Path):
    root = tmp_path / "envs"
    for name in (LIBRARY, VET, COWORK):
        shutil.copytree(out / "envs" / name, root / name)
    with TestClient(create_app(resolve([root]), reviewer="ana"), base_url="http://127.0.0.1") as c:
        c.post(f"/envs/{VET}/review", data={"decision": "rejected", "note": "tasks too easy", "reviewer": "ana"},
               headers=ORIGIN)
        c.post(f"/envs/{LIBRARY}/review", data={"decision": "approved", "note": "", "reviewer": "ana"}, headers=ORIGIN)
        assert c.post(f"/envs/{COWORK}/review", data={"decision": "maybe"}).status_code == 400
    review = json.loads((root / VET / "review.json").read_text())
    assert review["decision"] == "rejected" and review["note"] == "tasks too easy" and review["reviewer"] == "ana"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", review["at"])
    assert not (root / COWORK / "review.json").exists()

    def export(*extra: str) -> tuple[str, set[str]]:
        dest = tmp_path / f"awm{len(extra)}"
        done = subprocess.run([sys.executable, "-m", "synth", "export", "awm", str(root), "--out", str(dest), *extra],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        lines = (dest / "gen_scenario.jsonl").read_text().splitlines()
        return done.stdout, {json.loads(line)["name"] for line in lines}

    text, exported = export()
    skipped = [line for line in text.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == 1 and VET in skipped[0] and "rejected in review.json" in skipped[0]
    assert exported == {LIBRARY, COWORK}
    _, exported = export("--include-rejected")
    assert exported == {LIBRARY, VET, COWORK}

    from synth.use.server.app import load_envs

    loaded = load_envs(root)
    try:
        assert set(loaded.envs) == {LIBRARY, COWORK}
        assert any("rejected in review.json: tasks too easy" in s["reason"] for s in loaded.skipped)
    finally:
        for env in loaded.envs.values():
            env.close()
    loaded = load_envs(root, include_rejected=True)
    assert set(loaded.envs) == {LIBRARY, VET, COWORK}
    for env in loaded.envs.values():
        env.close()


# ---------------------------------------------------------------------------- local-tool checks


def test_host_and_origin_are_checked(client):
    assert client.get("/envs", headers={"host": "attacker.example"}).status_code == 403
    assert client.get("/envs", headers={"host": "localhost:8765"}).status_code == 200
    cross = client.post(f"/envs/{COWORK}/review", data={"decision": "rejected"},
                        headers={"origin": "http://attacker.example"})
    assert cross.status_code == 403 and "cross-origin" in cross.text
    assert client.post(f"/envs/{COWORK}/try", headers={"origin": "null"}).status_code == 403
    assert client.post(f"/envs/{COWORK}/try", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    assert client.post(f"/envs/{LIBRARY}/tasks/task_01/replay", headers=ORIGIN).status_code == 200


def test_off_loopback_every_request_needs_the_token_and_a_known_host(out: Path):
    app = create_app(resolve([out]), host="0.0.0.0", allowed_hosts=["devbox.lan"])
    assert app.token and len(app.token) >= 32
    with TestClient(app, base_url="http://devbox.lan:8765", follow_redirects=False) as c:
        refused = c.get("/envs")
        assert refused.status_code == 401 and "token" in refused.text
        assert c.post(f"/envs/{COWORK}/review", data={"decision": "rejected"}).status_code == 401
        assert c.get("/envs?token=wrong").status_code == 401
        first = c.get(f"/envs?status=verified&token={app.token}")  # the URL synth view printed
        assert first.status_code == 303 and first.headers["location"] == "/envs?status=verified"
        assert "HttpOnly" in first.headers["set-cookie"] and "SameSite=Strict" in first.headers["set-cookie"]
        assert c.get("/envs").status_code == 200  # the cookie carries it from now on
        assert c.get("/envs", headers={"host": "attacker.example:8765"}).status_code == 403  # a rebound name
        assert c.get("/envs", headers={"host": "192.168.1.20:8765"}).status_code == 200  # an address is fine
        assert c.post(f"/envs/{COWORK}/try", headers={"origin": "http://elsewhere.example"}).status_code == 403
    with TestClient(app, base_url="http://devbox.lan:8765") as stranger:  # no cookie: a fresh browser
        assert stranger.post(f"/envs/{COWORK}/review", data={"decision": "rejected"},
                             headers={"origin": "http://devbox.lan:8765"}).status_code == 401
    loopback = create_app(resolve([out]))
    assert loopback.token is None


# ---------------------------------------------------------------------------- the command


def test_synth_view_command_serves_and_reports_bad_paths(out: Path, tmp_path):
    bad = subprocess.run([sys.executable, "-m", "synth", "view", str(tmp_path / "missing")], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "does not exist" in bad.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "synth", "view", str(out), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/envs", timeout=5)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
                time.sleep(0.1)
        assert page.status_code == 200 and LIBRARY in page.text
        assert httpx.get(f"http://127.0.0.1:{port}/static/view.js").status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)
    assert "6 env folder(s), 1 run(s)" in proc.stdout.read()


def test_tool_source_is_read_without_importing(out: Path):
    assert tool_source(out / "envs" / LIBRARY, "renew_loan").startswith("def renew_loan(")


def test_list_page_benchmark_runs(out: Path):
    # bench/view.py times 1,000 folders; here it only has to work (a few folders, no timing asserted)
    done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "bench" / "view.py"), "--env",
                           str(out / "envs" / VET), "--envs", "12", "--warm", "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "12 envs: 13 rows" in done.stdout and "12-env list page: cold" in done.stdout


def test_serve_command_skips_rejected_envs_unless_included(tmp_path, out: Path, monkeypatch):
    from typer.testing import CliRunner

    import synth.use.server.run
    from synth.cli import app
    from synth.folder.review import write_review

    root = tmp_path / "envs"
    for name in (LIBRARY, VET):
        shutil.copytree(out / "envs" / name, root / name)
    write_review(root / VET, "rejected", "broken verifier", "ana")
    monkeypatch.setattr(synth.use.server.run, "serve_forever", lambda *a, **k: None)  # build the app, do not listen
    served = CliRunner().invoke(app, ["serve", str(root)])
    assert served.exit_code == 0, served.output
    assert f"serving 1 env(s) ({LIBRARY})" in served.stdout
    assert "rejected in review.json: broken verifier" in served.stderr
    served = CliRunner().invoke(app, ["serve", str(root), "--include-rejected"])
    assert f"serving 2 env(s) ({LIBRARY}, {VET})" in served.stdout


def test_replay_flags_a_verifier_that_pays_for_doing_nothing(tmp_path, out: Path):
    env = shutil.copytree(out / "envs" / VET, tmp_path / VET)
    src = (env / "verifiers.py").read_text()
    head = '    """task_01 (read, easy): What phone number do we have on file for Daniel Okafor?"""\n'
    assert head in src
    (env / "verifiers.py").write_text(src.replace(head, head + '    return [check("anything goes", True)]\n'))
    with TestClient(create_app(resolve([env])), base_url="http://127.0.0.1") as c:
        page = c.post(f"/envs/{VET}/tasks/task_01/replay").text
    probes = page[page.index('id="live-probes"'):page.index("</table>", page.index('id="live-probes"'))]
    assert probes.count("suspicious") == 2 and probes.count('class="error-row"') == 2
