"""The worker processes of a pool: its slots, the spare worker started ahead of need,
one request and its bounded reply, and what happens when a worker dies.

SandboxPool (sandbox.py) adds what runs on them: envs, episodes and verdicts.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import threading
import time
import weakref

from synth.runtime import confine, wire
from synth.runtime.workerproc import (Died, SandboxError, Slot, close_slot, exit_reason, notice_weak, shutdown,
                                      start_worker, well_formed)

SMALL_REPLY = 1 << 20  # hello, open, close, unload, ping
FRAMING = 64 << 10  # room in a reply for its envelope, an error message and a traceback
# What a worker that did not answer properly raises on our side (wire.ReplyTooLarge is a ValueError).
BROKEN = (wire.WireTimeout, wire.WireClosed, OSError, pickle.UnpicklingError, ValueError, EOFError)


def died_reply(what: str, died: Died, after: str = "this episode is lost") -> tuple:
    """The reply a request gets when its worker died while handling it."""
    kind = "killed" if died.timed_out else "crash"
    return ("error", kind, f"{what} stopped its sandbox worker ({died.reason}); the worker was restarted and {after}",
            "")


class WorkerSlots:
    """At most `workers` sandbox worker processes, each in a slot; safe to use from many threads.
    `spares_from`: the pool whose spare worker this one takes (two pools of one SandboxPool share
    one spare)."""

    def __init__(self, workers: int, options: dict, *, startup_timeout: float, allow_weak: bool,
                 spares_from: "WorkerSlots | None" = None):
        if workers < 1:
            raise ValueError("a sandbox pool needs at least one worker")
        self._worker_options = options
        self.startup_timeout, self.allow_weak = startup_timeout, allow_weak
        self._missing: list[str] = []
        self._slots = [Slot(i) for i in range(workers)]
        self._spare_pool = spares_from or self
        self._spare: Slot | None = None  # a clean worker started ahead of need
        self._spare_starting = False
        self._spares_made: list[Slot] = []
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._closed = False
        self._finalizer = weakref.finalize(self, shutdown, self._slots, self._spares_made)
        confine.mark_nondumpable()  # our environment (API keys) and memory stay ours
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (pool := ref()) and pool._forget_workers())

    @property
    def missing_layers(self) -> list[str]:
        """OS layers some worker of this pool reported missing."""
        return list(self._missing)

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

    def _start(self, slot: Slot) -> None:
        """Give `slot` a clean worker: the spare one started in the background if it is ready
        (a process start with its lockdown takes ~0.1 s), else a new one; then start the next spare."""
        owner = self._spare_pool
        with owner._lock:
            spare, owner._spare = owner._spare, None
        if spare is not None and spare.proc is not None and spare.proc.poll() is None:
            slot.proc, slot.wfd, slot.rfd, slot.poller, slot.info = (spare.proc, spare.wfd, spare.rfd,
                                                                     spare.poller, spare.info)
            spare.proc, spare.wfd, spare.rfd, spare.poller = None, -1, -1, None  # the slot owns them now
        else:
            if spare is not None:
                close_slot(spare)
            start_worker(slot, self._worker_options, self.startup_timeout)
        owner._prestart()
        self._check_layers(slot)

    def _prestart(self) -> None:
        with self._lock:
            if self._spare_starting or self._spare is not None or self._closed:
                return
            self._spare_starting = True

        def run() -> None:
            spare = Slot(-1)
            try:
                start_worker(spare, self._worker_options, self.startup_timeout)
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
            self._missing = sorted(set(self._missing) | set(missing))
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

    def _request(self, slot: Slot, request: tuple, timeout: float, limit: int | None = None,
                 reply_limit: int = SMALL_REPLY) -> tuple:
        """Send one request and wait for its reply, at most `reply_limit` bytes (caller holds slot.lock)."""
        if slot.proc is None:
            self._start(slot)
        try:
            wire.send(slot.wfd, request, limit)
            reply = wire.recv_untrusted(slot.rfd, slot.poller, time.monotonic() + timeout, reply_limit)
        except wire.TooLarge:
            raise
        except BROKEN as exc:
            raise self._broken(slot, exc, timeout) from None
        return self._checked(slot, reply)

    def _broken(self, slot: Slot, exc: BaseException, timeout: float) -> Died:
        """The worker did not answer properly: end its generation and say why."""
        if isinstance(exc, wire.ReplyTooLarge):  # never read: the worker is not itself, stop it
            reason = f"announced a reply of {exc.size:,} bytes, over its limit of {exc.limit:,}"
            self._die(slot, reason)
            return Died(reason, False)
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
