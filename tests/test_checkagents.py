"""The check loop's agents: conditional test quotas with a lawful "not applicable, because",
multi-step tests, a judge that tells the tool's fault from the test's (only the first is repaired,
and a tool still blamed at the end blocks verification), complete judge inputs, and --judge-model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from typer.testing import CliRunner

from envkit import TOOL_BODIES
from synth.artifacts import Expectation, ToolCall, ToolTest, ToolTestBatch
from synth.config import Settings
from synth.folder.database import build_database
from synth.folder.format import read_env_draft, write_env
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.stages.check.judge import describe_diff
from synth.pipeline.stages.check.tests import TestingAgent, run_tests
from synth.pipeline.verify import verify_env
from synth.use.replay import preview
from verifykit import BUGGY_RETURN_BOOK, judge_library, make_verified_library, proposed_tests, tool_tests


def settings_for(fake_model, tmp_path: Path, **extra) -> Settings:
    return Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                    retry_base_delay=0.01, **extra)


def built_library(tmp_path: Path, return_book: str = TOOL_BODIES["return_book"]) -> Path:
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    draft.status, draft.tests, draft.report = "built", [], {}
    draft.tool_bodies["return_book"] = return_book
    return write_env(draft, env)


def make_tester(env: Path) -> tuple[TestingAgent, dict]:
    draft = read_env_draft(env)
    db = build_database(draft.schema_sql, draft.data_sql)
    tools = {t.name: t for t in draft.tools}
    return TestingAgent(draft, db, None, ["books", "loans", "members", "reservations"]), tools


def test_quotas_are_conditional_with_a_reason(tmp_path):
    tester, tools = make_tester(make_verified_library(tmp_path))
    only_success = [t for t in tool_tests("search_books") if t["expect"] == "success"]

    def problems(**entry):
        batch = ToolTestBatch.model_validate({"tools": [{"tool": "search_books", "tests": only_success, **entry}]})
        return tester.problems(batch, [tools["search_books"]])

    assert any("add a refusal test" in p and "no_refusal_path" in p for p in problems())
    assert problems(no_refusal_path="a search with no match returns an empty list, not an error") == []
    only_error = [t for t in tool_tests("return_book") if t["expect"] == "error"]
    batch = ToolTestBatch.model_validate({"tools": [{"tool": "return_book", "tests": only_error}]})
    assert any("add a success test (with setup calls" in p for p in tester.problems(batch, [tools["return_book"]]))
    batch = ToolTestBatch.model_validate({"tools": [{"tool": "return_book", "tests": only_error,
                                                     "no_success_path": "every loan is already returned"}]})
    assert tester.problems(batch, [tools["return_book"]]) == []
    bad_setup = [{**tool_tests("return_book")[0], "setup": [{"tool": "lend_book", "arguments": {}}]}]
    batch = ToolTestBatch.model_validate({"tools": [{"tool": "return_book", "tests": bad_setup}]})
    assert any("setup call 1: unknown tool 'lend_book'" in p
               for p in tester.problems(batch, [tools["return_book"]]))


def test_a_multi_step_test_runs_its_setup_first_and_diffs_from_there(tmp_path, ):
    env = make_verified_library(tmp_path)
    checkout = ToolCall(tool="checkout_book", arguments={"member_id": 2, "book_id": 3})
    tests = [
        ToolTest(test_id="return_book.9", tool="return_book", arguments={"loan_id": 11}, setup=[checkout],
                 expectation=Expectation(outcome="success")),
        ToolTest(test_id="return_book.10", tool="return_book", arguments={"loan_id": 11},
                 setup=[ToolCall(tool="checkout_book", arguments={"member_id": 2, "book_id": 4})],
                 expectation=Expectation(outcome="success")),
    ]
    assert run_tests(env, tests, pool=None, volatile=[], rules=None) is None
    done, failed_setup = tests
    assert done.observed.ok and set(done.observed.diff) == {"books", "loans"}
    assert [c["key"] for c in done.observed.diff["loans"]["changed"]] == [{"loan_id": 11}]
    assert not done.observed.diff["loans"]["added"]  # the setup's new loan is not the call's change
    assert failed_setup.observed.kind == "setup_failed" and failed_setup.verdict == "test_wrong"
    assert "setup call 1 checkout_book" in failed_setup.observed.error


def test_judge_inputs_are_complete_or_say_what_was_cut():
    small = {"rows": [1, 2, 3]}
    assert preview(small) == small
    big = [{"id": i, "title": f"Book number {i}", "notes": "x" * 50} for i in range(200)]
    shown = preview(big, 2000)
    assert len(json.dumps(shown)) <= 2100 and shown[0] == big[0]
    assert shown[-1] == f"... {200 - (len(shown) - 1)} more items not shown (of 200)"
    long_text = preview("y" * 5000, 1000)
    assert long_text.endswith("(5000 characters in all)")
    diff = {"loans": {"added": [{"loan_id": i} for i in range(10)], "removed": [], "changed": []}}
    text = describe_diff(diff, rows=3)
    assert text.count("loans added:") == 3 and "7 more added rows not shown (of 10)" in text
    assert describe_diff({}) == "none"


def _script(fake_model, judge, repair_body: str) -> None:
    fake_model.script.add("check_tests", "city_library/*",
                          handler=lambda info: Reply(json=proposed_tests(info.subject.split("/")[1])))
    fake_model.script.add("check_judge", "city_library/*", handler=judge)
    fake_model.script.add("check_repair", "city_library/return_book",
                          Reply(json={"diagnosis": "the copy is not put back on the shelf", "body": repair_body}))


def _verdicts(info, verdict_of):
    ids = [line[4:].strip() for line in info.messages[-1]["content"].splitlines() if line.startswith("### ")]
    return Reply(json={"verdicts": [{"test_id": i, "verdict": verdict_of(i)[0], "reason": verdict_of(i)[1]}
                                    for i in ids]})


def test_a_wrong_test_expectation_is_not_repaired_into_the_tool(fake_model, tmp_path):
    env = built_library(tmp_path)

    def judge(info):
        return _verdicts(info, lambda i: ("test_wrong", "the tool is right; the expected result differs")
                         if i == "search_books.1" else ("pass", "right"))

    _script(fake_model, judge, BUGGY_RETURN_BOOK)
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert result.status == "verified", result.reasons
    assert not [r for r in fake_model.requests if r.stage == "check_repair"]
    tests = {json.loads(line)["test_id"]: json.loads(line) for line in (env / "tests.jsonl").read_text().splitlines()}
    assert tests["search_books.1"]["verdict"] == "test_wrong"
    report = json.loads((env / "report.json").read_text())
    assert report["check_loop"]["rounds"][0]["test_wrong"] == 1


def test_a_tool_the_judge_blames_is_repaired_and_never_ships_blamed(fake_model, tmp_path):
    env = built_library(tmp_path, BUGGY_RETURN_BOOK)
    _script(fake_model, judge_library, BUGGY_RETURN_BOOK)  # the repairs never fix it
    # Even a loose pass rate would let one failing test through: a blamed tool still blocks verification.
    settings = settings_for(fake_model, tmp_path, check_pass_rate=0.5, check_rounds=2, build_repair_rounds=0)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert result.status == "failed"
    assert any("tools still judged wrong after the last repair: return_book" in r for r in result.reasons)
    assert any(r.startswith("gate regression:") and "judged a tool bug" in r for r in result.reasons)
    assert len([r for r in fake_model.requests if r.stage == "check_repair"]) == 1


def test_the_judge_model_judges_and_the_report_says_so(fake_model, tmp_path):
    env = built_library(tmp_path, BUGGY_RETURN_BOOK)
    _script(fake_model, judge_library, TOOL_BODIES["return_book"])
    settings = settings_for(fake_model, tmp_path, judge_model="openai/judge-model",
                            judge_base_url=fake_model.openai_base_url)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert result.status == "verified", result.reasons
    models = {(r.stage, r.body["model"]) for r in fake_model.requests}
    assert {m for s, m in models if s == "check_judge"} == {"judge-model"}
    assert {m for s, m in models if s != "check_judge"} == {"test-model"}
    loop = json.loads((env / "report.json").read_text())["check_loop"]
    assert loop["judge_model"] == "openai/judge-model" and loop["generator_model"] == "openai/test-model"


def test_verify_takes_the_judge_model_as_flags(fake_model, tmp_path, monkeypatch):
    from synth.cli import app

    env = built_library(tmp_path)
    _script(fake_model, judge_library, TOOL_BODIES["return_book"])
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SYNTH_RETRY_BASE_DELAY", "0.01")
    result = CliRunner().invoke(app, ["verify", str(env), "--model", "openai/test-model", "--base-url",
                                      fake_model.openai_base_url, "--judge-model", "openai/judge-model",
                                      "--judge-base-url", fake_model.openai_base_url, "--max-tokens", "6000"])
    assert result.exit_code == 0, result.output
    judged = [r for r in fake_model.requests if r.stage == "check_judge"]
    assert judged and {r.body["model"] for r in judged} == {"judge-model"}
    assert all((r.body.get("max_tokens") or 0) <= 6000 for r in fake_model.requests)
