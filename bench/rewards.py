"""Are the rewards fair to correct work, and closed to exploits? Counted over a set of env folders.

For every env folder, with no model:
- correct work: every "expect": "pass" case of verifier_tests.jsonl (paraphrases of the expected
  answer, independent solver runs) and every task's gold solution with its expected answer, each
  replayed on a fresh episode and scored by the verifier's rubric, by the state reward and by
  "both" (the rubric's score when the state reward passes); paid = a full 1.0;
- exploits: every exploit probe of validators/probe_kinds.py (doing nothing, shotgun, refusal,
  hedges with an alternative in the data and in no table, over-inclusive, wrong record, partial,
  collateral) and every "expect": "fail" case of verifier_tests.jsonl; paid = at least the probe
  threshold (0.5).

It prints per env and in total, per reward, how many correct cases were paid in full and how many
exploits were paid, then the probes paid per kind, and lists every case a reward got wrong. A
regression shows as a number.

    python bench/rewards.py [ENV_DIR ...]

With no folder it builds the offline demo first (`synth run -n 3` with no key, in a temporary
folder) and measures its three envs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from synth.runtime import Env  # noqa: E402
from synth.use.replay import run_actions  # noqa: E402
from synth.use.reward import state_match_reward  # noqa: E402
from synth_validators.common import read_folder  # noqa: E402
from synth_validators.probe_kinds import build_probes, new_context  # noqa: E402
from synth_validators.probes import DEFAULT_THRESHOLD  # noqa: E402

KINDS = ("rubric", "state", "both")


def scores(env: Env, task, calls, answer) -> dict[str, float]:
    """The rubric, state and both rewards of `calls` then `answer` on a fresh episode of `task`."""
    replay = run_actions(env, task, list(calls), answer=answer, snapshot=True)
    rubric = 0.0 if replay.reward is None or replay.reward.error else replay.reward.reward
    state = state_match_reward(env, task, replay.final_db, answer).reward if replay.final_db is not None else 0.0
    return {"rubric": rubric, "state": state, "both": rubric if state >= 1.0 else 0.0}


class Tally:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.misses: list[str] = []

    def add(self, group: str, got: dict[str, float], correct: bool, label: str) -> None:
        self.counts[(group, "n")] += 1
        for kind in KINDS:
            paid = got[kind] >= 1.0 if correct else got[kind] >= DEFAULT_THRESHOLD
            self.counts[(group, kind)] += paid
            if paid != correct:
                self.misses.append(f"  {kind:<6} {'did not pay' if correct else 'paid'} {got[kind]:.2f}: {label}")


def measure(env_dir: Path, tally: Tally, probe_kinds: Counter) -> None:
    folder = read_folder(env_dir)
    tasks = {t.task_id: t for t in folder.tasks}
    with Env.load(env_dir) as env:
        for case in folder.cases:
            task = tasks.get(case.task_id)
            if task is None:
                continue
            got = scores(env, task, task.gold if case.use_gold else case.calls, case.answer)
            group = "correct cases" if case.expect == "pass" else "recorded exploits"
            tally.add(group, got, case.expect == "pass", f"{env_dir.name} {case.case_id} {case.answer!r:.160}")
        ctx = new_context(env, volatile=folder.volatile, tasks=folder.tasks, tests=folder.tests)
        for task in folder.tasks:
            gold = run_actions(env, task, task.gold, evaluate=False, snapshot=True)
            tally.add("gold solutions", scores(env, task, task.gold, task.expected_answer), True,
                      f"{env_dir.name} {task.task_id} gold")
            if gold.errors or gold.final_db is None:
                continue
            ctx.gold_final = gold.final_db
            for probe in build_probes(ctx, task):
                got = scores(env, task, probe.calls, probe.answer)
                tally.add("exploit probes", got, False, f"{env_dir.name} {task.task_id} {probe.name}: "
                                                        f"{(probe.answer or '')!r:.160}")
                probe_kinds[(probe.name.split(" (")[0] if probe.kind != "hedged" else probe.name, "n")] += 1
                for kind in KINDS:
                    probe_kinds[(probe.name.split(" (")[0] if probe.kind != "hedged" else probe.name, kind)] += \
                        got[kind] >= DEFAULT_THRESHOLD


def row(label: str, counts: Counter, group: str) -> str:
    n = counts[(group, "n")]
    return f"{label:<34}" + "".join(f"{counts[(group, k)]:>5}/{n:<5}" for k in KINDS)


def demo_envs(out: Path) -> list[Path]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("SYNTH_")}
    done = subprocess.run([sys.executable, "-m", "synth", "run", "--out", str(out), "-n", "3", "--plain",
                           "--templates", "0"],
                          env={**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}, cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("error: the offline demo did not build:\n" + done.stderr[-2000:])
    return sorted(p for p in (out / "envs").iterdir() if p.is_dir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("envs", nargs="*", type=Path, help="env folders (default: the offline demo, built first)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synth-bench-rewards-") as tmp:
        envs = args.envs or demo_envs(Path(tmp) / "demo")
        total, kinds = Tally(), Counter()
        print(f"{'':<34}" + "".join(f"{k:>11}" for k in KINDS))
        for env_dir in envs:
            one = Tally()
            measure(env_dir, one, kinds)
            total.counts.update(one.counts)
            total.misses += one.misses
            print(env_dir.name)
            for group, label in (("correct cases", "  correct cases paid in full"),
                                 ("gold solutions", "  gold solutions paid in full"),
                                 ("exploit probes", "  exploit probes paid"),
                                 ("recorded exploits", "  recorded exploits paid")):
                print(row(label, one.counts, group))
        print(f"total over {len(envs)} env(s)")
        for group, label in (("correct cases", "  correct cases paid in full"),
                             ("gold solutions", "  gold solutions paid in full"),
                             ("exploit probes", "  exploit probes paid"), ("recorded exploits", "  recorded exploits paid")):
            print(row(label, total.counts, group))
        print("exploit probes paid, by kind")
        for name in sorted({k for k, _ in kinds}):
            print(row(f"  {name}", kinds, name))
        if total.misses:
            print(f"what a reward got wrong ({len(total.misses)}):")
            print("\n".join(total.misses))


if __name__ == "__main__":
    main()
