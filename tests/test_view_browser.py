"""`synth view` driven in a real Chromium (Debian's package, through Playwright; no browser
is downloaded): the run page, filtering the env list, an env's tool tests, a gold
replay, Try it, and a review decision that `synth export` then honours.

Skipped, saying why, when Chromium or Playwright is missing (CI installs both)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from viewkit import CHROMIUM_ARGS, COWORK, LIBRARY, VET, add_broken_envs, chromium_path, demo_output, run_dir

CHROMIUM = chromium_path()
if CHROMIUM is None:
    pytest.skip("Chromium not found (/usr/bin/chromium); install Debian's package with `apt-get install chromium` "
                "to run the browser tests", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed; pip install -e '.[dev]'")

from synth.use.server.run import BackgroundServer  # noqa: E402
from synth.view.app import create_app  # noqa: E402
from synth.view.sources import resolve  # noqa: E402


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    out = demo_output(tmp_path_factory, tmp_path_factory.mktemp("browser") / "generated")
    add_broken_envs(out / "envs")
    return out


@pytest.fixture(scope="module")
def server(out: Path):
    with BackgroundServer(create_app(resolve([out]), reviewer="browser test")) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(base_url=server.url, viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(60_000)  # replays start sandbox workers on a busy machine
    yield pg
    context.close()


def env_rows(page) -> list[str]:
    return page.locator("#env-table tr[data-env]").evaluate_all("rows => rows.map(r => r.dataset.env)")


def test_run_page_shows_the_funnel_and_filters_model_calls(page, out: Path):
    run = run_dir(out)
    page.goto("/")
    page.get_by_role("link", name=run.name).click()
    page.wait_for_url(f"**/runs/{run.name}")
    funnel = page.locator("#funnel svg")
    assert "verified" in funnel.text_content() and "3 (100%)" in funnel.text_content()
    assert page.locator("#stage-charts svg").count() == 3
    total = int(page.locator("#calls-count").inner_text().split()[0])
    page.locator("form.filters select[name=stage]").select_option("gold")  # submits on change (view.js)
    page.wait_for_url(re.compile(r".*stage=gold.*"))
    gold = int(page.locator("#calls-count").inner_text().split()[0])
    assert 0 < gold < total
    stages = page.locator("#calls-table tr td:nth-child(2)").all_inner_texts()
    assert stages and set(stages) == {"gold"}


def test_env_list_filters_and_broken_folders_have_their_own_rows(page):
    page.goto("/envs")
    assert len(env_rows(page)) == 6
    assert "env.json is unreadable" in page.locator("tr[data-env=zz_bad_json]").inner_text()
    page.locator("select[name=status]").select_option("error")
    page.wait_for_url(re.compile(r".*status=error.*"))
    assert env_rows(page) == ["zz_bad_json", "zz_no_manifest"]
    page.goto("/envs")
    page.fill("input[name=q]", "veterinary")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(re.compile(r".*q=veterinary.*"))
    assert env_rows(page) == [VET]
    assert page.locator("#env-count").inner_text() == "1 of 6 env(s)"


def test_open_an_env_and_expand_a_tools_tests(page, out: Path):
    page.goto("/envs?status=verified")
    page.locator(f"tr[data-env={LIBRARY}] a").first.click()
    page.wait_for_url(f"**/envs/{LIBRARY}")
    tables = json.loads((out / "envs" / LIBRARY / "env.json").read_text())["counts"]["tables"]
    assert page.locator("svg.schema g.table").count() == tables
    tool = page.locator("details.tool[data-tool=renew_loan]")
    test = tool.locator("details.test").first
    assert not test.is_visible()
    tool.locator("summary").first.click()
    assert test.is_visible()
    body = test.locator("dl")
    assert not body.is_visible()
    test.locator("summary").click()
    assert body.is_visible()
    text = body.inner_text()
    assert "expected" in text and "observed" in text and "database diff" in text and "verdict" in text
    assert "pass" in test.locator("summary").inner_text()


def test_replay_a_tasks_gold_trace(page, out: Path):
    page.goto(f"/envs/{LIBRARY}")
    page.locator("#task-table").get_by_role("link", name="task_02").click()
    page.wait_for_url(f"**/envs/{LIBRARY}/tasks/task_02")
    page.get_by_role("button", name="Replay gold trace live").click()
    page.wait_for_selector("#replay")
    step = page.locator("#step-1")
    assert "return_copy" in step.inner_text()
    assert step.locator("h4", has_text="loans").count() == 1  # the database diff of the call
    assert "reward 1.000" in page.locator("#replay .reward").inner_text()


def test_call_a_tool_from_its_form_then_evaluate(page, out: Path):
    page.goto(f"/envs/{LIBRARY}/tasks/task_04")
    page.get_by_role("button", name="Open an episode").click()
    page.wait_for_url(re.compile(r".*/try/[0-9a-f]+$"))
    assert "Helen Park" in page.locator("#instruction").inner_text()
    form = page.locator("details[data-tool=find_members]")
    form.locator("> summary").click()
    form.locator("input[name='a.query']").fill("21000789")
    form.get_by_role("button", name="Call find_members").click()
    page.wait_for_selector("#step-1")
    assert "Helen" in page.locator("#step-1").inner_text()
    gold = json.loads((out / "envs" / LIBRARY / "tasks.jsonl").read_text().splitlines()[3])["gold"]
    loan_id = next(c for c in gold if c["tool"] == "renew_loan")["arguments"]["loan_id"]
    form = page.locator("details[data-tool=renew_loan]")
    form.locator("> summary").click()
    form.locator("input[name='a.loan_id']").fill(str(loan_id))
    form.get_by_role("button", name="Call renew_loan").click()
    page.wait_for_selector("#step-2")
    assert page.locator("#step-2 h4", has_text="loans").count() == 1
    page.fill("#answer", "Renewed: it is now due July 4, 2025.")  # a write task reports what it did
    page.get_by_role("button", name="Evaluate").click()
    page.wait_for_selector(".evaluation")
    assert "reward 1.000" in page.locator(".evaluation").last.inner_text()


def test_approve_and_reject_then_export_skips_the_rejected_env(page, out: Path, tmp_path):
    for env, button, note in ((LIBRARY, "Approve", "solid"), (VET, "Reject", "verifiers too lenient")):
        page.goto(f"/envs/{env}")
        page.fill("#note", note)
        page.get_by_role("button", name=button).click()
        page.wait_for_url(f"**/envs/{env}#review")
        assert note in page.locator("#review-current").inner_text()
    assert json.loads((out / "envs" / VET / "review.json").read_text())["decision"] == "rejected"
    assert json.loads((out / "envs" / LIBRARY / "review.json").read_text())["reviewer"] == "browser test"
    page.goto("/envs")
    page.locator("select[name=decision]").select_option("rejected")
    page.wait_for_url(re.compile(r".*decision=rejected.*"))
    assert env_rows(page) == [VET]
    dest = tmp_path / "awm"
    done = subprocess.run([sys.executable, "-m", "synth", "export", "awm", str(out / "envs"), "--out", str(dest)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    exported = {json.loads(line)["name"] for line in (dest / "gen_scenario.jsonl").read_text().splitlines()}
    assert VET not in exported and {LIBRARY, COWORK} <= exported
