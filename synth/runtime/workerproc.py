"""Sandbox worker processes, one per pool slot: starting one, reading why it ended,
and the one-line notice when a machine cannot give it the whole OS boundary."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from synth.errors import SynthError
from synth.runtime import wire

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding `synth/`


class SandboxError(SynthError):
    """The sandbox itself failed (a worker could not start)."""


class EpisodeLost(SynthError):
    """The worker holding an episode died; the episode's state is gone."""


@dataclass
class Slot:
    index: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    proc: subprocess.Popen | None = None
    wfd: int = -1
    rfd: int = -1
    poller: select.poll | None = None
    generation: int = 0
    env: str | None = None  # the env this slot serves (None: free)
    loaded: str | None = None  # identity of the env code its process ran (None: a clean process)
    loaded_key: str | None = None  # the env key its process holds now
    episodes: int = 0  # live episodes of the current generation
    pending: int = 0  # requests that reserved the slot and are still opening or loading
    last_used: float = 0.0
    deaths: dict = field(default_factory=dict)  # generation -> reason it ended
    info: dict = field(default_factory=dict)


class Died(Exception):
    def __init__(self, reason: str, timed_out: bool):
        super().__init__(reason)
        self.reason, self.timed_out = reason, timed_out


def exit_reason(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        if -code == signal.SIGSYS:
            return "killed by SIGSYS: it made a system call the sandbox forbids"
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def well_formed(reply: object) -> bool:
    """The reply shapes host.py produces; anything else means the worker is not itself."""
    if not isinstance(reply, tuple) or not reply:
        return False
    if reply[0] in ("ok", "hello"):
        return len(reply) == 2
    if reply[0] == "tool_error":
        return len(reply) == 2 and isinstance(reply[1], str)
    return reply[0] == "error" and len(reply) == 4 and all(isinstance(x, str) for x in reply[1:])


@functools.lru_cache(1)
def _binding_paths() -> tuple[str, ...]:
    """Folders holding the seccomp and Landlock bindings (the worker starts with -S)."""
    found = []
    for name in ("landlock", "pyseccomp"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            folder = os.path.dirname(os.path.dirname(spec.origin)) if spec.submodule_search_locations \
                else os.path.dirname(spec.origin)
            if folder not in found:
                found.append(folder)
    return tuple(found)


_noticed: set[str] = set()


def notice_weak(missing: list[str], notes: list[str], allowed: bool) -> None:
    """One line on stderr per process when the OS layer is incomplete."""
    key = ",".join(missing)
    if key in _noticed:
        return
    _noticed.add(key)
    why = "; ".join(notes[:3]) or "unavailable"
    then = ("--allow-weak-sandbox given: envs may still be marked verified" if allowed
            else "envs will not be marked verified unless you pass --allow-weak-sandbox")
    print(f"warning: sandbox OS layer incomplete on this machine (missing {', '.join(missing)}: {why}); {then}",
          file=sys.stderr, flush=True)


def start_worker(slot: Slot, options: dict, startup_timeout: float) -> None:
    """Start the worker process of `slot` and wait for its hello (options: see worker.py)."""
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    config = {**options, "rfd": to_worker_r, "wfd": from_worker_w, "paths": list(_binding_paths())}
    # Nothing from our environment: no API keys, no proxies, no HOME.
    env = {"PYTHONPATH": _PACKAGE_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-m", "synth.runtime.worker", json.dumps(config)],
            pass_fds=(to_worker_r, from_worker_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, env=env, cwd="/", start_new_session=True,
        )
    except OSError as exc:
        os.close(to_worker_w)
        os.close(from_worker_r)
        raise SandboxError(f"cannot start a sandbox worker with {sys.executable}: {exc}") from None
    finally:
        os.close(to_worker_r)
        os.close(from_worker_w)
    slot.proc, slot.wfd, slot.rfd = proc, to_worker_w, from_worker_r
    slot.poller = select.poll()
    slot.poller.register(from_worker_r, select.POLLIN)
    try:
        hello = wire.recv_untrusted(slot.rfd, slot.poller, time.monotonic() + startup_timeout, 1 << 20)
    except (wire.WireClosed, wire.WireTimeout, pickle.UnpicklingError, ValueError, OSError) as exc:
        proc.kill()
        err = proc.stderr.read().decode(errors="replace").strip().splitlines() if proc.stderr else []
        close_slot(slot)
        detail = err[-1] if err else type(exc).__name__
        raise SandboxError(f"sandbox worker failed to start: {detail}") from None
    proc.stderr.close()
    slot.info = hello[1] if isinstance(hello, tuple) and len(hello) == 2 and isinstance(hello[1], dict) else {}


def close_slot(slot: Slot) -> None:
    """Close the pipes and kill the worker of a slot (the caller holds its lock)."""
    for fd in (slot.wfd, slot.rfd):
        if fd >= 0:
            os.close(fd)
    if slot.proc is not None:
        slot.proc.kill()
        slot.proc.wait()
    slot.proc, slot.wfd, slot.rfd, slot.poller = None, -1, -1, None


def shutdown(slots: list[Slot], spares: list[Slot] = ()) -> None:
    for slot in slots:
        with slot.lock:
            close_slot(slot)
    for spare in spares:  # started ahead of need and never handed to a slot
        close_slot(spare)
