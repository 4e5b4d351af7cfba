"""The operating-system boundary of a sandbox worker: layers that hold even when
Python-level checks are bypassed (code that reaches the real `open` or `socket`).

Applied by the worker on itself at start-up, after it has imported everything
it needs and before it accepts any env code, in this order:

  netns         a new network namespace (no interfaces, not even loopback): as
                root directly, as a normal user inside a new user namespace
  setuid        root drops to nobody (file permissions then apply)
  no_new_privs  no setuid binary or file capability can raise privileges again
  landlock      the file system is read-only and limited to the interpreter's
                standard library (and /dev/urandom): no other file can be read,
                nothing anywhere can be written, created, truncated or removed
  seccomp       system calls that leave the process are fatal (SIGSYS): new
                sockets, ptrace and process_vm_*, signals to other processes,
                exec, fork/clone, namespaces, mounts, io_uring, bpf, keyrings
  nondumpable   other processes of the same user cannot read its memory or
                /proc/<pid>/environ (the parent marks itself the same way)

Each layer reports whether it holds; `missing(info)` lists the ones that do not,
so the pool can say so and refuse to mark envs verified.
Seccomp uses libseccomp through `pyseccomp`, Landlock the `landlock` package.
"""

from __future__ import annotations

import ctypes
import os
import sysconfig
from typing import Callable

LAYERS = ("netns", "no_new_privs", "landlock", "seccomp", "nondumpable")

_NOBODY = 65534
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38

# Fatal for env code: every one leaves the process or changes what it may do.
_FORBIDDEN_SYSCALLS = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "sendmsg", "sendmmsg",
    "recvfrom", "recvmsg", "recvmmsg", "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise",
    "kcmp", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "execve", "execveat", "fork", "vfork", "clone",
    "clone3", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "syslog", "settimeofday", "clock_settime", "adjtimex", "ioperm", "iopl",
    "name_to_handle_at", "open_by_handle_at", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setgroups", "setfsuid", "setfsgid", "migrate_pages", "move_pages", "mbind",
    "set_mempolicy", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
)
# Signals may only go to this process itself (abort() uses tgkill on itself).
_SELF_SIGNAL_SYSCALLS = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    libc.prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    return libc.prctl(option, value, 0, 0, 0) == 0


def mark_nondumpable() -> bool:
    """PR_SET_DUMPABLE=0: same-user processes can no longer ptrace us or read our
    /proc/<pid>/environ, mem or maps (used by the parent on itself, and by workers)."""
    try:
        return _prctl(_PR_SET_DUMPABLE, 0)
    except (OSError, AttributeError):
        return False


def _unshare_net(notes: list[str]) -> bool:
    libc = _libc()
    if os.geteuid() == 0:
        if libc.unshare(_CLONE_NEWNET) == 0:
            return True
        notes.append(f"netns: unshare refused ({os.strerror(ctypes.get_errno())})")
        return False
    # A normal user gets a network namespace by first entering a user namespace of its own.
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        return True
    notes.append(f"netns: unprivileged user namespaces refused ({os.strerror(ctypes.get_errno())})")
    return False


def _drop_root(notes: list[str]) -> bool:
    if os.geteuid() != 0:
        return True  # nothing to drop
    try:
        os.setgroups([])
        os.setgid(_NOBODY)
        os.setuid(_NOBODY)
        return True
    except OSError as exc:
        notes.append(f"setuid nobody: {exc}")
        return False


def read_roots() -> list[str]:
    """What the interpreter may still read once locked: its standard library."""
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if k in paths}
    dynload = os.path.join(os.path.realpath(paths["platstdlib"]), "lib-dynload") if "platstdlib" in paths else ""
    if dynload and os.path.isdir(dynload):
        roots.add(os.path.realpath(dynload))
    return sorted(r for r in roots if os.path.isdir(r))


def _import(name: str, notes: list[str]):
    """Import a binding while files can still be read (before root is dropped)."""
    try:
        return __import__(name)
    except (ImportError, RuntimeError, OSError) as exc:  # pyseccomp: RuntimeError when libseccomp.so is absent
        notes.append(f"{name}: not available ({exc})")
        return None


def _landlock_rules(landlock, notes: list[str]):
    """The ruleset, built while the allowed paths can still be opened (before root is dropped)."""
    if landlock is None:
        return None
    try:
        ctypes.set_errno(0)  # the binding reads errno even after a call that succeeded
        if landlock.landlock_abi_version() < 3:  # below 3 truncate() is not covered
            notes.append(f"landlock: kernel ABI {landlock.landlock_abi_version()} < 3")
            return None
        ruleset = landlock.Ruleset()  # handles every file-system right the kernel knows
        read = landlock.FSAccess.READ_FILE | landlock.FSAccess.READ_DIR
        for root in read_roots():
            ruleset.allow(root, rules=read)
        if os.path.exists("/dev/urandom"):
            ruleset.allow("/dev/urandom", rules=landlock.FSAccess.READ_FILE)
        return ruleset
    except (OSError, landlock.LandlockError) as exc:
        notes.append(f"landlock: {str(exc).splitlines()[0]}")
        return None


def _landlock(landlock, ruleset, notes: list[str]) -> bool:
    if ruleset is None:
        return False
    try:
        ctypes.set_errno(0)
        ruleset.apply()
        return True
    except (OSError, landlock.LandlockError) as exc:
        notes.append(f"landlock: {str(exc).splitlines()[0]}")
        return False


def _seccomp(sc, notes: list[str]) -> bool:
    if sc is None:
        return False
    try:
        flt = sc.SyscallFilter(sc.ALLOW)
        for name in _FORBIDDEN_SYSCALLS:
            try:
                flt.add_rule(sc.KILL_PROCESS, name)
            except (OSError, ValueError, RuntimeError):
                pass  # not a system call on this architecture
        pid = os.getpid()
        for name in _SELF_SIGNAL_SYSCALLS:
            flt.add_rule(sc.KILL_PROCESS, name, sc.Arg(0, sc.NE, pid))
        flt.add_rule(sc.KILL_PROCESS, "prctl", sc.Arg(0, sc.EQ, _PR_SET_DUMPABLE))
        flt.load()
        return True
    except (OSError, ValueError, RuntimeError) as exc:
        notes.append(f"seccomp: {exc}")
        return False


def apply(skip: frozenset[str] = frozenset(), after_namespaces: Callable[[], None] | None = None) -> dict:
    """Lock this process down; returns {"layers": {name: held}, "notes": [...], "uid": ...}.

    `skip` names layers not to apply: only the sandbox's own tests use it, to show
    what synth does on a machine where a layer is unavailable. `after_namespaces`
    runs once the namespaces are made (they need a single-threaded process) and
    before seccomp forbids new threads: the place to start helper threads.
    """
    notes: list[str] = []
    held: dict[str, bool] = {}
    landlock = _import("landlock", notes) if "landlock" not in skip else None
    seccomp = _import("pyseccomp", notes) if "seccomp" not in skip else None
    ruleset = _landlock_rules(landlock, notes)
    held["netns"] = "netns" not in skip and _unshare_net(notes)
    if after_namespaces is not None:
        after_namespaces()
    dropped = _drop_root(notes)
    held["no_new_privs"] = "no_new_privs" not in skip and _prctl(_PR_SET_NO_NEW_PRIVS, 1) and dropped
    held["landlock"] = "landlock" not in skip and held["no_new_privs"] and _landlock(landlock, ruleset, notes)
    held["nondumpable"] = "nondumpable" not in skip and mark_nondumpable()
    held["seccomp"] = "seccomp" not in skip and held["no_new_privs"] and _seccomp(seccomp, notes)
    for name in sorted(skip & set(LAYERS)):
        notes.append(f"{name}: switched off")
    return {"layers": held, "notes": notes, "uid": os.getuid()}


def missing(info: dict) -> list[str]:
    """The OS layers a worker's hello says do not hold."""
    layers = info.get("layers") or {}
    return [name for name in LAYERS if not layers.get(name)]
