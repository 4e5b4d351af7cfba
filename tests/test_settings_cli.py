"""Settings as flags, `synth config`, and every flag the docs or an error message names existing."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from typer.testing import CliRunner

from synth.cli import app
from synth.config import ConfigError, Settings, load_settings

REPO = Path(__file__).resolve().parents[1]
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]*[a-z]")


@cache
def help_of(command: str) -> str:
    result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (command, result.output)
    return result.output


def commands() -> list[str]:
    names = [c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands]
    for group in app.registered_groups:
        names += [f"{group.name} {c.name or c.callback.__name__}" for c in group.typer_instance.registered_commands]
    return names


def test_every_setting_is_a_flag_of_synth_run_and_a_line_of_synth_config(tmp_path, monkeypatch):
    text = help_of("run")
    for field in Settings.model_fields:
        assert "--" + field.replace("_", "-") in text, field
    monkeypatch.chdir(tmp_path)
    (tmp_path / "synth.toml").write_text("concurrency = 3\n")
    monkeypatch.setenv("SYNTH_TEMPERATURE", "0.2")
    result = CliRunner().invoke(app, ["config", "--max-cost", "7", "--out", "elsewhere", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert list(rows) == list(Settings.model_fields)
    assert rows["concurrency"] == {**rows["concurrency"], "value": 3, "source": "synth.toml"}
    assert rows["temperature"]["value"] == 0.2 and rows["temperature"]["source"] == "SYNTH_TEMPERATURE"
    assert rows["max_cost"]["value"] == 7.0 and rows["max_cost"]["source"] == "flag --max-cost"
    assert rows["model"]["source"] == "default" and rows["model"]["env"] == "SYNTH_MODEL"
    # the cache follows --out unless it is set itself
    assert rows["cache_dir"]["value"] == "elsewhere/.cache" and rows["cache_dir"]["source"].startswith("default")
    plain = CliRunner().invoke(app, ["config"])
    assert re.search(r"^concurrency\s+3\s+\(synth\.toml\)$", plain.output, re.M)


def test_a_settings_file_error_points_to_the_command_that_lists_the_keys(tmp_path):
    (tmp_path / "synth.toml").write_text("concurency = 3\n")
    try:
        load_settings(cwd=tmp_path, environ={})
    except ConfigError as exc:
        assert "unknown key(s) concurency; `synth config` lists the settings keys" in str(exc)
    else:
        raise AssertionError("an unknown key must be an error")


def test_help_shows_the_defaults_of_settings_flags():
    text = help_of("run")
    assert re.search(r"--concurrency\s.*\[default: 8\]", text)
    assert re.search(r"--dedup-threshold\s.*\[default: 0\.64\]", text)
    assert "[default: <out>/.cache]" in text


OTHER_TOOLS = ("vf-eval", "`awm", "pip install", "ray start", "python -m verl", "python3 -m verl", "python examples/",
               "example's")


def test_every_flag_the_readme_names_exists_on_its_command():
    """A flag after `synth CMD` on a line must be CMD's; a flag with no command before it, `synth run`'s."""
    names = "|".join(sorted(map(re.escape, commands()), key=len, reverse=True))
    for line in (REPO / "README.md").read_text().splitlines():
        for flag in FLAG.finditer(line):
            if flag.group() == "--help":
                continue
            head = line[:flag.start()]
            before = re.findall(rf"\bsynth ({names})\b", head)
            other = max((head.rfind(tool) for tool in OTHER_TOOLS), default=-1)
            if other > max((head.rfind(f"synth {b}") for b in before), default=-1):
                continue  # a flag of another program (vf-eval, pip, ray) the README quotes
            home = before[-1] if before else "run"
            assert flag.group() in help_of(home), f"{flag.group()} not on `synth {home}` (README: {line.strip()[:80]})"


def test_every_flag_an_error_message_or_help_names_exists_somewhere():
    every_help = "\n".join(help_of(c) for c in ["", *commands()])
    missing = {}
    for source in list((REPO / "synth").rglob("*.py")) + list((REPO / "validators").rglob("*.py")):
        for literal in re.findall(r"f?\"[^\"\n]*\"|f?'[^'\n]*'", source.read_text()):
            if "pip " in literal:
                continue  # pip's own flags
            for flag in FLAG.findall(literal):
                if flag not in every_help:
                    missing.setdefault(flag, str(source.relative_to(REPO)))
    assert not missing, f"flags named in messages that no command accepts: {missing}"
