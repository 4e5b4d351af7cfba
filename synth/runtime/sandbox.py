"""The parent side of the sandbox: worker processes that run env code.

Each worker is `python -S -m synth.runtime.worker` (see worker.py and confine.py
for what it locks down) talking over two pipes. One worker serves one request
at a time and only ever holds one env's code: the pool binds a worker to an
env the first time it loads that env there, and a worker that held another env
is replaced by a fresh process, never reused. At most `workers` processes run
an env's tools; an env gets more of them (up to the cap) when its episodes run
concurrently, and an idle worker of another env is replaced when the cap is
reached. An env's verifiers run in a second set of workers of the same kind
(`verifier_workers`, default half as many), never in a process that ran its
tools: an evaluation gets the episode's database as bytes, so nothing tool code
does reaches a verdict. `spread` keeps an env's episodes on its share of the
workers (the pipeline's pool), so one env cannot hold every worker.

Replies are bounded before they are read: a worker that announces more than its
request's limit (a tool result: --max-result-bytes plus framing) is killed
unread, and only the episodes it held are lost. `call_many` (pipelined.py) writes
many calls to a worker ahead of their replies, under the same bounds.

Timeouts: the worker interrupts a call itself at `call_timeout` (the episode
survives); if it has not answered `grace` seconds later it is killed. A killed
or crashed worker loses only its own env's episodes: later calls on them raise
EpisodeLost naming the reason, and the next request starts a fresh worker.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import os
import threading
import time
from dataclasses import dataclass

from synth.errors import SynthError
from synth.runtime import wire
from synth.runtime.codecheck import CodeRejected, check_source
from synth.runtime.guards import db_limit
from synth.runtime.pipelined import PipelinedCalls
from synth.runtime.workerproc import Died, EpisodeLost, SandboxError, Slot
from synth.runtime.workers import FRAMING, SMALL_REPLY, WorkerSlots, died_reply

__all__ = ["EnvLoadError", "EpisodeLost", "Handle", "PoolBusy", "SandboxError", "SandboxPool", "default_pool"]


class PoolBusy(SandboxError):
    """Every worker holds live episodes of other envs; none freed up in time."""


class EnvLoadError(SynthError):
    """An env's code passed the static check but failed while being loaded."""


@dataclass(frozen=True)
class Handle:
    """Where an episode lives: worker slot, that worker's generation, episode number, env key."""

    slot: int
    generation: int
    ep: int
    key: str = ""


LOAD_REPLY = 16 << 20  # tool and verifier names


def check_env_code(tools_src: str, verifiers_src: str) -> None:
    for filename, src in (("tools.py", tools_src), ("verifiers.py", verifiers_src)):
        problems = check_source(src, filename)
        if problems:
            raise CodeRejected(filename, problems)


class SandboxPool(PipelinedCalls, WorkerSlots):
    """Worker processes for untrusted env code; safe to use from many threads.

    `ast_check`, `restricted` (restricted builtins), `audit` (the audit hook) and
    `skip_layers` (OS layers) exist to be switched off only by the sandbox's own
    tests, to show each layer holds without the others.
    """

    def __init__(self, workers: int = 2, memory_mb: int = 1024, call_timeout: float | None = None, *,
                 grace: float = 1.0, cpu_seconds: int = 3600, startup_timeout: float = 30.0,
                 wait_timeout: float = 120.0, spread: int | None = None, max_argument_bytes: int | None = None,
                 max_result_bytes: int | None = None, allow_weak: bool | None = None,
                 ast_check: bool = True, restricted: bool = True, audit: bool = True,
                 skip_layers: tuple[str, ...] = (), verifier_workers: int | None = None, role: str = "tools",
                 spares_from: WorkerSlots | None = None):
        if call_timeout is None or max_argument_bytes is None or max_result_bytes is None or allow_weak is None:
            from synth.config import load_settings

            settings = load_settings()
            call_timeout = settings.tool_timeout if call_timeout is None else call_timeout
            max_argument_bytes = settings.max_argument_bytes if max_argument_bytes is None else max_argument_bytes
            max_result_bytes = settings.max_result_bytes if max_result_bytes is None else max_result_bytes
            allow_weak = settings.allow_weak_sandbox if allow_weak is None else allow_weak
        options = {"memory_mb": memory_mb, "cpu_seconds": cpu_seconds, "timeout": call_timeout,
                   "restricted": restricted, "audit": audit, "skip_layers": list(skip_layers),
                   "max_result_bytes": max_result_bytes}
        super().__init__(workers, options, startup_timeout=startup_timeout, allow_weak=allow_weak,
                         spares_from=spares_from)
        self.call_timeout, self.grace, self.memory_mb = call_timeout, grace, memory_mb
        self.wait_timeout = wait_timeout
        # How many workers one env may hold while another is idle (None: any, for throughput). The
        # pipeline keeps it low: its many envs need workers of their own more than speed within one.
        self.spread = spread
        self.max_argument_bytes, self.max_result_bytes = max_argument_bytes, max_result_bytes
        self.ast_check, self.restricted, self.audit = ast_check, restricted, audit
        self.skip_layers = tuple(skip_layers)
        self.role = role  # "tools": this pool runs tools.py; "verifiers": verifiers.py (self.verifiers)
        self._envs: dict[str, tuple] = {}
        self._identity: dict[str, str] = {}  # env key -> hash of its role, id and code
        self._abandoned: collections.deque[Handle] = collections.deque()
        self._ids = itertools.count(1)
        self.verifiers: SandboxPool | None = None
        if role == "tools":
            # Verdicts are short stateless requests: half as many workers serve them by default.
            self.verifiers = SandboxPool(
                verifier_workers or max(1, (workers + 1) // 2), memory_mb, call_timeout, grace=grace, cpu_seconds=cpu_seconds,
                startup_timeout=startup_timeout, wait_timeout=wait_timeout, spread=spread,
                max_argument_bytes=max_argument_bytes, max_result_bytes=max_result_bytes, allow_weak=allow_weak,
                ast_check=False, restricted=restricted, audit=audit, skip_layers=skip_layers, role="verifiers",
                spares_from=self)

    @property
    def missing_layers(self) -> list[str]:
        """OS layers some worker of this pool (or of its verifier workers) reported missing."""
        return sorted(set(self._missing) | set(self.verifiers.missing_layers if self.verifiers else ()))

    # ----------------------------------------------------------------- placing envs on workers

    def _rank(self, slot: Slot, key: str) -> tuple:
        """How good an idle slot is for env `key` (lower is better)."""
        if slot.env == key:
            return (0, slot.index)
        if slot.env is None and slot.loaded == self._identity[key]:
            return (1, slot.index)  # its process already ran this very code: no restart
        if slot.env is None and slot.loaded is None:
            return (2 if slot.proc is not None else 3, slot.index)  # a clean process (or none yet)
        if slot.env is None:
            return (4, slot.last_used)  # a closed env's worker: its process will be replaced
        return (5, slot.last_used)  # a live env's idle worker: taken only when this env has none

    def _reserve(self, key: str) -> Slot:
        """A slot for env `key`, counted as pending until the caller releases it.

        Preference: an idle worker of this env; a free one whose process ran the same code;
        a clean one; a closed env's; the least loaded worker of this env; an idle worker of
        another live env (its process is replaced). When every worker is busy, wait."""
        deadline = time.monotonic() + self.wait_timeout
        with self._lock:
            while True:
                if self._closed:
                    raise SandboxError("the sandbox pool is closed")
                if key not in self._envs:
                    raise SandboxError("the env was closed")
                self._drain_abandoned()
                idle = min((s for s in self._slots if s.episodes + s.pending == 0),
                           key=lambda s: self._rank(s, key), default=None)
                mine = min((s for s in self._slots if s.env == key), key=lambda s: (s.episodes + s.pending, s.index),
                           default=None)
                held = sum(1 for s in self._slots if s.env == key and s.episodes + s.pending > 0)
                if mine is not None and self.spread is not None and held >= self.spread:
                    slot = mine  # this env has its share of workers: its episodes share them
                else:
                    slot = idle if idle is not None and self._rank(idle, key)[0] < 5 else (mine or idle)
                if slot is not None:
                    slot.env = key  # claimed: no other env can take it until it is idle again
                    slot.pending += 1
                    slot.last_used = time.monotonic()
                    return slot
                left = deadline - time.monotonic()
                if left <= 0:
                    busy = ", ".join(f"{s.episodes + s.pending}" for s in self._slots)
                    raise PoolBusy(f"all {len(self._slots)} sandbox workers hold live episodes of other envs "
                                   f"({busy} in use); close finished episodes or raise --workers")
                self._freed.wait(left)

    def _settle(self, slot: Slot, opened: int = 0) -> None:
        """End a reservation; `opened` episodes now live on the slot."""
        with self._lock:
            slot.pending -= 1
            slot.episodes += opened
            self._freed.notify_all()

    def _bind(self, slot: Slot, key: str) -> dict | None:
        """Make sure `slot` runs a process holding `key`'s code and no other env's (caller holds slot.lock).

        A process that ran other code is replaced; one that ran this same code (the same env
        loaded again, as the pipeline does between stages) is reused."""
        identity = self._identity[key]
        if slot.loaded not in (None, identity):
            self._die(slot, "its worker was given to another env")
        if slot.proc is not None and slot.loaded == identity and slot.loaded_key == key:
            return None
        if slot.proc is not None and slot.loaded_key is not None:
            self._unload(slot)
        label, tools_src, verifiers_src, initial, names = self._envs[key]
        load = ("load", key, label, tools_src if self.role == "tools" else None,
                verifiers_src if self.role == "verifiers" else None, initial, names)
        try:
            reply = self._request(slot, load, self.call_timeout + self.grace, reply_limit=LOAD_REPLY)
        except Died as died:
            raise EnvLoadError(f"loading the env's code killed its sandbox worker ({died.reason})") from None
        except BaseException:
            self._die(slot, "loading its env failed")
            raise
        if reply[0] != "ok":
            self._die(slot, "its env failed to load")
            raise EnvLoadError(f"{reply[2]}; fix the env's code")
        slot.loaded, slot.loaded_key = identity, key
        return reply[1]

    def _unload(self, slot: Slot) -> None:
        """Drop the env object a worker holds (its process keeps only the code's identity)."""
        try:
            self._request(slot, ("unload", slot.loaded_key), self.call_timeout + self.grace)
            slot.loaded_key = None
        except Died:
            pass  # the worker is gone, and the env with it

    def register_env(self, key: str, label: str, tools_src: str, verifiers_src: str, initial: bytes,
                     tool_names: list[str]) -> dict:
        """Check and load an env's code once (errors surface here), keep it for more workers: its
        tools here, its verifiers in the verifier workers."""
        if self.ast_check:
            check_env_code(tools_src, verifiers_src)
        args = (key, label, tools_src, verifiers_src, initial, tool_names)
        if self.verifiers is None:
            return self._register(*args)
        lane: dict = {}

        def load_verifiers() -> None:  # at the same time: each may have to start a worker process
            try:
                lane["info"] = self.verifiers._register(*args)
            except BaseException as exc:  # noqa: BLE001 - raised below, in the caller's thread
                lane["error"] = exc

        thread = threading.Thread(target=load_verifiers, name="sandbox-load-verifiers", daemon=True)
        thread.start()
        try:
            info = self._register(*args)
        except BaseException:
            thread.join()
            self.unregister_env(key)
            raise
        thread.join()
        if "error" in lane:
            self.unregister_env(key)
            raise lane["error"]
        return {**info, **lane["info"]}

    def _register(self, key: str, label: str, tools_src: str, verifiers_src: str, initial: bytes,
                  tool_names: list[str]) -> dict:
        source = tools_src if self.role == "tools" else verifiers_src
        code = hashlib.sha256("\0".join((self.role, label, source)).encode("utf-8", "surrogatepass"))
        with self._lock:
            self._envs[key] = (label, tools_src, verifiers_src, initial, list(tool_names))
            self._identity[key] = code.hexdigest()
        try:
            slot = self._reserve(key)
            try:
                with slot.lock:
                    return self._bind(slot, key) or {}
            finally:
                self._settle(slot)
        except BaseException:
            self._forget_env(key)
            raise

    def _forget_env(self, key: str, closed: bool = False) -> list[Slot]:
        """Drop an env's claims on its slots; `closed`: its episodes end with it (handles still
        held by anyone get EpisodeLost, including episodes dropped without being closed)."""
        with self._lock:
            self._envs.pop(key, None)
            mine = [s for s in self._slots if s.env == key]
            for slot in mine:
                if closed and slot.episodes:
                    slot.deaths[slot.generation] = "its env was closed"
                    slot.generation += 1
                    slot.episodes = 0
                if slot.episodes + slot.pending == 0:
                    slot.env = None
            self._freed.notify_all()
            return mine

    def abandon(self, handle: Handle) -> None:
        """An episode object was garbage-collected without close(): stop counting it (its database
        is freed with its env). Safe from a finalizer: no lock, no I/O."""
        self._abandoned.append(handle)

    def _drain_abandoned(self) -> None:
        """Caller holds self._lock."""
        while self._abandoned:
            handle = self._abandoned.popleft()
            slot = self._slots[handle.slot]
            if slot.generation == handle.generation and slot.episodes:
                slot.episodes -= 1

    def unregister_env(self, key: str) -> None:
        """Forget an env. Its workers stay up holding its code's identity only: the same code
        loaded again reuses them; any other env gets them only as fresh processes."""
        if self.verifiers is not None:
            self.verifiers.unregister_env(key)
        if key not in self._envs:
            return
        for slot in self._forget_env(key, closed=True):
            with slot.lock:
                if slot.loaded_key == key and slot.proc is not None:
                    self._unload(slot)
        with self._lock:
            self._identity.pop(key, None)

    # ----------------------------------------------------------------- episodes

    def open_episode(self, key: str) -> Handle:
        slot = self._reserve(key)
        opened = 0
        try:
            with slot.lock:
                self._bind(slot, key)
                ep = next(self._ids)
                try:
                    reply = self._request(slot, ("open", ep, key), self.call_timeout + self.grace)
                except Died as died:
                    raise SandboxError(f"sandbox worker died while opening an episode ({died.reason})") from None
                if reply[0] != "ok":
                    raise SandboxError(f"the env's code failed to start an episode: {reply[2]}")
                opened = 1
                return Handle(slot.index, slot.generation, ep, key)
        finally:
            self._settle(slot, opened)

    def _on_episode(self, handle: Handle, request: tuple, what: str, limit: int | None = None,
                    reply_limit: int = SMALL_REPLY) -> tuple:
        slot = self._slots[handle.slot]
        with slot.lock:
            if slot.generation != handle.generation:
                reason = slot.deaths.get(handle.generation, "it was stopped")
                raise EpisodeLost(f"episode lost: worker crashed ({reason})")
            try:
                return self._request(slot, request, self.call_timeout + self.grace, limit, reply_limit)
            except wire.TooLarge as exc:
                return ("refused", f"the arguments are {exc.size:,} bytes; the limit is {exc.limit:,} bytes")
            except Died as died:
                return died_reply(what, died, "this episode is lost" if self.role == "tools" else "the episode goes on")

    def call(self, handle: Handle, tool: str, kwargs: dict) -> tuple:
        return self._on_episode(handle, ("call", handle.ep, tool, kwargs), f"tool {tool!r}",
                                self.max_argument_bytes, self.max_result_bytes + FRAMING)

    def snapshot(self, handle: Handle) -> bytes:
        env = self._envs.get(handle.key)
        limit = db_limit(len(env[3])) + FRAMING if env else SMALL_REPLY
        reply = self._on_episode(handle, ("snapshot", handle.ep), "snapshot", reply_limit=limit)
        if reply[0] == "error" and reply[1] == "too_large":
            raise EpisodeLost(reply[2])  # the worker refused to send it: the episode goes on
        if reply[0] != "ok" or not isinstance(reply[1], bytes):
            raise EpisodeLost(f"episode lost: {reply[2] if len(reply) > 2 else reply}")
        return reply[1]

    def verify(self, key: str, verifier: str, final: bytes, answer: str | None) -> tuple:
        """Run `verifier` on `final` (an episode's database) in a verifier worker of the env."""
        if self.verifiers is None:
            raise SandboxError("verify() is called on the pool that holds the tools")
        size = len(answer.encode("utf-8", "surrogatepass")) if answer else 0
        if size > self.max_argument_bytes:
            return ("refused", f"the answer is {size:,} bytes; the limit is {self.max_argument_bytes:,} bytes")
        return self.verifiers._verdict(key, ("verify", key, verifier, final, answer), f"verifier {verifier!r}")

    def _verdict(self, key: str, request: tuple, what: str) -> tuple:
        """One request on a worker of env `key` that holds no episode (the verifier workers)."""
        slot = self._reserve(key)
        try:
            with slot.lock:
                try:
                    self._bind(slot, key)
                    return self._request(slot, request, self.call_timeout + self.grace,
                                         reply_limit=self.max_result_bytes + FRAMING)
                except (Died, EnvLoadError) as exc:
                    reason = exc.reason if isinstance(exc, Died) else str(exc)
                    return ("error", "crash", f"{what} stopped its sandbox worker ({reason}); the worker was "
                            "restarted", "")
        finally:
            self._settle(slot)

    def evaluate(self, handle: Handle, verifier: str, answer: str | None) -> tuple:
        """The verifier on the episode's database as it is now."""
        try:
            final = self.snapshot(handle)
        except EpisodeLost as exc:
            return ("error", "crash", str(exc), "")
        return self.verify(handle.key, verifier, final, answer)

    def close_episode(self, handle: Handle) -> None:
        slot = self._slots[handle.slot]
        try:
            self._on_episode(handle, ("close", handle.ep), "close")
        except EpisodeLost:
            return  # its worker is gone: nothing left to free, and the count was reset
        with self._lock:
            slot.episodes = max(0, slot.episodes - 1)
            self._freed.notify_all()

    # ----------------------------------------------------------------- lifecycle

    def warm(self) -> None:
        super().warm()
        if self.verifiers is not None:
            self.verifiers.warm()

    def close(self) -> None:
        super().close()
        if self.verifiers is not None:
            self.verifiers.close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The process-wide pool Env.load uses when given none (closed at exit)."""
    global _default
    with _default_lock:
        if _default is None or _default._closed:
            _default = SandboxPool(workers=max(2, min(4, os.cpu_count() or 1)))
        return _default
