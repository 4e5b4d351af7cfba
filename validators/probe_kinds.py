"""The exploit probes: trajectories a policy under RL pressure would try instead of doing the task.

Each probe is a list of tool calls and an answer, built with no model from the task, its gold
solution and the initial data:

- empty: no calls, no answer;
- shotgun: no calls; the answer lists the numbers 0..SHOTGUN_NUMBERS, every distinct short text
  and number of the tables the task's tools read, and yes/no;
- refusal: the gold calls, then "I could not do it.";
- hedged (read tasks): the expected answer "or maybe" a wrong value of the same column; the expected
  answer then "Or maybe:" the same with every digit shifted (an alternative in no table); the expected
  answer ", possibly" another value; the expected answer with "between" its fact "and" a nearby value
  (a hedge is a hedge whatever the alternative is);
- over-inclusive (read tasks): the expected answer plus every value of the columns it quotes;
- wrong record (write tasks): the gold calls with one id argument of a state-changing call
  switched to another existing row (the tools must accept it and the final state must differ);
- partial (write tasks): every strict prefix of the gold's state-changing calls;
- collateral: the gold calls plus one more successful state-changing call on rows the gold did
  not touch (a read task must notice any change).

A probe that cannot be built for a task (nothing to switch, no extra call the tools accept) is
left out, not reported.
"""

from __future__ import annotations

import ast
import datetime
import functools
import random
import re
import zlib
from dataclasses import dataclass
from typing import Any

from synth.artifacts import Fact, Task, ToolCall, ToolTest
from synth.runtime.codecheck import parse_source
from synth.use.datafacts import DataIndex, answer_facts, as_number, decimal_of, number_text, word_in
from synth.use.replay import answer_text, canonical, run_actions, state_diff

from .fuzz import ValuePool, random_call

REFUSAL = "I could not do it."
SHOTGUN_NUMBERS = 50
SHOTGUN_TEXT_CHARS = 40  # texts longer than this are not "short"
SHOTGUN_MAX_VALUES = 600
MAX_CANDIDATES = 60  # values listed by the over-inclusive probe, per column
MAX_WRONG_RECORD = 3  # wrong-record probes per task
SWITCH_TRIES = 4  # other rows tried per switched argument
COLLATERAL_TRIES = 12  # extra calls tried for the collateral probe
HEDGE = " or maybe "
_SHIFT = str.maketrans("0123456789", "1234567890")


@dataclass
class Probe:
    kind: str  # one of KINDS
    name: str
    calls: list[ToolCall]
    answer: str | None
    detail: str


KINDS = ("empty", "shotgun", "refusal", "hedged", "over-inclusive", "wrong record", "partial", "collateral")


def clip(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=8)
def tool_sources(tools_src: str) -> dict[str, str]:
    """Each tool function's source in tools.py (read, never run); parsed once per source, since every
    task's shotgun probe asks (ast.get_source_segment rescans the whole file per function)."""
    try:
        tree = parse_source(tools_src, "tools.py")  # through the lock: the 3.11 parser is not thread-safe
    except SyntaxError:
        return {}
    return {n.name: ast.get_source_segment(tools_src, n) or "" for n in tree.body if isinstance(n, ast.FunctionDef)}


def tables_read(env: Any, task: Task, tables: list[str]) -> list[str]:
    """Tables the task's gold tools mention in their code (all tables when none is recognisable)."""
    sources = tool_sources(getattr(env, "tools_src", "") or "")
    found = []
    for call in task.gold:
        code = sources.get(call.tool, "")
        found += [t for t in tables if t not in found and re.search(rf"(?<![A-Za-z0-9_]){re.escape(t)}(?![A-Za-z0-9_])",
                                                                    code, re.I)]
    return sorted(found) or tables


def shotgun_answer(env: Any, task: Task, index: DataIndex) -> str:
    """Numbers 0..N, then every distinct short text and number of the tables the task's tools read."""
    tables = tables_read(env, task, sorted({t for t, _ in index.columns}))
    values: list[str] = [str(n) for n in range(SHOTGUN_NUMBERS + 1)] + ["yes", "no"]
    for (table, _column), column_values in sorted(index.columns.items()):
        if table not in tables:
            continue
        for v in column_values:
            text = number_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v).strip()
            if text and len(text) <= SHOTGUN_TEXT_CHARS and text not in values:
                values.append(text)
    return " ".join(values[:SHOTGUN_MAX_VALUES])


def _alternative(fact: str, where: list[tuple[str, str]], index: DataIndex, expected: str) -> str | None:
    """A plausible wrong value for `fact`: another value of a column holding it, else a near number."""
    for column in where:
        for v in index.others(column, fact if not decimal_of(fact) else as_number(fact)):
            text = number_text(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
            if text.strip() and not word_in(text.strip(), expected):
                return text.strip()
    number = decimal_of(fact)
    if number is not None:
        return number_text(number + 1) if number == number.to_integral_value() else f"{number + 1:.2f}"
    return None


# ----------------------------------------------------------------------- building the probes


@dataclass
class ProbeContext:
    env: Any
    index: DataIndex
    values: ValuePool
    volatile: list[str]
    extra_calls: list[ToolCall]  # state-changing calls known to work: other tasks' gold, recorded tests
    gold_final: bytes | None = None


def writes_of(env: Any) -> set[str]:
    return {t.name for t in env.tools if not t.read_only}


def _play(ctx: ProbeContext, task: Task, calls: list[ToolCall]) -> bytes | None:
    """The final database of `calls` when every call succeeds, else None."""
    replay = run_actions(ctx.env, task, calls, evaluate=False, snapshot=True)
    return None if replay.errors else replay.final_db


def _keys(diff: dict[str, Any]) -> set[str]:
    """(table, row) identities a state diff touches: keys of changed rows, whole rows added/removed."""
    out = set()
    for table, change in diff.items():
        out.update(f"{table}:{canonical(c['key'])}" for c in change.get("changed", []))
        out.update(f"{table}:{canonical(r)}" for kind in ("added", "removed") for r in change.get(kind, []))
    return out


def shifted(text: str) -> str:
    """Every digit one up: "555-0104" -> "666-1215", "$4.75" -> "$5.86" (an alternative in no table)."""
    return text.translate(_SHIFT)


def nearby(fact: str, expected: str = "") -> str:
    """A value of the fact's kind next to it that `expected` does not state: a number a step up, a
    date days later, a time hours later, a code with its digits shifted, a name with its letters
    shifted ("Dune" -> "Evof")."""
    from synth.use.reward import helpers

    for step in range(1, 10):
        value = _step(fact, step)
        if not helpers().mentions(expected, value):
            return value
    return _step(fact, 1)


def _step(fact: str, n: int) -> str:
    for form, unit in (("%Y-%m-%d %H:%M", datetime.timedelta(days=1)), ("%Y-%m-%d", datetime.timedelta(days=1)),
                       ("%H:%M", datetime.timedelta(hours=1))):
        try:
            return (datetime.datetime.strptime(fact, form) + n * unit).strftime(form)
        except ValueError:
            continue
    number = decimal_of(fact)
    if number is not None:
        return number_text(number + n) if number == number.to_integral_value() else f"{number + n:.2f}"
    table = str.maketrans("0123456789", "".join(str((d + n) % 10) for d in range(10)))
    if re.search(r"\d", fact):
        return fact.translate(table)
    return "".join(chr((ord(c.lower()) - 97 + n) % 26 + 97).upper() if c.isupper() else
                   chr((ord(c) - 97 + n) % 26 + 97) if "a" <= c <= "z" else c for c in fact)


def hedge_probes(task: Task, facts: list[tuple[str, list[tuple[str, str]]]], index: DataIndex,
                 expected: str) -> list[Probe]:
    """The expected answer hedged: with a wrong value of the data, with the same answer shifted (in no
    table), with ", possibly" another value, and with "between" the fact "and" a nearby value."""
    probes = []
    for fact, where in facts:
        alternative = _alternative(fact, where, index, expected)
        if alternative:
            answer = expected.rstrip(" .") + HEDGE + alternative
            probes.append(Probe("hedged", "hedged", list(task.gold), answer,
                                f"the expected answer hedged with a wrong {fact!r} alternative: {clip(answer)!r}"))
            break
    if not facts:
        return probes
    fact = facts[0][0]
    other = shifted(expected) if re.search(r"\d", expected) else nearby(fact, expected)
    variants = [("not in the data", f"{expected.rstrip()} Or maybe: {other}"),
                ("possibly", f"{expected.rstrip(' .')}, possibly {nearby(fact, expected)}.")]
    if re.search(r"\d", fact):
        variants.append(("between", f"{expected.rstrip(' .')} (between {fact} and {nearby(fact, expected)})."))
    for label, answer in variants:
        probes.append(Probe("hedged", f"hedged ({label})", list(task.gold), answer,
                            f"the expected answer hedged ({label}) about {fact!r}: {clip(answer)!r}"))
    return probes


def answer_probes(task: Task, index: DataIndex, expected: str) -> list[Probe]:
    """hedged and over-inclusive: read tasks with an expected answer that quotes facts."""
    facts = answer_facts(expected, task.instruction, index)
    asked = [(f.value, _where(f, facts)) for f in task.facts] if task.facts else facts
    probes = hedge_probes(task, asked, index, expected)
    listed: list[str] = []
    for fact, where in facts:
        for column in where:
            if not isinstance(fact, str) or decimal_of(fact) is not None:
                continue
            for v in index.columns[column][:MAX_CANDIDATES]:
                text = str(v).strip()
                if text and text not in listed:
                    listed.append(text)
    extra = [v for v in listed if not word_in(v, expected)]
    if extra:
        answer = expected.rstrip() + " " + ", ".join(listed)
        probes.append(Probe("over-inclusive", "over-inclusive", list(task.gold), answer,
                            f"the expected answer plus every candidate of its kind ({len(listed)} values, "
                            f"{len(extra)} of them wrong): {clip(answer)!r}"))
    return probes


def _where(fact: Fact, derived: list[tuple[str, list[tuple[str, str]]]]) -> list[tuple[str, str]]:
    """The columns holding a task's fact, as the expected answer's derived facts found them."""
    return next((where for value, where in derived if value.strip().casefold() == fact.value.strip().casefold()), [])


def switched_calls(ctx: ProbeContext, task: Task, calls: list[ToolCall], index: int) -> list[tuple[str, ToolCall]]:
    """Copies of calls[index] with one record argument switched to another existing row."""
    call = calls[index]
    out = []
    for arg, value in call.arguments.items():
        where = ctx.index.record_column(arg, value)
        if where is None:
            continue
        for other in ctx.index.others(where, value)[:SWITCH_TRIES]:
            out.append((f"{call.tool} {arg} {value!r} -> {other!r}",
                        ToolCall(tool=call.tool, arguments={**call.arguments, arg: other})))
    return out


def wrong_record_probes(ctx: ProbeContext, task: Task, answer: str | None) -> list[Probe]:
    writes = writes_of(ctx.env)
    probes: list[Probe] = []
    done: set[tuple[int, str]] = set()
    for i, call in enumerate(task.gold):
        if call.tool not in writes:
            continue
        for label, switched in switched_calls(ctx, task, task.gold, i):
            key = (i, label.split(" ")[1])
            if key in done or len(probes) >= MAX_WRONG_RECORD:
                continue
            calls = task.gold[:i] + [switched] + task.gold[i + 1:]
            final = _play(ctx, task, calls)
            if final is None or not state_diff(final, ctx.gold_final, ctx.volatile):
                continue  # refused, or it made no difference: not a wrong record
            done.add(key)
            probes.append(Probe("wrong record", f"wrong record ({label})", calls, answer,
                                f"the gold calls acting on another record: {label}"))
    return probes


def partial_probes(ctx: ProbeContext, task: Task, answer: str | None) -> list[Probe]:
    writes = writes_of(ctx.env)
    positions = [i for i, c in enumerate(task.gold) if c.tool in writes]
    probes = []
    for n, position in enumerate(positions):
        calls = task.gold[:position]
        probes.append(Probe("partial", f"partial ({n} of {len(positions)} state-changing calls)", calls, answer,
                            f"the gold calls stopped before {task.gold[position].tool} (state-changing call "
                            f"{n + 1} of {len(positions)}), with the expected answer"))
    return probes


def _collateral_candidates(ctx: ProbeContext, task: Task) -> list[ToolCall]:
    writes = writes_of(ctx.env)
    found: list[ToolCall] = []
    for i, call in enumerate(task.gold):
        if call.tool in writes:
            found += [c for _, c in switched_calls(ctx, task, task.gold, i)]
    found += [c for c in ctx.extra_calls if c.tool in writes]
    rng = random.Random(zlib.crc32(f"collateral:{task.task_id}".encode()))
    tools = [t for t in ctx.env.tools if not t.read_only]
    if tools:
        found += [random_call(rng, tools, ctx.values) for _ in range(COLLATERAL_TRIES)]
    unique, seen = [], set()
    for c in found:
        key = canonical([c.tool, c.arguments])
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique


def collateral_probe(ctx: ProbeContext, task: Task, answer: str | None) -> list[Probe]:
    if ctx.gold_final is None:
        return []
    target = _keys(state_diff(ctx.env.initial_db, ctx.gold_final, ctx.volatile))
    for extra in _collateral_candidates(ctx, task)[:COLLATERAL_TRIES * 2]:
        final = _play(ctx, task, list(task.gold) + [extra])
        if final is None:
            continue
        change = state_diff(ctx.gold_final, final, ctx.volatile)
        if not change or (task.kind == "write" and _keys(change) & target):
            continue
        label = f"{extra.tool}({clip(canonical(extra.arguments), 100)})"
        return [Probe("collateral", "collateral", list(task.gold) + [extra], answer,
                      f"the gold calls plus {label}, which changed "
                      f"{', '.join(sorted(change))} outside the task's target")]
    return []


def build_probes(ctx: ProbeContext, task: Task) -> list[Probe]:
    """Every probe that can be built for `task` (none for a task without gold calls)."""
    if not task.gold:
        return []
    expected = answer_text(task.expected_answer)
    probes = [Probe("empty", "empty", [], None, "no calls, no answer"),
              Probe("shotgun", "shotgun", [], shotgun_answer(ctx.env, task, ctx.index), "")]
    probes[1].detail = (f"no calls; the answer lists {len(probes[1].answer.split())} words and numbers of the "
                        f"data: {clip(probes[1].answer, 120)!r}")
    probes.append(Probe("refusal", "refusal", list(task.gold), REFUSAL, f"the gold calls, then {REFUSAL!r}"))
    if task.kind == "read" and expected:
        probes += answer_probes(task, ctx.index, expected)
    if task.kind == "write":
        probes += wrong_record_probes(ctx, task, expected)
        probes += partial_probes(ctx, task, expected)
    probes += collateral_probe(ctx, task, expected)
    return probes


def new_context(env: Any, *, volatile: list[str], tasks: list[Task], tests: list[ToolTest]) -> ProbeContext:
    """What probes are built from: the env's initial data, and the state-changing calls the other
    tasks' gold solutions and the recorded tests show to work. Template instances lend none: an
    instance's probes must not depend on which other instances an env keeps (synth tasks drops some)."""
    writes = writes_of(env)
    extra = [c for t in tasks if t.template_id is None for c in t.gold if c.tool in writes]
    extra += [ToolCall(tool=t.tool, arguments=t.arguments) for t in tests
              if t.tool in writes and not t.setup and t.observed is not None and t.observed.ok]
    return ProbeContext(env=env, index=DataIndex.of(env.initial_db), values=ValuePool(env.initial_db),
                        volatile=volatile, extra_calls=extra)


__all__ = ["KINDS", "Probe", "ProbeContext", "REFUSAL", "build_probes", "new_context"]
