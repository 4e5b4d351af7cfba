"""The reward agents on a sample of each template's instances (`synth tasks`, fake model server): a read
template whose verifier rejects correct rewordings is found by the paraphrase agent, confirmed by the
checking agent, repaired once with that evidence and kept; the agents' cases stay in verifier_tests.jsonl,
and `synth check` replays them under both rewards."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from test_task_templates import COUNT_CHECK, checkout_template
from verifykit import make_verified_library

from synth.artifacts import TemplateDraft
from synth.config import Settings
from synth.folder.format import read_env_draft
from synth.llm import Gateway
from synth.llm.script import Reply
from synth.pipeline.tasks.ask import to_template
from synth.pipeline.tasks.instances import Seen, instantiate
from synth.pipeline.tasks.step import add_tasks
from synth.pipeline.verify import check_env

ENV = "city_library"
SHELF = ("SELECT book_id, title, genre, available_copies AS free, total_copies AS total FROM books "
         "WHERE available_copies > 0 ORDER BY book_id")
# Too strict: a correct answer must also repeat the title. Its repair asks for the count alone.
STRICT = COUNT_CHECK.replace("{PICK}", 'row["available_copies"]').replace(
    "states(answer, [free], others)", 'states(answer, [free, params["title"]], others)')
FAIR = COUNT_CHECK.replace("{PICK}", 'row["available_copies"]')


def shelf_template(body: str) -> dict:
    return {"name": "copies_on_the_shelf", "kind": "read", "difficulty": "easy",
            "instruction": "How many copies of {title} are on the shelf at the moment?", "query": SHELF,
            "actions": [{"tool": "search_books", "arguments": {"query": "{title}"}}],
            "expected_answer": "{free} copies of {title} are on the shelf.",
            "facts": [{"value": "{free}", "kind": "count"}], "free_columns": None, "verifier_body": body}


def first_instances(env_dir: Path) -> dict:
    """The instance the agents sample of each template (its first row), as the step makes it."""
    draft = read_env_draft(env_dir)
    tools = {t.name: t for t in draft.tools}
    db = (env_dir / "db" / "initial.sqlite").read_bytes()
    out = {}
    for raw in (shelf_template(STRICT), checkout_template(True)):
        made = instantiate(to_template(TemplateDraft.model_validate(raw)), db, tools, Seen.of(draft.tasks, tools), 1)
        out[made.tasks[0].task_id] = made.tasks[0]
    return out


def test_a_verifier_the_paraphrase_agent_and_the_judge_catch_is_repaired_and_its_cases_replay(fake_model,
                                                                                             tmp_path: Path):
    library = make_verified_library(tmp_path)
    sampled = first_instances(library)
    read = next(t for t in sampled.values() if t.kind == "read")
    assert read.task_id == "copies_on_the_shelf_001" and read.bindings["free"] == 2
    words = ["2", "Two copies.", "2 are on the shelf right now.", "You'll find two copies on the shelf.",
             "There are 2 copies of The Left Hand of Darkness on the shelf.", "Two of them are in."]

    def ids(info) -> list[str]:
        return info.subject.split("/", 1)[1].split("+")

    script = fake_model.script
    script.add("templates", f"{ENV}/read", Reply(json={"templates": [shelf_template(STRICT)]}))
    script.add("templates", f"{ENV}/write", Reply(json={"templates": [checkout_template(True)]}))
    script.add("templates", f"{ENV}/copies_on_the_shelf",
               Reply(json={**shelf_template(FAIR), "diagnosis": "it demanded the title; only the count is asked"}))
    script.add("paraphrase", f"{ENV}/*", handler=lambda info: Reply(json={"tasks": [
        {"task_id": i, "paraphrases": words} for i in ids(info)]}))
    script.add("solve", f"{ENV}/*", handler=lambda info: Reply(json={"tasks": [
        {"task_id": i, "calls": [c.model_dump() for c in sampled[i].gold],
         "answer": str(sampled[i].expected_answer)} for i in ids(info)]}))
    script.add("red_team", f"{ENV}/*", handler=lambda info: Reply(json={"tasks": [
        {"task_id": i, "attempts": [{"idea": "say nothing useful", "calls": [], "answer": "No idea, sorry."}]}
        for i in ids(info)]}))
    script.add("reward_judge", f"{ENV}/*", handler=lambda info: Reply(json={"verdicts": [
        {"item_id": i, "verdict": "correct", "reason": "it gives the number of copies on the shelf"}
        for i in ids(info)]}))

    settings = Settings(model="openai/test-model", base_url=fake_model.openai_base_url, cache_dir=tmp_path / "cache",
                        retry_base_delay=0.01, templates=2, template_sample=1)
    result = asyncio.run(add_tasks(library, Gateway(settings), settings))
    outcomes = {o.template_id: o for o in result.templates}
    shelf = outcomes["copies_on_the_shelf"]
    assert shelf.status == "kept" and [r["stage"] for r in shelf.repairs] == ["agents"]
    assert any("is correct (checking agent:" in p for p in shelf.repairs[0]["problems"])
    assert shelf.agents[read.task_id]["paraphrase"]["failed"] == 5  # all but the one naming the title
    assert outcomes["check_out_for_member"].status == "kept" and not outcomes["check_out_for_member"].repairs
    assert {r.stage for r in fake_model.requests} >= {"templates", "paraphrase", "solve", "red_team", "reward_judge"}

    draft = read_env_draft(library)
    assert next(t for t in draft.templates if t.template_id == "copies_on_the_shelf").verifier_body.strip() == \
        FAIR.strip()
    cases = [c for c in draft.verifier_tests if c["task_id"] == read.task_id]
    assert {c["answer"] for c in cases if c["source"] == "paraphrase" and c["expect"] == "pass"} == set(words)
    report = json.loads((library / "report.json").read_text())
    assert report["tasks_step"]["calls"] >= 5 and report["tasks_step"]["tokens_per_task"] > 0
    checked = check_env(library)  # the reward_cases gate replays the paraphrases under both rewards
    assert checked.verified, checked.reasons
    assert next(g for g in checked.gates if g.name == "reward_cases").details["by_source"]["paraphrase"] >= 6
