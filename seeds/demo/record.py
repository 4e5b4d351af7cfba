"""Write the model answers of seeds/demo/answers/*.py into the demo's recordings (seeds/demo/*.json).

What it writes is only what a model answers: the gold stage's verifier bodies, write tasks'
reports, read tasks' facts and write tasks' free columns (into the recorded gold replies), the
replies of the paraphrase, solve and red_team stages, and from seeds/demo/templates/*.py the task
templates (stage "templates", with one broken first version and its repair) and the reward agents'
answers about each template's sampled instance. Which requests the pipeline makes (the batches and their subjects, the solver's turns) is
computed here with synth's own batching code and constants, so the recordings follow the program;
nothing the program computes (rewards, verdicts, tool results) is written by hand.

    python seeds/demo/record.py
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

from synth.config import Settings
from synth.llm.budgets import pack, planned_tokens
from synth.pipeline.stages.check import gold, paraphrase, redteam, solver
from synth.pipeline.tasks import ask

HERE = Path(__file__).resolve().parent
NEW_STAGES = ("paraphrase", "solve", "red_team")


def load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"demo_answers_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def batches(stage: Any, ids: list[str]) -> list[list[str]]:
    """The batches the stage's agent makes of `ids` at the default output cap (and its cap on tasks
    per call, if it has one)."""
    limit = planned_tokens(stage.STAGE, Settings().max_tokens)
    groups = pack(ids, {i: stage.TOKENS_PER_TASK for i in ids}, limit)
    most = getattr(stage, "MAX_TASKS_PER_CALL", None)
    return [g[i:i + most] for g in groups for i in range(0, len(g), most)] if most else groups


def calls(steps: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"tool": tool, "arguments": arguments} for tool, arguments in steps]


def edit_gold(reply: dict[str, Any], answers: Any) -> dict[str, Any]:
    """A recorded gold reply with the new verifier bodies and reports (JSON or text around JSON)."""
    def fix(entry: dict[str, Any], task_id: str) -> None:
        entry["verifier_body"] = answers.VERIFIERS[task_id]
        if task_id in answers.EXPECTED:
            entry["expected_answer"] = answers.EXPECTED[task_id]
        entry["facts"] = [{"value": v, "kind": k} for v, k in answers.FACTS[task_id]] if task_id in answers.FACTS \
            else None
        entry["free_columns"] = answers.FREE_COLUMNS.get(task_id)

    def fix_all(data: dict[str, Any], subject: str) -> dict[str, Any]:
        if "tasks" in data:
            for entry in data["tasks"]:
                fix(entry, entry["task_id"])
        else:
            fix(data, subject.split("/", 1)[1])
        return data

    subject = reply.pop("_subject")
    if "json" in reply:
        return {**reply, "json": fix_all(reply["json"], subject)}
    text = reply["text"]
    start, end = text.index("{"), text.rindex("}") + 1
    indent = 2 if re.match(r"\{\n  \"", text[start:]) else None
    data = fix_all(json.loads(text[start:end]), subject)
    return {**reply, "text": text[:start] + json.dumps(data, indent=indent, ensure_ascii=False) + text[end:]}


def gold_entries(rules: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every recorded gold answer by task id, with the original reply when it answered that task alone."""
    entries: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for rule in rules:
        for reply in rule["replies"]:
            if "json" in reply:
                data = reply["json"]
            else:
                text = reply["text"]
                data = json.loads(text[text.index("{"):text.rindex("}") + 1])
            if "tasks" in data:
                for entry in data["tasks"]:
                    entries[entry["task_id"]] = (entry, None)
            else:
                task_id = rule["subject"].split("/", 1)[1]
                entries[task_id] = ({"task_id": task_id, **data}, reply)
    return entries


def regroup_gold(env: str, rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gold replies regrouped into the batches the gold stage asks for at the default output cap
    (a task asked alone keeps its recorded lone reply, or gets the lone answer shape)."""
    entries = gold_entries(rules)
    out = []
    for ids in batches(gold, sorted(entries)):
        if len(ids) > 1:
            reply = {"json": {"tasks": [entries[i][0] for i in ids]}}
        else:
            entry, lone = entries[ids[0]]
            reply = lone or {"json": {k: v for k, v in entry.items() if k != "task_id"}}
        out.append({"stage": "gold", "subject": f"{env}/{'+'.join(ids)}", "replies": [reply]})
    return out


def reply_json(reply: dict[str, Any]) -> dict[str, Any]:
    if "json" in reply:
        return reply["json"]
    text = reply["text"]
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


def by_tool(rules: list[dict[str, Any]], stage: str) -> dict[str, Any] | None:
    """The recorded tests (check_tests) or verdicts (check_judge) of every batch, as one assembled rule
    keyed by tool: the replay answers whatever batches the program asks for."""
    mine = [r for r in rules if r["stage"] == stage]
    if not mine:
        return None
    if all("parts" in r for r in mine):
        return mine[0]  # already assembled
    parts: dict[str, Any] = {}
    for rule in mine:
        for reply in rule.get("replies", []):
            data = reply_json(reply)
            if stage == "check_tests":
                for entry in data["tools"]:
                    parts[entry["tool"]] = entry
            else:  # a tool judged again after its repair gets its verdicts as a later version
                mine_now: dict[str, list[Any]] = {}
                for verdict in data["verdicts"]:
                    mine_now.setdefault(verdict["test_id"].rsplit(".", 1)[0], []).append(verdict)
                for tool, verdicts in mine_now.items():
                    parts.setdefault(tool, {"versions": []})["versions"].append(verdicts)
    env = mine[0]["subject"].split("/", 1)[0]
    return {"stage": stage, "subject": f"{env}/*", "replies": [],
            "field": "tools" if stage == "check_tests" else "verdicts", "parts": parts}


def solver_turns(answers: Any, ids: list[str]) -> list[dict[str, Any]]:
    """The solver's reply for each turn: every task still open gets its next step."""
    steps = {i: answers.SOLVER[i] for i in ids}
    for task_id, plan in steps.items():
        assert plan and plan[-1][1] is not None and all(a is None for _, a in plan[:-1]), task_id
        assert len(plan) <= solver.MAX_TURNS, task_id
    replies = []
    for turn in range(max(len(p) for p in steps.values())):
        open_ = [i for i in ids if len(steps[i]) > turn]
        replies.append({"json": {"tasks": [{"task_id": i, "calls": calls(steps[i][turn][0]),
                                            "answer": steps[i][turn][1]} for i in open_]}})
    return replies


def record(path: Path) -> None:
    answers = load(path)
    recording = HERE / answers.RECORDING
    recorded = json.loads(recording.read_text())["rules"]
    rules = [r for r in recorded if r["stage"] not in (*NEW_STAGES, "gold", "check_tests", "check_judge", "templates")]
    for stage in ("check_tests", "check_judge"):
        assembled = by_tool(recorded, stage)
        if assembled is not None:
            rules.append(assembled)
    for rule in regroup_gold(answers.ENV, [r for r in recorded if r["stage"] == "gold"]):
        rule["replies"] = [edit_gold({**reply, "_subject": rule["subject"]}, answers) for reply in rule["replies"]]
        rules.append(rule)
    tasks, reads = sorted(answers.VERIFIERS), sorted(answers.PARAPHRASES)
    for ids in batches(paraphrase, reads):
        rules.append({"stage": "paraphrase", "subject": f"{answers.ENV}/{'+'.join(ids)}", "replies": [{"json": {
            "tasks": [{"task_id": i, "paraphrases": answers.PARAPHRASES[i]} for i in ids]}}]})
    for ids in batches(solver, tasks):
        rules.append({"stage": "solve", "subject": f"{answers.ENV}/{'+'.join(ids)}",
                      "replies": solver_turns(answers, ids)})
    for ids in batches(redteam, tasks):
        rules.append({"stage": "red_team", "subject": f"{answers.ENV}/{'+'.join(ids)}", "replies": [{"json": {
            "tasks": [{"task_id": i, "attempts": [{"idea": idea, "calls": calls(steps), "answer": answer}
                                                  for idea, steps, answer in answers.RED_TEAM[i]]} for i in ids]}}]})
    template_file = HERE / "templates" / path.name
    if template_file.exists():
        rules += template_rules(answers.ENV, load(template_file))
    recording.write_text(json.dumps({"rules": rules}, indent=2, ensure_ascii=False) + "\n")
    print(f"{recording.name}: {len(rules)} rules")


def template_rules(env: str, module: Any) -> list[dict[str, Any]]:
    """The `templates` stage's answers, in the calls the stage makes at the default settings (a kind's
    templates split over its calls in order, the last taking the rest), the repairs of the templates
    whose first version was broken, and the reward agents' answers about the sampled instances, as
    rules assembled by instance (so they follow however the agents batch them)."""
    settings = Settings()
    broken = getattr(module, "BROKEN", {})
    rules = []
    plan = ask.plan_calls(env, settings.templates, settings.max_tokens)
    for kind, items in module.TEMPLATES.items():
        asked = [(size, subject) for k, size, subject in plan if k == kind]
        start = 0
        for n, (size, subject) in enumerate(asked):
            end = len(items) if n == len(asked) - 1 else start + size
            answer = [{**t, **broken.get(t["name"], {})} for t in items[start:end]]
            rules.append({"stage": "templates", "subject": subject, "replies": [{"json": {"templates": answer}}]})
            start = end
    for name in broken:
        fixed = next(t for items in module.TEMPLATES.values() for t in items if t["name"] == name)
        rules.append({"stage": "templates", "subject": f"{env}/{name}",
                      "replies": [{"json": {**fixed, "diagnosis": module.DIAGNOSIS[name]}}]})
    rules.append({"stage": "paraphrase", "subject": f"{env}/*", "replies": [], "field": "tasks",
                  "parts": {t: {"task_id": t, "paraphrases": p} for t, p in module.PARAPHRASES.items()}})
    # The solver's conversation keeps one subject for all its turns, so its turns are recorded per batch,
    # in the order the step hands the samples to the agents (the templates' order: read, then write).
    order = [t["name"] for kind in ("read", "write") for t in module.TEMPLATES.get(kind, [])]
    sampled = sorted(module.SOLVER, key=lambda tid: order.index(tid.rsplit("_", 1)[0]))
    for ids in batches(solver, sampled):
        rules.append({"stage": "solve", "subject": f"{env}/{'+'.join(ids)}", "replies": solver_turns(module, ids)})
    rules.append({"stage": "red_team", "subject": f"{env}/*", "replies": [], "field": "tasks", "parts": {
        t: {"task_id": t, "attempts": [{"idea": idea, "calls": calls(steps), "answer": answer}
                                       for idea, steps, answer in tries]} for t, tries in module.RED_TEAM.items()}})
    return rules


def main() -> None:
    for path in sorted((HERE / "answers").glob("*.py")):
        record(path)


if __name__ == "__main__":
    sys.exit(main())
