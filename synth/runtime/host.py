"""Runs an env's generated code: loads tools.py and verifiers.py, keeps episode
databases, calls tools and verifiers. The sandbox worker wraps one Host per
process; the trusted in-process mode uses one directly, so both give the same
results.

Every reply is plain data (the parent unpickles worker replies with no globals):
  ("ok", payload)                      success; a tool's result is JSON text
  ("tool_error", message)              the tool raised ToolError (the agent's fault)
  ("error", kind, message, traceback)  an env bug: exception | timeout | bad_return |
                                       too_large | missing | violation

An env's code is compiled once and run again as fresh modules for every episode,
so nothing a tool keeps at module level survives into the next episode. Episode
databases are GuardedConnections: env code cannot lift their limits, replace
their authorizer (no ATTACH, so no VACUUM INTO either) or their deadline.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import signal
import sqlite3
import threading
import time
import traceback
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from synth.runtime import loader
from synth.runtime.guards import checked_result, clean_text, open_guarded
from synth.runtime.loader import compile_source, drop_module, run_module, unload_module

_TB_FRAMES = 8  # last frames kept in a bug's traceback
_TB_CHARS = 4000
_MESSAGE_CHARS = 2000  # longest error message passed on
_PROGRESS_OPS = 5000  # SQLite VM steps between deadline checks
_SYNTH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class CallTimeout(BaseException):
    """Raised into env code at its deadline (BaseException: `except Exception` won't swallow it)."""


@dataclass
class LoadedEnv:
    label: str
    key: str
    code: dict[str, tuple[Any, str]]  # "tools" | "verifiers" -> (compiled code, filename)
    tool_names: list[str]
    initial: bytes


@dataclass(slots=True)
class LiveEpisode:
    key: str
    conn: sqlite3.Connection
    tools: dict[str, Callable[..., Any]]
    tool_error: type
    modules: list[str] = field(default_factory=list)
    verifiers: dict[str, Callable[..., Any]] | None = None  # run on first evaluate


def _tool_functions(ns: dict[str, Any], tool_names: list[str]) -> tuple[dict[str, Callable[..., Any]], type]:
    tool_error = ns.get("ToolError")
    if not (isinstance(tool_error, type) and issubclass(tool_error, BaseException)):
        tool_error = type("NoToolError", (Exception,), {})
    return {n: ns[n] for n in tool_names if callable(ns.get(n))}, tool_error


def _verifier_functions(ns: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    return {n: f for n, f in ns.items() if isinstance(f, types.FunctionType) and n != "check"}


def _encode(value: Any) -> Any:
    """JSON for the few non-JSON types tool code commonly returns."""
    if isinstance(value, sqlite3.Row):
        return dict(zip(value.keys(), value))
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    raise TypeError(f"a value of type {type(value).__name__} is not JSON-serializable")


class Host:
    """Envs and episodes of one process. `timeout` (seconds) arms a soft deadline per call:
    SIGALRM interrupts Python code and a SQLite progress handler interrupts queries. It
    needs the main thread, so the trusted in-process mode runs without one."""

    def __init__(self, timeout: float | None = None, restricted: bool = True,
                 guard: Callable[[bool], None] | None = None, violations: list[str] | None = None,
                 max_result_bytes: int | None = None):
        self.timeout = timeout
        self.restricted = restricted
        self.max_result_bytes = max_result_bytes
        self.envs: dict[str, LoadedEnv] = {}
        self.episodes: dict[int, LiveEpisode] = {}
        self._spares: dict[str, tuple[str, dict[str, Any]]] = {}  # env key -> a tools module no episode used
        self._spare_ids = 0
        self._guard = guard  # tells the worker's audit hook when env code is running
        self._violations = violations if violations is not None else []
        self._deadline = 0.0
        if timeout is not None:
            signal.signal(signal.SIGALRM, self._on_alarm)

    # ----------------------------------------------------------------- dispatch (worker)

    def handle(self, request: tuple) -> tuple:
        op, *args = request
        method = getattr(self, "op_" + op, None)
        if method is None:
            return ("error", "internal", f"unknown request {op!r}", "")
        try:
            return method(*args)
        except Exception as exc:  # a bug in synth, not in the env: report, keep serving
            return ("error", "internal", f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=-_TB_FRAMES))

    def op_ping(self) -> tuple:
        return ("ok", "pong")

    # ----------------------------------------------------------------- guarded execution

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._deadline:
            raise CallTimeout()

    def _progress(self) -> int:
        return 1 if self._deadline and time.monotonic() > self._deadline else 0

    def _enter(self) -> bool:
        """Env code starts: arm the deadline (main thread only) and tell the audit hook."""
        timed = self.timeout is not None and threading.current_thread() is threading.main_thread()
        if timed:
            self._deadline = time.monotonic() + self.timeout
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
        if self._guard:
            self._guard(True)
        loader.REFUSED.clear()
        return timed

    def _leave(self, timed: bool) -> None:
        if timed:
            self._deadline = 0.0  # first: an alarm landing now must not raise
            signal.setitimer(signal.ITIMER_REAL, 0)
        if self._guard:
            self._guard(False)

    @contextmanager
    def _env_code(self) -> Iterator[None]:
        timed = self._enter()
        try:
            yield
        finally:
            self._leave(timed)

    def _failure(self, exc: BaseException, what: str, message: str) -> tuple:
        # Only the env's frames (and stdlib below them): synth's own frames are noise to a repairer.
        frames = traceback.StackSummary.extract(traceback.walk_tb(exc.__traceback__), lookup_lines=False)
        frames = [f for f in frames if not f.filename.startswith(_SYNTH_DIR)][-_TB_FRAMES:]
        tb = clean_text("".join(traceback.format_list(frames))[-_TB_CHARS:])
        if isinstance(exc, CallTimeout):
            return ("error", "timeout", f"{what} timed out after {self.timeout:g} s", tb)
        detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        return ("error", "exception", f"{what} raised {detail}", tb)

    def _violation(self, what: str) -> tuple | None:
        if not self._violations and not loader.REFUSED:
            return None
        found = "; ".join((self._violations + loader.REFUSED)[:3])
        self._violations.clear()
        loader.REFUSED.clear()
        return ("error", "violation", f"{what} was stopped by the sandbox: {found}", "")

    # ----------------------------------------------------------------- envs

    def op_load(self, key: str, label: str, tools_src: str, verifiers_src: str, initial: bytes,
                tool_names: list[str]) -> tuple:
        """Compile the env's code and run it once, so load errors surface now."""
        files = {"tools": (tools_src, f"{label}/tools.py"), "verifiers": (verifiers_src, f"{label}/verifiers.py")}
        code: dict[str, tuple[Any, str]] = {}
        names: dict[str, dict[str, Any]] = {}
        for part, (src, filename) in files.items():
            try:
                with self._env_code():
                    code[part] = (compile_source(src, filename), filename)
                    module = run_module(f"synth_env_{key}_{part}", code[part][0], filename,
                                        restricted=self.restricted)
                    names[part] = dict(vars(module))
            except BaseException as exc:
                for part_name, (_, name) in files.items():
                    unload_module(f"synth_env_{key}_{part_name}", name)
                return self._failure(exc, f"loading {filename}", _safe_str(exc))
            finally:
                drop_module(f"synth_env_{key}_{part}")
            violation = self._violation(f"loading {filename}")  # it tried something and swallowed the refusal
            if violation:
                return violation
        tools, _ = _tool_functions(names["tools"], tool_names)
        verifiers = _verifier_functions(names["verifiers"])
        self.envs[key] = LoadedEnv(label, key, code, list(tool_names), initial)
        return ("ok", {"missing_tools": [n for n in tool_names if n not in tools], "verifiers": sorted(verifiers)})

    def op_unload(self, key: str) -> tuple:
        env = self.envs.pop(key, None)
        spare = self._spares.pop(key, None)
        if spare:
            drop_module(spare[0])
        for ep in [ep for ep, live in self.episodes.items() if live.key == key]:
            self.op_close(ep)
        for part, (_, filename) in env.code.items() if env else []:
            unload_module(f"synth_env_{key}_{part}", filename)
        return ("ok", None)

    # ----------------------------------------------------------------- episodes

    def _module(self, live: LiveEpisode, env: LoadedEnv, part: str, ep: int) -> dict[str, Any]:
        """A fresh run of the env's `part` module for one episode (caller guards it as env code)."""
        name = f"synth_env_{env.key}_{part}_{ep}"
        live.modules.append(name)
        code, filename = env.code[part]
        return vars(run_module(name, code, filename, restricted=self.restricted))

    def _run_tools(self, env: LoadedEnv, name: str) -> dict[str, Any]:
        code, filename = env.code["tools"]
        timed = self._enter()
        try:
            return vars(run_module(name, code, filename, restricted=self.restricted))
        except BaseException:
            drop_module(name)
            raise
        finally:
            self._leave(timed)

    def prepare(self) -> None:
        """Run a spare tools module for each env now, between requests (the worker calls this
        after each reply), so opening an episode does not wait for it. A spare that raised or
        did anything the sandbox refused is dropped: op_open then runs the module itself and
        reports what happened."""
        for key, env in self.envs.items():
            if key in self._spares:
                continue
            self._spare_ids += 1
            name = f"synth_env_{key}_tools_s{self._spare_ids}"
            try:
                namespace = self._run_tools(env, name)
            except BaseException:  # noqa: BLE001 - reported when an episode opens
                self._violations.clear()
                loader.REFUSED.clear()
                continue
            if self._violations or loader.REFUSED:
                self._violations.clear()
                loader.REFUSED.clear()
                drop_module(name)
                continue
            self._spares[key] = (name, namespace)

    def op_open(self, ep: int, key: str) -> tuple:
        env = self.envs[key]
        spare = self._spares.pop(key, None)
        if spare is not None:
            name, namespace = spare
        else:
            name = f"synth_env_{key}_tools_{ep}"
            try:
                namespace = self._run_tools(env, name)
            except BaseException as exc:
                return (self._violation("starting an episode")
                        or self._failure(exc, "running tools.py", _safe_str(exc)))
            violation = self._violation("starting an episode")
            if violation:
                drop_module(name)
                return violation
        live = LiveEpisode(key, open_guarded(env.initial), *_tool_functions(namespace, env.tool_names), [name])
        if self.timeout is not None:
            sqlite3.Connection.set_progress_handler(live.conn, self._progress, _PROGRESS_OPS)
        self.episodes[ep] = live
        return ("ok", None)

    def op_close(self, ep: int) -> tuple:
        live = self.episodes.pop(ep, None)
        if live:
            live.conn.close()
            for name in live.modules:
                drop_module(name)
        return ("ok", None)

    def op_snapshot(self, ep: int) -> tuple:
        return ("ok", self.episodes[ep].conn.serialize())

    def op_call(self, ep: int, tool: str, kwargs: dict[str, Any]) -> tuple:
        live = self.episodes[ep]
        conn = live.conn
        fn = live.tools.get(tool)
        what = f"tool {tool!r}"
        if fn is None:
            return ("error", "missing", f"{what} has no function in tools.py", "")
        try:
            with self._env_code():
                reply = _run_tool(live, fn, conn, kwargs, what)
        except CallTimeout as exc:  # the deadline hit between the tool's return and the disarm
            reply = ("raised", exc, "")
        reply = self._violation(what) or reply
        if reply[0] == "ok":
            reply = checked_result(reply[1], what, self.max_result_bytes)
        if reply[0] == "ok":
            try:
                conn.commit()  # one call, one transaction: a failed call leaves no trace
            except sqlite3.Error as exc:  # e.g. a deferred foreign key the tool left dangling
                reply = ("raised", exc, str(exc))
        if reply[0] != "ok":
            _rollback(conn)
        if reply[0] == "raised":
            return self._failure(reply[1], what, reply[2])
        return reply

    def op_evaluate(self, ep: int, verifier: str, answer: str | None) -> tuple:
        live = self.episodes[ep]
        env = self.envs[live.key]
        what = f"verifier {verifier!r}"
        initial, final = open_guarded(env.initial, readonly=True), open_guarded(live.conn.serialize(), readonly=True)
        try:
            with self._env_code():
                if live.verifiers is None:
                    live.verifiers = _verifier_functions(self._module(live, env, "verifiers", ep))
                fn = live.verifiers.get(verifier)
                if fn is None:
                    return ("error", "missing", f"verifier {verifier!r} is not defined in verifiers.py", "")
                checks = _plain_checks(fn(initial, final, answer))
        except BaseException as exc:
            return self._violation(what) or self._failure(exc, what, _safe_str(exc))
        finally:
            initial.close()
            final.close()
        return self._violation(what) or ("ok", checks)


def _run_tool(live: LiveEpisode, fn: Callable[..., Any], conn: sqlite3.Connection, kwargs: dict[str, Any],
              what: str) -> tuple:
    """Call one tool; messages are taken here, while the audit hook still treats this as env code."""
    try:
        result = fn(conn, **kwargs)
    except live.tool_error as exc:
        return ("tool_error", _safe_str(exc) or "the tool refused the request")
    except BaseException as exc:
        return ("raised", exc, _safe_str(exc))
    try:
        return ("ok", json.dumps(result, default=_encode, ensure_ascii=False))
    except CallTimeout as exc:
        return ("raised", exc, "")
    except BaseException as exc:
        return ("error", "bad_return", f"{what} returned a value that is not JSON: {_safe_str(exc)}", "")


def _plain_checks(result: Any) -> list[tuple[str, bool, float]]:
    """Validate a verifier's result (list of check dicts) into plain tuples."""
    if not isinstance(result, list):
        raise ValueError(f"a verifier must return a list of checks, got {type(result).__name__}")
    checks = []
    for item in result:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "passed" not in item:
            raise ValueError("each check must be a dict with 'name' and 'passed' (use check(name, passed))")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise ValueError(f"check {item['name']!r} has an invalid weight {weight!r}")
        checks.append((clean_text(item["name"][:200]), bool(item["passed"]), float(weight)))
    return checks


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        conn.rollback()
    except sqlite3.Error:
        pass  # the tool closed its connection; later calls will report it


def _safe_str(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException:  # a hostile or broken __str__
        return "<unprintable message>"
    if not isinstance(text, str):
        return "<unprintable message>"
    return clean_text(text[:_MESSAGE_CHARS] + ("..." if len(text) > _MESSAGE_CHARS else ""))
