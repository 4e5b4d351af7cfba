"""The sandbox worker process: `python -S -m synth.runtime.worker CONFIG_JSON`.

One worker holds one env's code, and only its tools.py or only its verifiers.py
(the pool never mixes envs, or an env's tools and verdicts, in a process). At
start-up, before it accepts any code, the worker:
  1. imports every module env code may use (later imports need no file reads),
     then makes every class that now exists immutable (isolation.py),
  2. applies the operating-system boundary (confine.py): network namespace,
     root dropped to nobody, no_new_privs, Landlock (read-only standard library,
     nothing else), non-dumpable, and a seccomp filter that kills the process on
     any system call that leaves it (sockets, exec, fork, ptrace, signals to others),
  3. sets resource limits: address space, CPU seconds, no file writes (FSIZE=0),
     few file descriptors, no core dumps, no new processes (NPROC=0),
  4. installs an audit hook that refuses file access, sockets, subprocesses and,
     while a request is handled, frame introspection and replacing the code or
     defaults of synth's or the standard library's functions, and records what it
     refused, so code that swallows the exception is still reported.
Every request is handled as env code from start to end: env code can run inside
synth's own steps too (an object's finalizer when an episode closes, a special
method a result has), so the audit hook guards the whole request, the garbage
collector runs only then, and the reply must be built-in data only. Between
requests no env object is touched.
The Python layers (code check, restricted builtins, module proxies, audit hook)
catch mistakes and report them clearly; the OS layer is what holds when they are
bypassed. Then it serves length-prefixed requests from the parent on its pipes.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import signal
import sys
import threading
import time
from typing import Callable, Iterator

from synth.runtime import confine, isolation, loader, wire
from synth.runtime.codecheck import ALLOWED_IMPORTS, FORBIDDEN_MODULES
from synth.runtime.guards import plain
from synth.runtime.host import Host


class SandboxViolation(PermissionError):
    """An operation the sandbox refuses."""


class _NoFrame(ValueError):
    """sys._getframe refused the way stdlib callers expect (namedtuple, enum, typing fall back)."""


class _NoAttribute(AttributeError):
    """Frame and code attributes refused the way attribute lookups fail."""


# Lazily imported helpers that allowed modules need (datetime.strptime -> _strptime).
_PRELOAD = sorted(ALLOWED_IMPORTS | {"_strptime", "encodings.idna", "encodings.latin_1", "unicodedata",
                                     "traceback", "linecache", "collections.abc", "synth.runtime.host"})
_BLOCKED_PREFIXES = (
    "socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty", "os.system",
    "os.kill", "os.killpg", "os.wait", "ctypes.", "pty.", "shutil.", "os.remove", "os.unlink", "os.rename",
    "os.mkdir", "os.rmdir", "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate", "os.utime",
    "os.listdir", "os.scandir", "os.chdir", "os.putenv", "os.unsetenv", "os.setxattr", "os.removexattr",
    "os.mkfifo", "os.mknod", "os.walk", "os.fwalk", "glob.", "mmap.", "resource.", "signal.",
    "sqlite3.enable_load_extension", "sqlite3.load_extension", "urllib.", "http.", "ftplib.", "smtplib.",
    "webbrowser.", "cpython.", "sys.addaudithook", "sys.setprofile", "sys.settrace", "sys.monitoring",
    "marshal.", "code.__new__", "function.__new__", "fcntl.", "syslog.", "os.setuid", "os.setgid",
)
# Ways from env code to frame objects (and so to the worker's own state), refused while env
# code runs with the exception stdlib callers already handle, and not counted as violations:
# collections.namedtuple asks for its caller's frame, for instance. Other audited attribute
# reads stay allowed: dataclasses reads __code__ through inspect.signature.
_FRAME_ATTRS = {"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back", "f_globals", "f_locals", "f_builtins"}
_ENV_DENIED = {"sys._getframe": _NoFrame, "sys._current_frames": _NoFrame}
_FUNCTION_PARTS = {"__code__", "__defaults__", "__kwdefaults__"}  # what makes a function do something else
_ENV_BLOCKED = {"pickle.find_class", "gc.get_objects", "gc.get_referrers", "gc.get_referents"}
_BLOCKED_IMPORTS = FORBIDDEN_MODULES | {"_posixsubprocess", "_socket", "_ctypes", "_signal",
                                        "_multiprocessing", "_posixshmem", "posix", "_thread", "_io"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _watch_parent(ppid: int) -> None:
    # If the parent dies while env code spins, nobody would kill us: exit instead.
    while os.getppid() == ppid:
        time.sleep(0.5)
    os._exit(3)


def _set_limits(memory_mb: int, cpu_seconds: int, notes: list[str]) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write to a file fails with EFBIG instead of killing us
    limits = [
        (resource.RLIMIT_AS, memory_mb * 1024 * 1024, memory_mb * 1024 * 1024),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 5),
        (resource.RLIMIT_FSIZE, 0, 0),
        (resource.RLIMIT_NOFILE, 32, 32),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, 0, 0),
    ]
    for which, soft, hard in limits:
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError) as exc:
            notes.append(f"rlimit {which}: {exc}")


def _rewires(args: tuple) -> bool:
    """object.__setattr__ on a function's code or defaults: refused when the function is not env
    code's own (its code has a file name; env code's are relative, `<env id>/tools.py`)."""
    if args[1] == "__code__":
        return True
    code = getattr(args[0], "__code__", None)
    return args[1] in _FUNCTION_PARTS and os.path.isabs(getattr(code, "co_filename", "/"))


def _make_hook(state: dict, violations: list[str]):
    roots = tuple(r + os.sep for r in confine.read_roots())

    def refuse(what: str) -> None:
        if state["env"] and len(violations) < 20:  # the worker's own refused reads are not the env's fault
            violations.append(what)
        raise SandboxViolation(f"blocked by the sandbox: {what}")

    def hook(event: str, args: tuple) -> None:
        if not state["locked"]:
            return
        if event == "open":
            path, mode, flags = args
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            writing = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & _WRITE_FLAGS)
            if not isinstance(path, str) or writing or not os.path.realpath(path).startswith(roots):
                refuse(f"open({path!r}, {mode or flags!r})")
        elif event.startswith(_BLOCKED_PREFIXES):
            refuse(f"{event}{_short(args)}")
        elif event == "sqlite3.connect" and args and args[0] not in (":memory:", b":memory:"):
            refuse(f"sqlite3.connect({args[0]!r})")
        elif event == "import":
            if args[0].split(".")[0] in _BLOCKED_IMPORTS:
                refuse(f"import {args[0]}")
            state["imported"] = state["imported"] or args[0] not in sys.modules  # its classes get frozen
        elif state["env"] and event in _ENV_DENIED:
            raise _ENV_DENIED[event](f"blocked by the sandbox: {event}")
        elif state["env"] and event == "object.__getattr__" and args[1] in _FRAME_ATTRS and not state["frames"]:
            raise _NoAttribute(f"blocked by the sandbox: reading {args[1]}")
        elif state["env"] and event == "object.__setattr__" and _rewires(args):
            refuse(f"replacing {args[1]} of {_short((args[0],))}")
        elif state["env"] and event in _ENV_BLOCKED:
            refuse(f"{event}{_short(args)}")

    return hook


def _short(args: tuple) -> str:
    text = repr(args)
    return text if len(text) < 120 else text[:117] + "..."


def _warm() -> None:
    """Caches that would otherwise read files or start processes on first use."""
    import datetime as _dt
    import uuid as _uuid

    _dt.datetime.strptime("2024-01-02 03:04", "%Y-%m-%d %H:%M")  # _strptime's regex cache
    time.localtime()  # the time zone file
    _uuid.getnode()  # uuid1() would otherwise run ifconfig-like helpers


def lockdown(config: dict, violations: list[str]) -> tuple[dict, dict, Callable[[], int]]:
    """Apply every restriction; returns (hook state, info for the parent, the class freezer)."""
    os.environ.clear()  # the parent passed nothing secret; keep nothing at all
    state = {"locked": False, "env": False, "frames": False, "imported": False}
    hook = _make_hook(state, violations)  # reads sysconfig now, while files can still be read
    for name in _PRELOAD:
        importlib.import_module(name)
    _warm()
    freeze = isolation.class_freezer()  # needs ctypes, which is dropped below
    if config.get("restricted", True):  # with the other Python layers (only the sandbox's tests turn them off)
        isolation.guard_abc_register(loader.refuse)
        freeze()
    else:
        freeze = lambda: 0  # noqa: E731
    devnull = os.open(os.devnull, os.O_WRONLY)  # opened before Landlock forbids it
    watcher = threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True, name="parent-watch")
    confined = confine.apply(frozenset(config.get("skip_layers", ())), after_namespaces=watcher.start)
    notes = confined["notes"]
    _set_limits(config["memory_mb"], config["cpu_seconds"], notes)
    for name in ("ctypes", "ctypes._endian", "ctypes.util", "landlock", "landlock.plumbing", "landlock.porcelain",
                 "pyseccomp"):
        sys.modules.pop(name, None)
    roots = tuple(r + os.sep for r in confine.read_roots())
    sys.path[:] = [p for p in sys.path if (os.path.realpath(p) + os.sep).startswith(roots)]  # stdlib only
    os.dup2(devnull, 1)  # env code's print() must not reach anyone's terminal
    if config.get("audit", True):
        sys.addaudithook(hook)
    state["locked"] = True
    info = {"pid": os.getpid(), "uid": confined["uid"], "layers": confined["layers"], "notes": notes,
            "netns": confined["layers"]["netns"]}
    return state, {**info, "devnull": devnull}, freeze


@contextlib.contextmanager
def _as_env_code(state: dict, violations: list[str], freeze: Callable[[], int]) -> Iterator[None]:
    """Handle a request: the audit hook treats it all as env code, and the garbage collector
    (which runs finalizers env code defined) is on only now."""
    violations.clear()
    state["env"] = True
    gc.enable()
    try:
        yield
    finally:
        if state["imported"]:  # a module first imported now: its classes become immutable too
            state["imported"] = False
            freeze()
        gc.disable()
        state["env"] = False


def main() -> None:
    config = json.loads(sys.argv[1])
    sys.path.extend(config.get("paths", ()))  # where the seccomp and Landlock bindings are installed
    rfd, wfd = config["rfd"], config["wfd"]
    violations: list[str] = []
    state, info, freeze = lockdown(config, violations)

    @contextlib.contextmanager
    def frames() -> Iterator[None]:  # the host reads a traceback's frames: code objects and lines only
        state["frames"] = True
        try:
            yield
        finally:
            state["frames"] = False

    host = Host(timeout=config["timeout"], restricted=config["restricted"], frames=frames, violations=violations,
                max_result_bytes=config.get("max_result_bytes"))
    devnull = info.pop("devnull")
    wire.send(wfd, ("hello", info))
    os.dup2(devnull, 2)  # start-up errors went to the parent; later chatter goes nowhere
    gc.disable()
    while True:
        try:
            request = wire.recv_trusted(rfd)
        except EOFError:
            return
        with _as_env_code(state, violations, freeze):
            reply = host.handle(request)
            if not plain(reply):
                reply = ("error", "internal", "the worker's reply held something other than plain data", "")
        wire.send(wfd, reply)
        with _as_env_code(state, violations, freeze):
            host.prepare()  # the next episode's fresh module, while the parent reads the reply


if __name__ == "__main__":
    main()
