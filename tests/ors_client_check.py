"""Run by tests/test_ors_face.py with the Python of a venv that holds the `openreward`
package (and not synth: the two cannot share one environment, see the README).

    python ors_client_check.py SERVER_URL ENV_ID

Plays the library env's task_02 through openreward's own sync client and prints one
JSON line of what it saw, for the test to check.
"""

from __future__ import annotations

import json
import os
import sys
import threading

os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

from openreward import OpenReward  # noqa: E402
from openreward.api.errors import ToolCallError  # noqa: E402


def text(output) -> str:
    return "".join(b.text for b in output.blocks)


def main(server: str, env_id: str) -> dict:
    client = OpenReward(api_key="local", base_url=server)
    env = client.environments.get(env_id, base_url=server)
    out: dict = {"splits": env.list_splits()}
    train = env.list_tasks("train")
    out["train"] = [t.task_spec["task_id"] for t in train]
    out["test"] = [t.task_spec["task_id"] for t in env.list_tasks("test")]
    out["num_train"] = env.num_tasks("train")
    out["task_1"] = env.get_task("train", 1).task_spec["task_id"]
    out["range"] = [t.task_spec["task_id"] for t in env.get_task_range("train", 0, 2)]
    out["env_tools"] = [t.name for t in env.list_tools()]
    out["terminal"] = env.terminal_tool().name
    task = next(t for t in train if t.task_spec["task_id"] == "task_02")

    with env.session(task=task) as gold, env.session(task=task) as other:
        out["prompt"] = text_blocks(gold.get_prompt())
        out["messages"] = [(m["role"], m["content"][:40]) for m in gold.get_messages(format="openai")]
        out["session_tools"] = [t.name for t in gold.list_tools()]
        out["final_by_message"] = gold.is_assistant_message_final()
        member = gold.call_tool("get_member", {"email": "maya.patel@example.com"})
        out["member"] = json.loads(text(member))
        out["member_reward"], out["member_finished"] = member.reward, member.finished
        # malformed steps: an unknown tool and arguments that break the schema; the session stays usable
        out["errors"] = []
        for name, arguments in [("fly_to_moon", {}), ("checkout_book", {"member_id": "two", "book_id": 3})]:
            try:
                gold.call_tool(name, arguments)
                out["errors"].append(None)
            except ToolCallError as exc:
                out["errors"].append([exc.reason, str(exc)])
        refused = gold.call_tool("checkout_book", {"member_id": 2, "book_id": 4})  # the tool's own error
        out["tool_error"] = text(refused)
        loan = gold.call_tool("checkout_book", {"member_id": 2, "book_id": 3})
        out["loan"] = json.loads(text(loan))["title"]
        # the other session of the same task sees its own database: no loan there
        out["other_loans"] = json.loads(text(other.call_tool("list_loans", {"member_id": 2})))
        done = gold.call_terminal_tool("Dune is checked out to you.")
        out["gold_reward"], out["gold_finished"] = done.reward, done.finished
        out["gold_checks"] = [c["name"] for c in done.metadata["checks"]]
        try:
            gold.call_tool("list_loans", {"member_id": 2})
            out["after_finish"] = None
        except ToolCallError as exc:
            out["after_finish"] = exc.reason
        wrong = other.call_terminal_tool("I could not find that book.")
        out["wrong_reward"], out["wrong_finished"] = wrong.reward, wrong.finished

    # sessions at once from threads, by split and index
    rewards: dict[int, float] = {}

    def play(i: int) -> None:
        with env.session(split="train", index=1) as s:
            rewards[i] = s.call_terminal_tool("").reward

    threads = [threading.Thread(target=play, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out["parallel_rewards"] = [rewards[i] for i in range(3)]
    client.environments.close()
    return out


def text_blocks(blocks) -> str:
    return "".join(b.text for b in blocks)


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
