"""The check loop and gold generation against the fake model server: a seeded tool
bug is found by the tests, judged, repaired and retested; a bug the repairs never
fix fails the env with its reason; gold solutions and verifiers are repaired
after a failing replay; a task that cannot be fixed is dropped."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from envkit import TASKS, TOOL_BODIES, VERIFIER_BODIES, make_library_env
from typer.testing import CliRunner
from verifykit import BUGGY_RETURN_BOOK, judge_library, make_verified_library, proposed_tests, set_verifier_body

from synth.config import Settings
from synth.errors import InputError
from synth.folder.format import read_env_draft, write_env
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.store import RunStore
from synth.pipeline.verify import check_env, verify_env

ALWAYS_PASSES = 'return [check("looks_fine", True)]'


def _settings(fake_model, tmp_path: Path, **extra) -> Settings:
    return Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                    retry_base_delay=0.01, **extra)


def _gold(task_id: str, verifier: str | None = None, **arguments_override) -> dict:
    task = next(t for t in TASKS if t.task_id == task_id)
    actions = [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold]
    if arguments_override:
        actions[-1]["arguments"].update(arguments_override)
    return {"actions": actions, "expected_answer": None if task.expected_answer is None else str(task.expected_answer),
            "verifier_body": verifier or VERIFIER_BODIES[task_id]}


def _built_library(tmp_path: Path, *, return_book: str = BUGGY_RETURN_BOOK) -> Path:
    """The library env as `synth build` would leave it: no tests yet, one seeded tool bug."""
    env = make_library_env(tmp_path)
    draft = read_env_draft(env)
    draft.status, draft.report, draft.tests = "built", {"tasks": {"passed": True}}, []
    draft.tool_bodies["return_book"] = return_book
    return write_env(draft, env)


def _script_agents(fake_model, repair_body: str) -> None:
    script = fake_model.script
    script.add("check_tests", "city_library/*",
               handler=lambda info: Reply(json=proposed_tests(info.subject.split("/")[1])))
    script.add("check_judge", "city_library/*", handler=judge_library)
    script.add("check_repair", "city_library/return_book",
               Reply(json={"diagnosis": "the copy is not put back on the shelf", "body": repair_body}))
    script.add("gold", "city_library/task_03", Reply(json=_gold("task_03")))


def _requests(fake_model, stage: str, subject: str | None = None) -> list:
    """Answered requests of `stage`; `subject` "env/tool" also matches a batch "env/a+tool+b" holding it."""
    def holds(r) -> bool:
        if subject is None or r.subject == subject:
            return True
        env, _, tool = subject.partition("/")
        head, _, tail = r.subject.partition("/")
        return head == env and tool in tail.split("+")

    return [r for r in fake_model.requests if r.stage == stage and holds(r) and r.status == 200]


def _last_user_text(request) -> str:
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


def test_loop_finds_a_tool_bug_repairs_it_retests_and_ends_verified(fake_model, tmp_path: Path) -> None:
    env = _built_library(tmp_path)
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    settings = _settings(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    assert result.pass_rate == 1.0 and all(g.passed for g in result.gates)
    # The testing agent wrote every tool's tests once, several tools per call; the checking agent judged
    # return_book twice (before and after its repair) and every other tool once; the repair saw the
    # failing test and the judge's reason.
    batches = _requests(fake_model, "check_tests")
    assert len(batches) < 6 and sum(len(r.subject.split("/")[1].split("+")) for r in batches) == 6
    assert len(_requests(fake_model, "check_judge", "city_library/return_book")) == 2
    assert len(_requests(fake_model, "check_judge", "city_library/get_member")) == 1
    repair = _requests(fake_model, "check_repair")
    assert len(repair) == 1 and "the returned copy is not put back" in _last_user_text(repair[0])
    assert "test return_book.1" in _last_user_text(repair[0])

    report = json.loads((env / "report.json").read_text())
    rounds = report["check_loop"]["rounds"]
    assert len(rounds) == 2 and rounds[0]["failing_tools"] == ["return_book"]
    assert rounds[0]["repaired_tools"] == ["return_book"] and rounds[0]["gates"]["solvable"] is False
    # task_03 failed only because of the tool: replayed after the repair, it passed with no gold call.
    assert rounds[0]["repaired_tasks"] == [] and not _requests(fake_model, "gold")
    assert rounds[1]["pass_rate"] == 1.0 and report["gates"]["passed"] is True and report["status"] == "verified"
    assert report["tasks"] == {"passed": True}  # the build's report is kept
    manifest = json.loads((env / "env.json").read_text())
    assert manifest["status"] == "verified" and manifest["counts"]["tests"] == 12
    assert "available_copies + 1" in (env / "tools.py").read_text()
    tests = [json.loads(line) for line in (env / "tests.jsonl").read_text().splitlines()]
    assert {t["verdict"] for t in tests} == {"pass"}
    returned = next(t for t in tests if t["test_id"] == "return_book.1")
    assert set(returned["observed"]["diff"]) == {"books", "loans"}  # rerun after the repair
    # The result holds with no model at all.
    assert check_env(env).verified


def test_a_bug_the_repairs_never_fix_fails_the_env_with_its_reason(fake_model, tmp_path: Path) -> None:
    env = _built_library(tmp_path)
    _script_agents(fake_model, BUGGY_RETURN_BOOK)
    settings = _settings(fake_model, tmp_path, build_repair_rounds=0)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "failed"
    assert len(_requests(fake_model, "check_repair")) == settings.check_rounds - 1
    report = json.loads((env / "report.json").read_text())
    assert len(report["check_loop"]["rounds"]) == settings.check_rounds
    reasons = " ".join(report["failure_reasons"])
    assert "test pass rate 92% < 95% (failing tools: return_book)" in reasons
    assert "gate solvable: task task_03" in reasons
    manifest = json.loads((env / "env.json").read_text())
    assert manifest["status"] == "failed" and "return_book" in manifest["failure_reason"]
    assert not check_env(env).verified

    # A later run (here: a model that does fix it, with its own cache) may verify a failed env again.
    fake_model.script.rules.clear()
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    settings = settings.model_copy(update={"cache_dir": tmp_path / "cache2"})
    again = asyncio.run(verify_env(env, Gateway(settings), settings))
    assert again.status == "verified", again.reasons
    assert json.loads((env / "env.json").read_text())["failure_reason"] is None


def test_gold_and_verifier_are_repaired_after_failing_replays(fake_model, tmp_path: Path) -> None:
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    draft.tasks = [t.model_copy(update={"gold": [], "verifier": ""}) if t.task_id == "task_02" else t
                   for t in draft.tasks]
    draft.verifier_bodies.pop("task_02")
    write_env(draft, env)
    unknown_tool = _gold("task_02")
    unknown_tool["actions"][-1]["tool"] = "lend_book"
    fake_model.script.add("gold", "city_library/task_02",
                          Reply(json=unknown_tool),  # caught before execution, by the gateway's repair turn
                          Reply(json=_gold("task_02", book_id=4)),  # no copy of that book: the call fails
                          Reply(json=_gold("task_02", verifier=ALWAYS_PASSES)),  # passes before anything is done
                          Reply(json=_gold("task_02")))
    settings = _settings(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    calls = _requests(fake_model, "gold", "city_library/task_02")
    assert len(calls) == 4
    assert "unknown tool 'lend_book'" in _last_user_text(calls[1])
    assert "no copy of 'The Hound of the Baskervilles' is available" in _last_user_text(calls[2])
    assert "passes on the untouched initial state" in _last_user_text(calls[3])
    task = next(json.loads(line) for line in (env / "tasks.jsonl").read_text().splitlines()
                if json.loads(line)["task_id"] == "task_02")
    assert task["gold"][-1] == {"tool": "checkout_book", "arguments": {"member_id": 2, "book_id": 3}}
    assert task["verifier"] == "verify_task_02" and "loan_is_maya_dune" in (env / "verifiers.py").read_text()
    report = json.loads((env / "report.json").read_text())
    assert report["gold"]["tasks"]["task_02"]["repairs"] == 2 and report["gold"]["passed"] is True
    assert not _requests(fake_model, "check_tests")  # the recorded tests were reused


def _library_with_crashing_list_loans(fake_model, tmp_path: Path) -> Path:
    """The library env with list_loans crashing when no status is given, and a scripted fix."""
    crashing = TOOL_BODIES["list_loans"].replace('status = status or "active"', 'status = status or 1 / 0')
    env = _built_library(tmp_path, return_book=TOOL_BODIES["return_book"])
    draft = read_env_draft(env)
    draft.tool_bodies["list_loans"] = crashing
    write_env(draft, env)
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    fake_model.script.add("check_repair", "city_library/list_loans",
                          Reply(json={"diagnosis": "division by zero", "body": TOOL_BODIES["list_loans"]}))
    return env


def test_a_crashing_tool_fails_without_the_judge_and_is_repaired(fake_model, tmp_path: Path) -> None:
    env = _library_with_crashing_list_loans(fake_model, tmp_path)
    settings = _settings(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    repaired_at = _requests(fake_model, "check_repair", "city_library/list_loans")[0].time
    judged = [j for j in _requests(fake_model, "check_judge") if j.time < repaired_at]
    assert not any("### list_loans.1\n" in _last_user_text(j) for j in judged)  # a crash needs no judge
    tests = {t["test_id"]: t for t in map(json.loads, (env / "tests.jsonl").read_text().splitlines())}
    assert tests["list_loans.1"]["verdict"] == "pass"  # after the repair
    report = json.loads((env / "report.json").read_text())
    assert "list_loans" in report["check_loop"]["rounds"][0]["failing_tools"]
    repair = _requests(fake_model, "check_repair", "city_library/list_loans")
    assert len(repair) == 1 and "the tool crashed (exception)" in _last_user_text(repair[0])
    assert "ZeroDivisionError" in _last_user_text(repair[0])


def test_model_failures_are_recorded_per_tool_and_never_stop_the_loop(fake_model, tmp_path: Path) -> None:
    env = _built_library(tmp_path, return_book=TOOL_BODIES["return_book"])
    asked = []

    def tests_without_a_refusal_once(info):  # the batch holding reserve_book: its refusal test left out once
        if "reserve_book" not in info.subject.split("/")[1].split("+"):
            return None
        asked.append(info.subject)
        answer = proposed_tests(info.subject.split("/")[1])
        if len(asked) == 1:
            for entry in answer["tools"]:
                if entry["tool"] == "reserve_book":
                    entry["tests"] = [t for t in entry["tests"] if t["expect"] == "success"]
        return Reply(json=answer)

    fake_model.script.add("check_tests", "city_library/*", handler=tests_without_a_refusal_once)
    # The checking agent never answers properly for a batch that holds get_member.
    fake_model.script.add("check_judge", "city_library/*",
                          handler=lambda info: Reply(json={"verdicts": []}) if "get_member" in info.subject else None)
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    settings = _settings(fake_model, tmp_path, check_rounds=2, repair_turns=1)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    # The testing agent's answer without a negative test was sent back once and fixed...
    proposals = _requests(fake_model, "check_tests", "city_library/reserve_book")
    assert len(proposals) == 2 and "add a refusal test" in _last_user_text(proposals[1])
    # ...while the checking agent never answered properly for get_member: recorded, every round.
    assert result.status == "failed"
    report = json.loads((env / "report.json").read_text())
    for round_report in report["check_loop"]["rounds"]:
        assert any(e.startswith("check_judge ") and "get_member" in e.split(":")[0] and "still invalid" in e
                   for e in round_report["errors"])
    tests = [json.loads(line) for line in (env / "tests.jsonl").read_text().splitlines()]
    with_it = {n for r in _requests(fake_model, "check_judge", "city_library/get_member")
               for n in r.subject.split("/")[1].split("+")}
    # (a refusal that refused as expected needs no judge: those pass without one)
    assert {t["verdict"] for t in tests if t["tool"] in with_it and t["expectation"]["outcome"] == "success"} \
        == {None}
    assert {t["verdict"] for t in tests if t["tool"] not in with_it} <= {"pass"}
    assert "get_member" in " ".join(report["failure_reasons"]).split("failing tools: ")[1].split(")")[0]
    assert not [r for r in fake_model.requests if r.stage == "check_repair"]  # nothing to repair in the tool


def test_gold_that_is_never_fixed_is_recorded_and_the_task_dropped(fake_model, tmp_path: Path) -> None:
    env = make_verified_library(tmp_path)
    set_verifier_body(env, "task_04", ALWAYS_PASSES)
    fake_model.script.add("gold", "city_library/task_04", Reply(json=_gold("task_04", verifier=ALWAYS_PASSES)))
    settings = _settings(fake_model, tmp_path, check_rounds=2, verifier_rounds=1, build_repair_rounds=1)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    assert list(result.dropped_tasks) == ["task_04"]
    assert "passes on the untouched initial state" in result.dropped_tasks["task_04"][0]
    calls = _requests(fake_model, "gold", "city_library/task_04")
    # each repair round: the loop's call with the gate's findings + one repair; round 1, round 2 (the last
    # tool round), and the one round a verifier finding on clean tools buys past them
    assert len(calls) == 2 * (settings.check_rounds - 1 + settings.verifier_rounds)
    rounds = json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
    assert len(rounds) == settings.check_rounds + settings.verifier_rounds
    assert "Your previous attempt" in _last_user_text(calls[0]) and "looks_fine" in _last_user_text(calls[0])
    assert "passes on the untouched initial state" in _last_user_text(calls[0])
    assert "The code of the state-changing tools" in _last_user_text(calls[0])  # its gold is at fault: code shown
    ids = [json.loads(line)["task_id"] for line in (env / "tasks.jsonl").read_text().splitlines()]
    assert ids == ["task_01", "task_02", "task_03"] and "verify_task_04" not in (env / "verifiers.py").read_text()
    assert json.loads((env / "report.json").read_text())["dropped_tasks"]["task_04"]


def test_a_task_still_blamed_after_its_repairs_is_set_aside_and_the_loop_ends_early(fake_model, tmp_path: Path) -> None:
    # Trial 2: almost every task repaired twice without success was repaired twice more and dropped anyway,
    # each round resending it to the gold stage and the reward agents. With --task-repairs 1, the task is
    # set aside after one repair, the loop ends at once (not after check_rounds + verifier_rounds), and
    # verify drops it.
    env = make_verified_library(tmp_path)
    set_verifier_body(env, "task_04", ALWAYS_PASSES)
    fake_model.script.add("gold", "city_library/task_04", Reply(json=_gold("task_04", verifier=ALWAYS_PASSES)))
    settings = _settings(fake_model, tmp_path, check_rounds=3, verifier_rounds=2, build_repair_rounds=1,
                         task_repairs=1)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    assert list(result.dropped_tasks) == ["task_04"]
    assert len(_requests(fake_model, "gold", "city_library/task_04")) == 2  # one repair: the call + its turn
    rounds = json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
    assert len(rounds) == 2
    assert [r["repaired_tasks"] for r in rounds] == [["task_04"], []]
    assert [r["set_aside"] for r in rounds] == [[], ["task_04"]]
    ids = [json.loads(line)["task_id"] for line in (env / "tasks.jsonl").read_text().splitlines()]
    assert ids == ["task_01", "task_02", "task_03"]


def test_tasks_whose_drop_would_sink_the_env_get_one_repair_more(fake_model, tmp_path: Path) -> None:
    # Two of three tasks never get a working verifier: setting them aside after --task-repairs 1 would leave
    # one task of three, too few to drop them, so they get one repair more before the env fails.
    env = make_verified_library(tmp_path)
    draft = read_env_draft(env)
    draft.tasks = [t for t in draft.tasks if t.task_id != "task_02"]
    draft.verifier_bodies.pop("task_02")
    write_env(draft, env)
    for task_id in ("task_03", "task_04"):
        set_verifier_body(env, task_id, ALWAYS_PASSES)

    def gold(info):
        ids = info.subject.split("/", 1)[1].split("+")
        answers = [{"task_id": i, **_gold(i, verifier=ALWAYS_PASSES)} for i in ids]
        return Reply(json={"tasks": answers} if len(ids) > 1 else answers[0])

    fake_model.script.add("gold", "city_library/*", handler=gold)
    settings = _settings(fake_model, tmp_path, check_rounds=3, verifier_rounds=2, build_repair_rounds=1,
                         task_repairs=1)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "failed" and not result.dropped_tasks
    rounds = json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
    assert [r["repaired_tasks"] for r in rounds] == [["task_03", "task_04"], ["task_03", "task_04"], []]
    assert [r["set_aside"] for r in rounds] == [[], [], ["task_03", "task_04"]]


def test_budget_stop_keeps_the_env_built_and_records_it(fake_model, tmp_path: Path) -> None:
    env = _built_library(tmp_path)
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    settings = _settings(fake_model, tmp_path, max_cost=0.0)
    store = RunStore(tmp_path / "run")
    result = asyncio.run(verify_env(env, Gateway(settings), settings, store=store))

    assert result.budget_stopped and result.status == "built"
    assert not fake_model.requests
    assert json.loads((env / "env.json").read_text())["status"] == "built"
    assert "budget" in json.loads((env / "report.json").read_text())["budget_stopped"]
    assert store.get("verify", "city_library")["status"] == "failed"


def test_a_finished_env_is_skipped_on_rerun_with_the_same_store(fake_model, tmp_path: Path) -> None:
    env = _built_library(tmp_path, return_book=TOOL_BODIES["return_book"])
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    settings = _settings(fake_model, tmp_path)
    store = RunStore(tmp_path / "run")
    first = asyncio.run(verify_env(env, Gateway(settings), settings, store=store))
    assert first.status == "verified" and not first.skipped
    seen = len(fake_model.requests)
    again = asyncio.run(verify_env(env, Gateway(settings), settings, store=store))
    assert again.skipped and again.status == "verified" and len(fake_model.requests) == seen


def test_verify_cli_runs_the_loop_and_exits_zero_when_verified(fake_model, tmp_path: Path, monkeypatch) -> None:
    from synth.cli import app

    env = _built_library(tmp_path)
    _script_agents(fake_model, TOOL_BODIES["return_book"])
    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SYNTH_RETRY_BASE_DELAY", "0.01")
    result = CliRunner().invoke(app, ["verify", str(env), "--model", "openai/test-model",
                                      "--base-url", fake_model.openai_base_url])
    assert result.exit_code == 0, result.output
    assert "city_library: verified (pass rate 100%)" in result.output
    assert "1/1 env(s) verified" in result.output


def test_verify_refuses_an_env_whose_build_failed(fake_model, tmp_path: Path, monkeypatch) -> None:
    env = make_library_env(tmp_path)
    draft = read_env_draft(env)
    draft.status, draft.tools, draft.tool_bodies, draft.failure_reason = "failed", [], {}, "schema: still failing"
    write_env(draft, env)
    settings = _settings(fake_model, tmp_path)
    with pytest.raises(InputError, match="the build of this env failed"):
        asyncio.run(verify_env(env, Gateway(settings), settings))
    # From the command line, the env is reported and the command fails, with no model call made.
    from synth.cli import app

    monkeypatch.setenv("SYNTH_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(app, ["verify", str(env), "--model", "openai/test-model",
                                      "--base-url", fake_model.openai_base_url])
    assert result.exit_code == 1 and "the build of this env failed" in result.output
    assert "0/1 env(s) verified" in result.output and not fake_model.requests


def test_a_tool_judged_failing_is_repaired_even_when_the_rate_is_met(fake_model, tmp_path: Path) -> None:
    env = _library_with_crashing_list_loans(fake_model, tmp_path)
    settings = _settings(fake_model, tmp_path, check_pass_rate=0.5)  # the rate alone would ship the bug
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    assert len(_requests(fake_model, "check_repair", "city_library/list_loans")) == 1
    assert "1 / 0" not in read_env_draft(env).tool_bodies["list_loans"]
