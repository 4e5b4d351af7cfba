"""`synth check`: the gates and the tests replay, with no model, from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from envkit import TOOL_BODIES, make_library_env
from typer.testing import CliRunner
from verifykit import copy_env, make_verified_library, set_tool_body

from synth.cli import app
from synth.folder.format import read_env_draft, write_env


def test_check_passes_a_verified_env_and_fails_a_copy_with_a_broken_tool(tmp_path: Path) -> None:
    env = make_verified_library(tmp_path / "good")
    runner = CliRunner()
    ok = runner.invoke(app, ["check", str(env)])
    assert ok.exit_code == 0, ok.output
    assert "city_library: verified" in ok.output and "1/1 env(s) verified" in ok.output
    report = json.loads((env / "report.json").read_text())
    assert report["gates"]["passed"] is True and report["status"] == "verified"
    assert set(report["gates"]["results"]) == {"database", "tool_contract", "rules", "solvable", "discriminates",
                                               "probes", "reward_cases", "deterministic", "robust", "regression"}
    # The probe rewards are shown per task and recorded in report.json `probes`.
    assert set(report["probes"]) == {"task_01", "task_02", "task_03", "task_04"}
    shown = [line for line in ok.output.splitlines() if line.strip().startswith("probes task_02: max ")]
    assert len(shown) == 1 and "shotgun 0." in shown[0] and "wrong record (checkout_book member_id 2 -> 1)" in shown[0]
    assert "!" not in shown[0]
    show = runner.invoke(app, ["show", str(env)])
    assert show.exit_code == 0 and "probe rewards" in show.output and "wrong record (checkout_book" in show.output
    assert json.loads(runner.invoke(app, ["show", str(env), "--json"]).output)["probes"]["task_02"][0]["probe"] == \
        "empty"

    broken = copy_env(env, tmp_path / "broken" / "city_library")
    # checkout_book stops taking a copy off the shelf: tasks and recorded tests must notice.
    set_tool_body(broken, "checkout_book", TOOL_BODIES["checkout_book"].replace(
        'db.execute("UPDATE books SET available_copies = available_copies - 1 WHERE book_id = ?", (book_id,))\n',
        ""))
    bad = runner.invoke(app, ["check", str(broken)])
    assert bad.exit_code == 1, bad.output
    assert "city_library: failed" in bad.output and "0/1 env(s) verified" in bad.output
    assert "checkout_book" in bad.output
    manifest = json.loads((broken / "env.json").read_text())
    assert manifest["status"] == "failed" and "checkout_book" in manifest["failure_reason"]
    report = json.loads((broken / "report.json").read_text())
    assert report["gates"]["results"]["regression"]["passed"] is False
    assert list(report["gates"]["results"]["solvable"]["details"]["tasks"]) == ["task_02"]

    # A folder of envs: both are checked, and one failure makes the command fail.
    both = runner.invoke(app, ["check", str(env), str(broken)])
    assert both.exit_code == 1 and "1/2 env(s) verified" in both.output


def test_check_leaves_a_never_verified_build_built(tmp_path: Path) -> None:
    env = make_library_env(tmp_path)
    draft = read_env_draft(env)
    draft.status = "built"
    write_env(draft, env)
    result = CliRunner().invoke(app, ["check", str(env)])
    assert result.exit_code == 1 and "city_library: built" in result.output
    assert "FAIL tool_contract: tool search_books: no test in tests.jsonl" in result.output
    manifest = json.loads((env / "env.json").read_text())
    assert manifest["status"] == "built" and "tool_contract" in manifest["failure_reason"]


def test_check_on_a_missing_folder_is_a_one_line_error(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "synth", "check", str(tmp_path / "nope")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("error: folder not found") and len(proc.stderr.strip().splitlines()) == 1
