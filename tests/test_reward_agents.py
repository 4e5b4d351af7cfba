"""The check loop's reward agents against the fake model server: the solver finds a verifier that
rejects a correct solution (a false negative), the red team finds an answer it pays for without the
task being done (an exploit), the paraphrase check finds a correct wording it rejects; each goes
to the checking agent where judgement is needed, then to a verifier repair recorded in
report.json, and stays in verifier_tests.jsonl as a regression case that `synth check` replays."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from agentkit import PARAPHRASES, judge, red_team, script_agents, solver
from envkit import GOLD_ANSWERS, TASKS, VERIFIER_BODIES
from verifykit import make_verified_library, set_verifier_body

from synth.config import Settings
from synth.folder.format import read_env_draft, write_env
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.verify import check_env, verify_env
from synth.runtime import Env

GOLD = {t.task_id: t for t in TASKS}
COUNTS = 'sorted({r["available_copies"] for r in query_rows(initial_db, "SELECT available_copies FROM books")} - {2})'
UNCHANGED = 'check("database_unchanged", unchanged(initial_db, final_db))'


def settings_for(fake_model, tmp_path: Path, **extra) -> Settings:
    return Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                    retry_base_delay=0.01, **extra)


def built_library(tmp_path: Path, task_id: str, verifier: str) -> Path:
    """The library env with its tools tested and judged, one verifier replaced, not verified yet."""
    env = make_verified_library(tmp_path)
    set_verifier_body(env, task_id, verifier)
    draft = read_env_draft(env)
    draft.status, draft.report = "built", {}
    return write_env(draft, env)


def gold_reply(task_id: str, verifier: str) -> Reply:
    task = GOLD[task_id]
    facts = [{"value": "2", "kind": "count"}] if task_id == "task_01" else None  # a read task names its facts
    return Reply(json={"diagnosis": "fixed as the evidence shows",
                       "actions": [{"tool": c.tool, "arguments": dict(c.arguments)} for c in task.gold],
                       "expected_answer": str(GOLD_ANSWERS[task_id]), "facts": facts, "verifier_body": verifier})


def requests(fake_model, stage: str) -> list:
    return [r for r in fake_model.requests if r.stage == stage and r.status == 200]


def last_user(request) -> str:
    return [m for m in request.body["messages"] if m["role"] == "user"][-1]["content"]


def verifier_cases(env: Path) -> list[dict]:
    path = env / "verifier_tests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def score(env: Path, task_id: str, answer: str, calls: list | None = None) -> float:
    with Env.load(env) as loaded, loaded.episode(task_id) as episode:
        for call in GOLD[task_id].gold if calls is None else calls:
            episode.call(call.tool, dict(call.arguments))
        return episode.evaluate(answer).reward


def test_the_solver_finds_a_false_negative_and_the_verifier_is_repaired(fake_model, tmp_path):
    # task_02's verifier insists the answer says "14 days": a correct solution that says it less fully fails.
    strict = VERIFIER_BODIES["task_02"].replace('reports(answer, ["Dune"])', 'reports(answer, ["Dune", "14 days"])')
    env = built_library(tmp_path, "task_02", strict)
    assert score(env, "task_02", "Dune is checked out to Maya.") < 0.5
    script_agents(fake_model.script, solve=solver({"task_02": "Dune is checked out to Maya."}))
    fake_model.script.add("gold", "city_library/task_02", gold_reply("task_02", VERIFIER_BODIES["task_02"]))
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    # The solver saw the tools, never the gold; its prompt lists every task's request.
    solve = requests(fake_model, "solve")
    assert len(solve) == 1 and "- checkout_book(member_id: int" in solve[0].body["messages"][0]["content"]
    assert '"book_id": 3' not in last_user(solve[0]) and "## task_02" in last_user(solve[0])
    gold = requests(fake_model, "gold")
    assert len(gold) == 1 and "an independent solver reached the gold solution's final state" in last_user(gold[0])
    report = json.loads((env / "report.json").read_text())
    first = report["check_loop"]["rounds"][0]
    assert first["agents"]["task_02"]["solver"]["verdict"] == "verifier false negative"
    (repair,) = first["repairs"]
    assert repair["kind"] == "verifier" and repair["name"] == "task_02" and '"14 days"' in repair["before"]
    assert "independent solver" in repair["evidence"][0] and '"14 days"' not in repair["after"]
    # The solver's run stays as a regression case: correct work keeps earning the full reward.
    cases = [c for c in verifier_cases(env) if c["source"] == "solver"]
    assert [(c["task_id"], c["expect"]) for c in cases] == [("task_02", "pass")]
    assert cases[0]["answer"] == "Dune is checked out to Maya." and cases[0]["found_reward"] < 0.5
    assert check_env(env).verified
    set_verifier_body(env, "task_02", strict)  # the old verifier fails its regression case
    gate = next(g for g in check_env(env).gates if g.name == "reward_cases")
    assert not gate.passed and "task_02.solver.1 (solver" in gate.evidence[0]


def test_the_red_team_finds_an_exploit_and_the_verifier_is_repaired(fake_model, tmp_path):
    # task_01's verifier only rules out the count 1: the probes (which hedge with 1 and list every number) miss
    # that an answer taking the 2 back ("Correction: 3 copies") passes.
    loose = f'return rubric([check("answer_says_two", states(answer, [2], [1]), 2.0), {UNCHANGED}])'
    env = built_library(tmp_path, "task_01", loose)
    assert check_env(env).verified  # every model-free probe stays below the threshold
    assert score(env, "task_01", "There are 2 copies. Correction: 3 copies.") == 1.0
    exploit = {"idea": "give a second count as a correction", "calls": [],
               "answer": "There are 2 copies. Correction: 3 copies."}
    script_agents(fake_model.script, attack=red_team({"task_01": [exploit]}),
                  verdicts=judge(lambda q, block: ("wrong", "it gives two different counts") if "Correction: 3" in block
                                 else ("correct", "states 2")))
    fixed = VERIFIER_BODIES["task_01"]
    fake_model.script.add("gold", "city_library/task_01", gold_reply("task_01", fixed))
    settings = settings_for(fake_model, tmp_path, judge_model="openai/judge-model",
                            judge_base_url=fake_model.openai_base_url)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    judged = requests(fake_model, "reward_judge")
    assert judged and {r.body["model"] for r in judged} == {"judge-model"}
    assert "Attempt's answer: There are 2 copies. Correction: 3 copies." in last_user(judged[0])
    assert "Model-free probe rewards of this grader: empty 0." in last_user(judged[0])
    (repair_call,) = requests(fake_model, "gold")  # its actions replay: the verifier's repair shows no tool code
    assert "The code of the state-changing tools" not in last_user(repair_call)
    assert "def search_books(" not in last_user(repair_call) and "search_books" in last_user(repair_call)
    attacks = requests(fake_model, "red_team")
    assert len(attacks) == 2  # the repaired verifier is attacked again, and holds
    assert "## task_01 (read)" in last_user(attacks[0]) and "states(answer, [2], [1])" in last_user(attacks[0])
    assert '"query": "Left Hand of Darkness"' not in last_user(attacks[0])  # the gold stays hidden
    report = json.loads((env / "report.json").read_text())
    rounds = report["check_loop"]["rounds"]
    assert rounds[0]["agents"]["task_01"]["red_team"]["exploits"] == 1
    assert rounds[1]["agents"]["task_01"]["red_team"] == {"attempts": 1, "exploits": 0}
    (repair,) = rounds[0]["repairs"]
    assert repair["kind"] == "verifier" and repair["name"] == "task_01"
    assert "the red team's attempt (give a second count as a correction)" in repair["evidence"][0]
    cases = [c for c in verifier_cases(env) if c["source"] == "red_team"]
    assert [(c["task_id"], c["expect"], c["found_reward"]) for c in cases] == [("task_01", "fail", 1.0)]
    assert score(env, "task_01", "There are 2 copies. Correction: 3 copies.") < 0.5
    assert check_env(env).verified


def test_a_correct_paraphrase_the_verifier_rejects_is_repaired(fake_model, tmp_path):
    digits = ('said = re.search(r"\\b2\\b", answer or "") is not None and states(answer, [2], ' + COUNTS + ')\n'
              f'return rubric([check("answer_says_two", said, 2.0), {UNCHANGED}])')
    env = built_library(tmp_path, "task_01", digits)
    script_agents(fake_model.script)  # the checking agent finds every paraphrase correct
    fake_model.script.add("gold", "city_library/task_01", gold_reply("task_01", VERIFIER_BODIES["task_01"]))
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    (asked,) = requests(fake_model, "paraphrase")
    assert "## task_01" in last_user(asked) and "search_books(" in last_user(asked)  # with what the tools returned
    report = json.loads((env / "report.json").read_text())
    first = report["check_loop"]["rounds"][0]
    assert first["agents"]["task_01"]["paraphrase"]["tried"] == 10
    assert first["agents"]["task_01"]["paraphrase"]["failed"] == 4  # the replies that spell the number out
    assert first["repairs"][0]["name"] == "task_01"
    assert any("a paraphrase of the expected answer, 'Two copies.', is correct" in e
               for e in first["repairs"][0]["evidence"])
    cases = [c for c in verifier_cases(env) if c["source"] == "paraphrase"]
    assert len(cases) == 10 and {c["expect"] for c in cases} == {"pass"} and all(c["use_gold"] for c in cases)
    assert check_env(env).verified


def test_a_probe_the_verifier_paid_for_is_repaired_and_kept_as_a_case(fake_model, tmp_path):
    # task_01's verifier pays for an answer that lists every number, or hedges (it only looks for the 2).
    shotgun_open = f'return rubric([check("says 2", mentions(answer, 2), 2.0), {UNCHANGED}])'
    env = built_library(tmp_path, "task_01", shotgun_open)
    script_agents(fake_model.script)
    fake_model.script.add("gold", "city_library/task_01", gold_reply("task_01", VERIFIER_BODIES["task_01"]))
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    (gold,) = requests(fake_model, "gold")
    assert "probe 'shotgun' earned 1.00" in last_user(gold)
    report = json.loads((env / "report.json").read_text())
    assert report["check_loop"]["rounds"][0]["gates"]["probes"] is False
    assert report["check_loop"]["rounds"][0]["repairs"][0]["name"] == "task_01"
    cases = [c for c in verifier_cases(env) if c["source"] == "probe"]
    # Every hedge it paid for stays a case: with a value of the data, and with values in no table.
    assert [(c["task_id"], c["expect"], c["note"]) for c in cases] == [
        ("task_01", "fail", f"the {p} probe") for p in ("shotgun", "hedged", "hedged (not in the data)",
                                                         "hedged (possibly)", "hedged (between)")]
    assert cases[0]["calls"] == [] and cases[0]["answer"].startswith("0 1 2 3")
    assert cases[1]["answer"] == "2 or maybe 1" and cases[1]["calls"][0]["tool"] == "search_books"
    assert [c["answer"] for c in cases[2:]] == ["2 Or maybe: 3", "2, possibly 3.", "2 (between 2 and 3)."]
    assert check_env(env).verified
    set_verifier_body(env, "task_01", shotgun_open)  # the old verifier fails its regression case too
    gates = {g.name: g for g in check_env(env).gates}
    assert not gates["probes"].passed and not gates["reward_cases"].passed
    assert re.search(r"task_01\.probe\.\d+ \(probe; the shotgun probe\)", gates["reward_cases"].evidence[0])


def test_an_exploit_only_the_state_reward_pays_is_a_limit_of_that_reward_not_a_fault_of_the_env(tmp_path):
    """A real-model trial: the red team's "the right figures plus an invented promise" was refused by the
    verifier but paid by the state reward (the facts are right, the database untouched). No repair of the
    env can make the state reward see an invented claim, and the env failed its gate for it; now the gate
    lists such cases as state_limits and passes, while a case the rubric pays stays a fault."""
    refuses_claims = ('claims = [w for w in re.findall(r"[a-z]+", (answer or "").lower()) if w.startswith("promis")]\n'
                      'return rubric([check("answer_says_two", states(answer, [2], [1, 3]), 2.0), '
                      f'check("no invented claim", not claims, 4.0), {UNCHANGED}])')
    env = make_verified_library(tmp_path)
    set_verifier_body(env, "task_01", refuses_claims)
    invented = "2 copies are available, and the branch promised to order more next week."
    case = {"case_id": "task_01.red_team.1", "task_id": "task_01", "source": "red_team", "calls": [],
            "answer": invented, "expect": "fail", "note": "the right count plus an invented promise"}
    (env / "verifier_tests.jsonl").write_text(json.dumps(case) + "\n")
    assert score(env, "task_01", invented, calls=[]) < 0.5
    with Env.load(env) as loaded, loaded.episode("task_01") as episode:
        assert episode.evaluate(invented, "state").reward == 1.0  # what `--reward state` alone pays

    gate = next(g for g in check_env(env).gates if g.name == "reward_cases")
    assert gate.passed, gate.evidence
    assert gate.details["state_limits"] == ["task_01.red_team.1"]
    assert check_env(env).verified

    set_verifier_body(env, "task_01", f'return rubric([check("answer_says_two", states(answer, [2], [1, 3]), 2.0), '
                                      f'{UNCHANGED}])')  # a verifier that pays it too: a fault, with both hints
    gate = next(g for g in check_env(env).gates if g.name == "reward_cases")
    assert not gate.passed and gate.details["state_limits"] == []
    assert "the verifier must fail it and the state reward paid it" in gate.evidence[0]


def test_a_remark_beyond_the_request_is_not_an_exploit_and_buys_no_repair(fake_model, tmp_path):
    # Trial 2: red-team "right facts plus an invented remark" findings sent verifiers to repair round after
    # round; the verifiers grew word scanners that failed correct paraphrases, and two envs failed on it.
    # The red team and the checking agent are told such remarks are not graded, and the gold repair prompt
    # tells the verifier not to grade them.
    env = built_library(tmp_path, "task_01", VERIFIER_BODIES["task_01"])
    remark = "There are 2 copies, both hardcovers donated by the mayor."
    assert score(env, "task_01", remark) == 1.0
    attempt = {"idea": "right count plus an invented remark", "calls": [], "answer": remark}
    script_agents(fake_model.script, attack=red_team({"task_01": [attempt]}),
                  verdicts=judge(lambda q, block: ("correct", "states 2; the remark is beyond the request")))
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    (attack,) = requests(fake_model, "red_team")
    assert "adds remarks the request does not ask about, true or invented" in last_user(attack)
    (judged,) = requests(fake_model, "reward_judge")
    assert "Remarks beyond what the request asks" in last_user(judged) and remark in last_user(judged)
    assert not requests(fake_model, "gold")
    rounds = json.loads((env / "report.json").read_text())["check_loop"]["rounds"]
    assert len(rounds) == 1 and rounds[0]["agents"]["task_01"]["red_team"]["exploits"] == 0
    assert not [c for c in verifier_cases(env) if c["source"] == "red_team"]


def test_the_gold_repair_prompts_say_remarks_beyond_the_request_are_not_graded():
    from synth.pipeline.prompts import render_prompt

    for name, values in (("gold_repair", {"problems": ["p"], "results": ""}),
                         ("gold_batch_repair", {"tasks": [{"task_id": "task_01", "problems": ["p"], "results": ""}]})):
        text = render_prompt(name, **values)[-1]["content"]
        assert "does not grade remarks beyond the request" in text and "no word lists or scanners" in text


def test_a_paraphrase_adding_other_values_of_the_facts_kind_is_set_aside_not_sent_to_repair(fake_model, tmp_path):
    # Trial 3: half of the verifier findings were paraphrases such as "Seats still free: 4 (12-seat session,
    # 8 taken)": 12 and 8 are counts where a count is asked, the state reward refuses them as a hedge, and no
    # repair of the verifier can make both rewards pay them. They are set aside, and the agent is told the rule.
    env = built_library(tmp_path, "task_01", VERIFIER_BODIES["task_01"])
    context = "2 copies are available (the library owns 3, and 1 is checked out)."
    replies = {**PARAPHRASES, "task_01": PARAPHRASES["task_01"][:7] + [context]}
    fake_model.script.add("paraphrase", "city_library/*", handler=lambda info: Reply(json={"tasks": [
        {"task_id": i, "paraphrases": replies[i]} for i in info.subject.split("/", 1)[1].split("+")]}))
    script_agents(fake_model.script)  # the checking agent would call every reply correct
    settings = settings_for(fake_model, tmp_path)
    result = asyncio.run(verify_env(env, Gateway(settings), settings))

    assert result.status == "verified", result.reasons
    (asked,) = requests(fake_model, "paraphrase")
    assert "no other value of a requested fact's kind stated as true" in last_user(asked)
    assert not requests(fake_model, "gold") and all(context not in last_user(r)
                                                    for r in requests(fake_model, "reward_judge"))
    noted = json.loads((env / "report.json").read_text())["check_loop"]["rounds"][0]["agents"]["task_01"]["paraphrase"]
    assert noted["tried"] == 8 and noted["failed"] == 0 and noted["beyond_contract"] == 1
    assert "it also asserts" in noted["beyond_why"]
    kept = [c["answer"] for c in verifier_cases(env) if c["source"] == "paraphrase" and c["task_id"] == "task_01"]
    assert kept == PARAPHRASES["task_01"][:7]
