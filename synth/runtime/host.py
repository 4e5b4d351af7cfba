"""Runs an env's generated code: loads tools.py or verifiers.py, keeps episode
databases, calls tools, runs verifiers. A sandbox worker wraps one Host per
process and only ever gives it one of the two files (the pool runs an env's
tools and its verifiers in different workers, so nothing tool code does can
reach the verdicts); the trusted in-process mode uses one Host for both.

Every reply is plain data (the parent unpickles worker replies with no globals):
  ("ok", payload)                      success; a tool's result is JSON text
  ("tool_error", message)              the tool raised ToolError (the agent's fault)
  ("error", kind, message, traceback)  an env bug: exception | timeout | bad_return |
                                       too_large | missing | violation

An env's code is compiled once and run again as a fresh module for every episode
and for every evaluation, so nothing kept at module level survives them; each
also has its own decimal context and random generator (isolation.py). Episode
databases are GuardedConnections: env code cannot lift their limits, replace
their authorizer (no ATTACH, so no VACUUM INTO either) or their deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import threading
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager, Iterator

from synth.runtime import isolation, loader
from synth.runtime.guards import (DB_GROWTH, checked_result, clean_text, db_limit, json_default, open_guarded,
                                  plain_checks, safe_str)
from synth.runtime.isolation import EpisodeState
from synth.runtime.loader import compile_source, drop_module, run_module, unload_module

_TB_FRAMES = 8  # last frames kept in a bug's traceback
_TB_CHARS = 4000
_PROGRESS_OPS = 5000  # SQLite VM steps between deadline checks
_SYNTH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_TRACEBACK = BaseException.__dict__["__traceback__"]  # read through the base class: no subclass property runs
PARTS = ("tools", "verifiers")


class CallTimeout(BaseException):
    """Raised into env code at its deadline (BaseException: `except Exception` won't swallow it)."""


@dataclass
class LoadedEnv:
    label: str
    key: str
    code: dict[str, tuple[Any, str]]  # "tools" | "verifiers" -> (compiled code, filename): the parts held here
    tool_names: list[str]
    initial: bytes


@dataclass(slots=True)
class LiveEpisode:
    key: str
    conn: sqlite3.Connection
    tools: dict[str, Callable[..., Any]]
    tool_error: type
    state: EpisodeState
    modules: list[str] = field(default_factory=list)


def _tool_functions(ns: dict[str, Any], tool_names: list[str]) -> tuple[dict[str, Callable[..., Any]], type]:
    tool_error = ns.get("ToolError")
    if not (isinstance(tool_error, type) and issubclass(tool_error, BaseException)):
        tool_error = type("NoToolError", (Exception,), {})
    return {n: ns[n] for n in tool_names if callable(ns.get(n))}, tool_error


def _verifier_functions(ns: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    return {n: f for n, f in ns.items() if isinstance(f, types.FunctionType) and n != "check"}


class Host:
    """Envs and episodes of one process. `timeout` (seconds) arms a soft deadline per call:
    SIGALRM interrupts Python code and a SQLite progress handler interrupts queries. It
    needs the main thread, so the trusted in-process mode runs without one. `frames` is
    the worker's leave to read traceback frames (its audit hook refuses that to env code)."""

    def __init__(self, timeout: float | None = None, restricted: bool = True,
                 frames: Callable[[], ContextManager[None]] | None = None, violations: list[str] | None = None,
                 max_result_bytes: int | None = None):
        self.timeout = timeout
        self.restricted = restricted
        self.max_result_bytes = max_result_bytes
        self.envs: dict[str, LoadedEnv] = {}
        self.episodes: dict[int, LiveEpisode] = {}
        # (env key, part) -> a module run ahead, between requests, with the state it ran in
        self._spares: dict[tuple[str, str], tuple[str, dict[str, Any], EpisodeState]] = {}
        self._runs = 0
        self._frames = frames or contextlib.nullcontext
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
            return ("error", "internal", f"{type(exc).__name__}: {safe_str(exc)}", self._traceback(exc, all_frames=True))

    def op_ping(self) -> tuple:
        return ("ok", "pong")

    # ----------------------------------------------------------------- guarded execution

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._deadline:
            raise CallTimeout()

    def _progress(self) -> int:
        return 1 if self._deadline and time.monotonic() > self._deadline else 0

    @contextlib.contextmanager
    def _env_code(self, state: EpisodeState) -> Iterator[None]:
        """Env code runs: its own interpreter state, a deadline (main thread only), fresh
        violation records."""
        timed = self.timeout is not None and threading.current_thread() is threading.main_thread()
        self._violations.clear()
        loader.REFUSED.clear()
        previous = isolation.enter(state)
        if timed:
            self._deadline = time.monotonic() + self.timeout
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
        try:
            yield
        finally:
            if timed:
                self._deadline = 0.0  # first: an alarm landing now must not raise
                signal.setitimer(signal.ITIMER_REAL, 0)
            isolation.leave(state, previous)

    def _traceback(self, exc: BaseException, all_frames: bool = False) -> str:
        """The env's frames of `exc` (and stdlib below them): synth's own are noise to a repairer."""
        entries = []
        with self._frames():  # only code objects and line numbers are read: no env code runs here
            tb = _TRACEBACK.__get__(exc)
            while tb is not None and len(entries) < 1000:
                code = tb.tb_frame.f_code
                entries.append((code.co_filename, tb.tb_lineno, code.co_name, None))
                tb = tb.tb_next
        if not all_frames:
            entries = [e for e in entries if not e[0].startswith(_SYNTH_DIR)]
        text = "".join(traceback.format_list(traceback.StackSummary.from_list(entries[-_TB_FRAMES:])))
        return clean_text(text[-_TB_CHARS:])

    def _failure(self, exc: BaseException, what: str, message: str) -> tuple:
        tb = self._traceback(exc)
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

    def op_load(self, key: str, label: str, tools_src: str | None, verifiers_src: str | None, initial: bytes,
                tool_names: list[str]) -> tuple:
        """Compile the parts given (None: not this process's) and run each once, so load
        errors surface now."""
        sources = {part: src for part, src in zip(PARTS, (tools_src, verifiers_src)) if src is not None}
        code: dict[str, tuple[Any, str]] = {}
        found: dict[str, list[str]] = {}
        for part, src in sources.items():
            filename, name = f"{label}/{part}.py", f"synth_env_{key}_{part}"
            try:
                with self._env_code(EpisodeState()):
                    code[part] = (compile_source(src, filename), filename)
                    namespace = vars(run_module(name, code[part][0], filename, restricted=self.restricted))
                    found[part] = sorted(_tool_functions(namespace, tool_names)[0] if part == "tools"
                                         else _verifier_functions(namespace))
            except BaseException as exc:
                for other in sources:
                    unload_module(f"synth_env_{key}_{other}", f"{label}/{other}.py")
                return self._failure(exc, f"loading {filename}", safe_str(exc))
            finally:
                drop_module(name)
            violation = self._violation(f"loading {filename}")  # it tried something and swallowed the refusal
            if violation:
                return violation
        self.envs[key] = LoadedEnv(label, key, code, list(tool_names), initial)
        info: dict[str, list[str]] = {}
        if "tools" in found:
            info["missing_tools"] = [n for n in tool_names if n not in found["tools"]]
        if "verifiers" in found:
            info["verifiers"] = found["verifiers"]
        return ("ok", info)

    def op_unload(self, key: str) -> tuple:
        env = self.envs.pop(key, None)
        for part in PARTS:
            spare = self._spares.pop((key, part), None)
            if spare:
                self._dispose(spare[2], [spare[0]])
        for ep in [ep for ep, live in self.episodes.items() if live.key == key]:
            self.op_close(ep)
        for part, (_, filename) in env.code.items() if env else []:
            unload_module(f"synth_env_{key}_{part}", filename)
        return ("ok", None)

    # ----------------------------------------------------------------- modules

    def _run(self, env: LoadedEnv, part: str, name: str) -> dict[str, Any]:
        """A fresh run of the env's `part` as module `name` (the caller runs it as env code)."""
        code, filename = env.code[part]
        try:
            return vars(run_module(name, code, filename, restricted=self.restricted))
        except BaseException:
            drop_module(name)
            raise

    def _fresh(self, env: LoadedEnv, part: str) -> tuple[str, dict[str, Any], EpisodeState]:
        """The spare module run ahead for `part`, or a new run (raises what the code raised)."""
        spare = self._spares.pop((env.key, part), None)
        if spare is not None:
            return spare
        self._runs += 1
        name, state = f"synth_env_{env.key}_{part}_{self._runs}", EpisodeState()
        with self._env_code(state):
            return name, self._run(env, part, name), state

    def prepare(self) -> None:
        """Run a spare module of each part each env has here, between requests (the worker calls
        this after each reply), so an episode or an evaluation does not wait for it. A spare
        that raised or did anything the sandbox refused is dropped: the request then runs the
        module itself and reports what happened."""
        for key, env in list(self.envs.items()):
            for part in env.code:
                if (key, part) in self._spares:
                    continue
                self._runs += 1
                name, state = f"synth_env_{key}_{part}_s{self._runs}", EpisodeState()
                try:
                    with self._env_code(state):
                        namespace = self._run(env, part, name)
                except BaseException:  # noqa: BLE001 - reported when the module is needed
                    continue
                if self._violation("a spare module"):
                    self._dispose(state, [name])
                    continue
                self._spares[(key, part)] = (name, namespace, state)

    def _dispose(self, state: EpisodeState, modules: list[str], live: LiveEpisode | None = None) -> None:
        """Drop an episode's modules and objects as its own code: finalizers of its objects run
        under its deadline and state (and, in a worker, its audit hook), never as synth's code."""
        try:
            with self._env_code(state):
                if live is not None:
                    live.tools, live.tool_error = {}, Exception
                for name in modules:
                    drop_module(name)
        except BaseException:  # noqa: BLE001 - a finalizer that ran out of time; nothing to report
            pass
        self._violations.clear()
        loader.REFUSED.clear()

    # ----------------------------------------------------------------- episodes

    def op_open(self, ep: int, key: str) -> tuple:
        env = self.envs[key]
        try:
            name, namespace, state = self._fresh(env, "tools")
        except BaseException as exc:
            return self._violation("starting an episode") or self._failure(exc, "running tools.py", safe_str(exc))
        violation = self._violation("starting an episode")
        if violation:
            self._dispose(state, [name])
            return violation
        live = LiveEpisode(key, open_guarded(env.initial), *_tool_functions(namespace, env.tool_names), state, [name])
        if self.timeout is not None:
            sqlite3.Connection.set_progress_handler(live.conn, self._progress, _PROGRESS_OPS)
        self.episodes[ep] = live
        return ("ok", None)

    def op_close(self, ep: int) -> tuple:
        live = self.episodes.pop(ep, None)
        if live:
            sqlite3.Connection.close(live.conn)
            self._dispose(live.state, live.modules, live)
        return ("ok", None)

    def op_snapshot(self, ep: int) -> tuple:
        live = self.episodes[ep]
        data = sqlite3.Connection.serialize(live.conn)
        limit = db_limit(len(self.envs[live.key].initial))
        if len(data) > limit:
            return ("error", "too_large", f"the episode's database grew to {len(data):,} bytes; the limit is "
                    f"{limit:,} (its initial size plus {DB_GROWTH >> 20} MiB)", "")
        return ("ok", data)

    def op_call(self, ep: int, tool: str, kwargs: dict[str, Any]) -> tuple:
        live = self.episodes[ep]
        conn = live.conn
        fn = live.tools.get(tool)
        what = f"tool {tool!r}"
        if fn is None:
            return ("error", "missing", f"{what} has no function in tools.py", "")
        try:
            with self._env_code(live.state):
                reply = _run_tool(live, fn, conn, kwargs, what)
        except CallTimeout as exc:  # the deadline hit between the tool's return and the disarm
            reply = ("raised", exc, "")
        reply = self._violation(what) or reply
        if reply[0] == "ok":
            reply = checked_result(reply[1], what, self.max_result_bytes)
        if reply[0] == "ok":
            try:
                sqlite3.Connection.commit(conn)  # one call, one transaction: a failed call leaves no trace
            except sqlite3.Error as exc:  # e.g. a deferred foreign key the tool left dangling
                reply = ("raised", exc, str(exc))
        if reply[0] != "ok":
            _rollback(conn)
        if reply[0] == "raised":
            return self._failure(reply[1], what, reply[2])
        return reply

    # ----------------------------------------------------------------- verdicts

    def op_verify(self, key: str, verifier: str, final: bytes, answer: str | None) -> tuple:
        """Run `verifier` on the env's initial database and `final` (an episode's snapshot), in a
        fresh run of verifiers.py with its own interpreter state."""
        env = self.envs[key]
        what = f"verifier {verifier!r}"
        try:
            name, namespace, state = self._fresh(env, "verifiers")
        except BaseException as exc:
            return self._violation(what) or self._failure(exc, what, safe_str(exc))
        initial, after = open_guarded(env.initial, readonly=True), open_guarded(final, readonly=True)
        try:
            reply = self._violation(what)
            if reply is None:
                with self._env_code(state):
                    fn = _verifier_functions(namespace).get(verifier)
                    checks = plain_checks(fn(initial, after, answer)) if fn is not None else None
                reply = self._violation(what) or (("ok", checks) if fn is not None else (
                    "error", "missing", f"verifier {verifier!r} is not defined in verifiers.py", ""))
        except BaseException as exc:
            reply = self._violation(what) or self._failure(exc, what, safe_str(exc))
        finally:
            sqlite3.Connection.close(initial)
            sqlite3.Connection.close(after)
            self._dispose(state, [name])
        return reply


def _run_tool(live: LiveEpisode, fn: Callable[..., Any], conn: sqlite3.Connection, kwargs: dict[str, Any],
              what: str) -> tuple:
    """Call one tool; messages are taken here, while the audit hook still treats this as env code."""
    try:
        result = fn(conn, **kwargs)
    except live.tool_error as exc:
        return ("tool_error", safe_str(exc) or "the tool refused the request")
    except BaseException as exc:
        return ("raised", exc, safe_str(exc))
    try:
        return ("ok", json.dumps(result, default=json_default, ensure_ascii=False))
    except CallTimeout as exc:
        return ("raised", exc, "")
    except BaseException as exc:
        return ("error", "bad_return", f"{what} returned a value that is not JSON: {safe_str(exc)}", "")


def _rollback(conn: sqlite3.Connection) -> None:
    try:
        sqlite3.Connection.rollback(conn)
    except sqlite3.Error:
        pass  # the tool closed its connection; later calls will report it
