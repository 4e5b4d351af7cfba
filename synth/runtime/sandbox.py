"""The parent side of the sandbox: worker processes that run env code.

Each worker is `python -S -m synth.runtime.worker` (see worker.py and confine.py
for what it locks down) talking over two pipes. One worker serves one request
at a time and only ever holds one env's code: the pool binds a worker to an
env the first time it loads that env there, and a worker that held another env
is replaced by a fresh process, never reused. At most `workers` processes run;
an env gets more of them (up to the cap) when its episodes run concurrently,
and an idle worker of another env is replaced when the cap is reached.

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
import pickle
import subprocess
import threading
import time
import weakref
from dataclasses import dataclass

from synth.errors import SynthError
from synth.runtime import confine, wire
from synth.runtime.codecheck import CodeRejected, check_source
from synth.runtime.workerproc import (Died, SandboxError, Slot, close_slot, exit_reason, notice_weak, shutdown,
                                      start_worker, well_formed)

__all__ = ["EnvLoadError", "EpisodeLost", "Handle", "PoolBusy", "SandboxError", "SandboxPool", "default_pool"]


class PoolBusy(SandboxError):
    """Every worker holds live episodes of other envs; none freed up in time."""


class EpisodeLost(SynthError):
    """The worker holding an episode died; the episode's state is gone."""


class EnvLoadError(SynthError):
    """An env's code passed the static check but failed while being loaded."""


_BROKEN = (wire.WireTimeout, wire.WireClosed, OSError, pickle.UnpicklingError, ValueError, EOFError)
_PIPELINE_BYTES = 32 << 10  # call requests written ahead of their replies; a pipe holds 64 KiB


def _died_reply(what: str, died: Died) -> tuple:
    kind = "killed" if died.timed_out else "crash"
    return ("error", kind, f"{what} stopped its sandbox worker ({died.reason}); the worker was restarted and this "
            "episode is lost", "")


@dataclass(frozen=True)
class Handle:
    """Where an episode lives: worker slot, that worker's generation, episode number."""

    slot: int
    generation: int
    ep: int


def check_env_code(tools_src: str, verifiers_src: str) -> None:
    for filename, src in (("tools.py", tools_src), ("verifiers.py", verifiers_src)):
        problems = check_source(src, filename)
        if problems:
            raise CodeRejected(filename, problems)


class SandboxPool:
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
                 skip_layers: tuple[str, ...] = ()):
        if call_timeout is None or max_argument_bytes is None or max_result_bytes is None or allow_weak is None:
            from synth.config import load_settings

            settings = load_settings()
            call_timeout = settings.tool_timeout if call_timeout is None else call_timeout
            max_argument_bytes = settings.max_argument_bytes if max_argument_bytes is None else max_argument_bytes
            max_result_bytes = settings.max_result_bytes if max_result_bytes is None else max_result_bytes
            allow_weak = settings.allow_weak_sandbox if allow_weak is None else allow_weak
        if workers < 1:
            raise ValueError("a sandbox pool needs at least one worker")
        self.call_timeout, self.grace = call_timeout, grace
        self.memory_mb, self.cpu_seconds, self.startup_timeout = memory_mb, cpu_seconds, startup_timeout
        self.wait_timeout = wait_timeout
        # How many workers one env may hold while another is idle (None: any, for throughput). The
        # pipeline keeps it low: its many envs need workers of their own more than speed within one.
        self.spread = spread
        self.max_argument_bytes, self.max_result_bytes = max_argument_bytes, max_result_bytes
        self.allow_weak = allow_weak
        self.ast_check, self.restricted, self.audit = ast_check, restricted, audit
        self.skip_layers = tuple(skip_layers)
        self.missing_layers: list[str] = []
        self._slots = [Slot(i) for i in range(workers)]
        self._envs: dict[str, tuple] = {}
        self._identity: dict[str, str] = {}  # env key -> hash of its id and code
        self._spare: Slot | None = None  # a clean worker started ahead of need
        self._spare_starting = False
        self._spares_made: list[Slot] = []
        self._abandoned: collections.deque[Handle] = collections.deque()
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        self._closed = False
        self._finalizer = weakref.finalize(self, shutdown, self._slots, self._spares_made)
        confine.mark_nondumpable()  # our environment (API keys) and memory stay ours
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (pool := ref()) and pool._forget_workers())

    def _forget_workers(self) -> None:
        """In a forked child: the workers belong to the parent; never talk to or kill them."""
        for slot in self._slots:
            for fd in (slot.wfd, slot.rfd):
                if fd >= 0:
                    os.close(fd)
            slot.lock = threading.Lock()
            if slot.proc is not None:
                slot.deaths[slot.generation] = "it belongs to the parent of this forked process"
                slot.generation += 1
            slot.proc, slot.wfd, slot.rfd, slot.poller = None, -1, -1, None
            slot.env, slot.loaded, slot.loaded_key, slot.episodes, slot.pending = None, None, None, 0, 0
        for spare in self._spares_made:
            for fd in (spare.wfd, spare.rfd):
                if fd >= 0:
                    os.close(fd)
            spare.proc, spare.wfd, spare.rfd, spare.poller = None, -1, -1, None
        self._spare, self._spare_starting = None, False
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)

    # ----------------------------------------------------------------- workers

    def _options(self) -> dict:
        return {"memory_mb": self.memory_mb, "cpu_seconds": self.cpu_seconds, "timeout": self.call_timeout,
                "restricted": self.restricted, "audit": self.audit, "skip_layers": list(self.skip_layers),
                "max_result_bytes": self.max_result_bytes}

    def _start(self, slot: Slot) -> None:
        """Give `slot` a clean worker: the spare one started in the background if it is ready
        (a process start with its lockdown takes ~0.1 s), else a new one; then start the next spare."""
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.proc is not None and spare.proc.poll() is None:
            slot.proc, slot.wfd, slot.rfd, slot.poller, slot.info = (spare.proc, spare.wfd, spare.rfd,
                                                                     spare.poller, spare.info)
            spare.proc, spare.wfd, spare.rfd, spare.poller = None, -1, -1, None  # the slot owns them now
        else:
            if spare is not None:
                close_slot(spare)
            start_worker(slot, self._options(), self.startup_timeout)
        self._prestart()
        self._check_layers(slot)

    def _prestart(self) -> None:
        with self._lock:
            if self._spare_starting or self._spare is not None or self._closed:
                return
            self._spare_starting = True

        def run() -> None:
            spare = Slot(-1)
            try:
                start_worker(spare, self._options(), self.startup_timeout)
            except SandboxError:
                spare = None
            finally:
                with self._lock:
                    self._spare_starting = False
                    keep = spare is not None and self._spare is None and not self._closed
                    if keep:
                        self._spare = spare
                        self._spares_made.append(spare)  # closed at shutdown if never used
            if spare is not None and not keep:
                close_slot(spare)

        threading.Thread(target=run, name="sandbox-spare", daemon=True).start()

    def _check_layers(self, slot: Slot) -> None:
        missing = confine.missing(slot.info)
        if missing:
            self.missing_layers = sorted(set(self.missing_layers) | set(missing))
            notice_weak(missing, [str(n) for n in slot.info.get("notes", [])], self.allow_weak)

    def unverifiable(self) -> str | None:
        """Why envs run by this pool must not be marked verified (None: they may be)."""
        if not self.missing_layers or self.allow_weak:
            return None
        return (f"the sandbox's OS layer is incomplete on this machine (missing {', '.join(self.missing_layers)}); "
                "pass --allow-weak-sandbox to mark envs verified anyway")

    def _die(self, slot: Slot, reason: str) -> None:
        """Record why this generation ended, drop its state; the next request starts anew."""
        slot.deaths[slot.generation] = reason
        close_slot(slot)
        slot.generation += 1
        slot.loaded = slot.loaded_key = None
        with self._lock:
            slot.episodes = 0
            self._freed.notify_all()

    def _request(self, slot: Slot, request: tuple, timeout: float, limit: int | None = None) -> tuple:
        """Send one request and wait for its reply (caller holds slot.lock)."""
        if slot.proc is None:
            self._start(slot)
        try:
            wire.send(slot.wfd, request, limit)
            reply = wire.recv_untrusted(slot.rfd, slot.poller, time.monotonic() + timeout)
        except wire.TooLarge:
            raise
        except _BROKEN as exc:
            raise self._broken(slot, exc, timeout) from None
        return self._checked(slot, reply)

    def _broken(self, slot: Slot, exc: BaseException, timeout: float) -> Died:
        """The worker did not answer properly: end its generation and say why."""
        if isinstance(exc, wire.WireTimeout):
            reason = f"timed out after {timeout:g} s"
            self._die(slot, reason)
            return Died(reason, True)
        proc = slot.proc
        try:
            code = proc.wait(timeout=2) if proc else None
        except subprocess.TimeoutExpired:
            code = None
        reason = exit_reason(code) if code is not None else f"broke the protocol ({type(exc).__name__})"
        self._die(slot, reason)
        return Died(reason, False)

    def _checked(self, slot: Slot, reply: object) -> tuple:
        if not well_formed(reply):
            self._die(slot, "sent a malformed reply")
            raise Died("sent a malformed reply", False)
        return reply  # type: ignore[return-value]

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
        try:
            reply = self._request(slot, ("load", key, *self._envs[key]), self.call_timeout + self.grace)
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
        """Check and load an env's code once (errors surface here), keep it for more workers."""
        if self.ast_check:
            check_env_code(tools_src, verifiers_src)
        code = hashlib.sha256("\0".join((label, tools_src, verifiers_src)).encode("utf-8", "surrogatepass"))
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
                return Handle(slot.index, slot.generation, ep)
        finally:
            self._settle(slot, opened)

    def _on_episode(self, handle: Handle, request: tuple, what: str, limit: int | None = None) -> tuple:
        slot = self._slots[handle.slot]
        with slot.lock:
            if slot.generation != handle.generation:
                reason = slot.deaths.get(handle.generation, "it was stopped")
                raise EpisodeLost(f"episode lost: worker crashed ({reason})")
            try:
                return self._request(slot, request, self.call_timeout + self.grace, limit)
            except wire.TooLarge as exc:
                return ("refused", f"the arguments are {exc.size:,} bytes; the limit is {exc.limit:,} bytes")
            except Died as died:
                return _died_reply(what, died)

    def call(self, handle: Handle, tool: str, kwargs: dict) -> tuple:
        return self._on_episode(handle, ("call", handle.ep, tool, kwargs), f"tool {tool!r}",
                                self.max_argument_bytes)

    def lane(self, handle: Handle) -> int:
        """Calls in the same lane share one worker and run one after another."""
        return handle.slot

    def call_many(self, calls: list[tuple[Handle, str, dict]]) -> list[tuple | EpisodeLost]:
        """Many tool calls (of any episodes), each answered as call() would, or an EpisodeLost.

        The calls on one worker are pipelined: written ahead of their replies (up to
        _PIPELINE_BYTES unread, less than a pipe holds, so neither side blocks on a write),
        and the worker runs them back to back while this side reads the replies. Calls on
        the same episode keep their order."""
        replies: list = [None] * len(calls)
        by_slot: dict[int, list[int]] = {}
        for i, (handle, _, _) in enumerate(calls):
            by_slot.setdefault(handle.slot, []).append(i)
        for index, positions in by_slot.items():
            slot = self._slots[index]
            with slot.lock:
                self._pipeline(slot, [(i, *calls[i]) for i in positions], replies)
        return replies

    def _pipeline(self, slot: Slot, items: list[tuple[int, Handle, str, dict]], replies: list) -> None:
        """Caller holds slot.lock; fills replies[position] for every item."""
        waiting: collections.deque = collections.deque()  # (position, tool, bytes, when sent)
        todo = collections.deque(items)
        timeout = self.call_timeout + self.grace
        try:
            self._pipe(slot, todo, waiting, replies, timeout)
        except BaseException:
            if waiting and slot.proc is not None:  # replies left unread: that pipe is out of step for good
                self._die(slot, "a batch of calls on it was interrupted")
            raise

    def _pipe(self, slot: Slot, todo: collections.deque, waiting: collections.deque, replies: list,
              timeout: float) -> None:
        unread, answered = 0, time.monotonic()
        while todo or waiting:
            while todo:
                position, handle, tool, kwargs = todo[0]
                if slot.generation != handle.generation or slot.proc is None:
                    todo.popleft()
                    reason = slot.deaths.get(handle.generation, "it was stopped")
                    replies[position] = EpisodeLost(f"episode lost: worker crashed ({reason})")
                    continue
                try:
                    framed = wire.frame(("call", handle.ep, tool, kwargs), self.max_argument_bytes)
                except wire.TooLarge as exc:
                    todo.popleft()
                    replies[position] = ("refused", f"the arguments are {exc.size:,} bytes; the limit is "
                                                    f"{exc.limit:,} bytes")
                    continue
                if waiting and unread + len(framed) > _PIPELINE_BYTES:
                    break
                todo.popleft()
                try:
                    wire.write(slot.wfd, framed)
                except OSError as exc:
                    replies[position] = _died_reply(f"tool {tool!r}", self._broken(slot, exc, timeout))
                    break
                waiting.append((position, tool, len(framed), time.monotonic()))
                unread += len(framed)
            if waiting and slot.proc is not None:
                position, tool, size, sent = waiting.popleft()
                try:
                    # The worker starts a call when it has answered the one before.
                    reply = wire.recv_untrusted(slot.rfd, slot.poller, max(answered, sent) + timeout)
                    replies[position] = self._checked(slot, reply)
                except _BROKEN as exc:
                    replies[position] = _died_reply(f"tool {tool!r}", self._broken(slot, exc, timeout))
                except Died as died:
                    replies[position] = _died_reply(f"tool {tool!r}", died)
                answered = time.monotonic()
                unread -= size
            if slot.proc is None:  # it died: the calls written after the one that killed it are lost with it
                reason = slot.deaths.get(slot.generation - 1, "it was stopped")
                for later, *_ in waiting:
                    replies[later] = EpisodeLost(f"episode lost: worker crashed ({reason})")
                waiting.clear()
                unread = 0

    def evaluate(self, handle: Handle, verifier: str, answer: str | None) -> tuple:
        return self._on_episode(handle, ("evaluate", handle.ep, verifier, answer), f"verifier {verifier!r}",
                                self.max_argument_bytes)

    def snapshot(self, handle: Handle) -> bytes:
        reply = self._on_episode(handle, ("snapshot", handle.ep), "snapshot")
        if reply[0] != "ok" or not isinstance(reply[1], bytes):
            raise EpisodeLost(f"episode lost: {reply[2] if len(reply) > 2 else reply}")
        return reply[1]

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
        """Start every worker now rather than on first use (clean, bound to no env yet)."""
        for slot in self._slots:
            with slot.lock:
                if slot.proc is None and slot.loaded is None:
                    self._start(slot)

    def stats(self) -> list[dict]:
        return [{"worker": s.index, "pid": s.proc.pid if s.proc else None, "generation": s.generation,
                 "env": s.env, "loaded": s.loaded, "episodes": s.episodes, "deaths": dict(s.deaths), "info": dict(s.info)}
                for s in self._slots]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._freed.notify_all()
        self._finalizer()

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
