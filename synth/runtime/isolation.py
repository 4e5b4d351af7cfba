"""What one episode's code could leave behind for the next in the same worker, and
what stops it.

- Classes: every class that exists in a sandbox worker before env code runs (the
  standard library's, synth's own) is made immutable at start-up with the flag
  CPython's built-in types carry (Py_TPFLAGS_IMMUTABLETYPE), so
  `enc = json.JSONEncoder; enc.encode = ...`, or the same through `type(obj)`,
  raises TypeError. Classes env code defines are new in every episode and stay its
  own. (Worker only: it needs ctypes, and the parent's own code may patch classes.)
- ABC registries: registering a pre-existing class with a pre-existing ABC
  (`collections.abc.Mapping.register(int)`) is refused; env code may still register
  its own classes, which die with its episode.
- Interpreter state: each episode, and each evaluation, has its own decimal context
  and random generator (EpisodeState), switched in around every piece of its code,
  so `decimal.getcontext().prec = 2` or `random.seed(1)` is seen by no other
  episode, interleaved or later.
- Module attributes: the stand-ins of loader.py are read-only and leave out
  mutable module-level objects (decimal.DefaultContext, calendar.c, ...).
"""

from __future__ import annotations

import abc
import decimal
import gc
import random
import threading
import weakref
from typing import Any, Callable

IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE (CPython >= 3.10)
_ENV_MODULE_PREFIX = "synth_env_"
_current = threading.local()  # .state: the EpisodeState whose code runs on this thread
_STDLIB_MUTATES = (weakref.finalize,)  # sets class attributes of its own at run time; env code cannot reach it


class EpisodeState:
    """The interpreter state one episode (or one evaluation) owns."""

    __slots__ = ("decimal", "random")

    def __init__(self) -> None:
        self.decimal = decimal.Context()  # the defaults: decimal.DefaultContext is hidden from env code
        self.random: random.Random | None = None  # made on first use (seeding reads os.urandom)


def enter(state: EpisodeState) -> tuple:
    """Switch `state` in for this thread; returns what `leave` puts back."""
    previous = (getattr(_current, "state", None), decimal.getcontext())
    _current.state = state
    decimal.setcontext(state.decimal)
    return previous


def leave(state: EpisodeState, previous: tuple) -> None:
    state.decimal = decimal.getcontext()  # env code may have installed a context of its own
    _current.state = previous[0]
    decimal.setcontext(previous[1])


def current_random() -> random.Random:
    """The running episode's generator (the module's own outside any episode)."""
    state = getattr(_current, "state", None)
    if state is None:
        return random._inst  # type: ignore[attr-defined]
    if state.random is None:
        state.random = random.Random()
    return state.random


def random_function(name: str) -> Callable[..., Any]:
    """What env code gets for `random.<name>` (a method of the module's hidden generator)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(current_random(), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = getattr(random.Random, name).__doc__
    return call


# --------------------------------------------------------------------------- worker start-up


_FLAGS = type.__dict__["__flags__"].__get__
_TYPE_DICT = type.__dict__["__dict__"].__get__


def immutable(cls: Any) -> bool:
    return issubclass(type(cls), type) and bool(_FLAGS(cls) & IMMUTABLE)


def guard_abc_register(refused: Callable[[str], None]) -> None:
    """ABCMeta.register refuses to register a pre-existing class with a pre-existing ABC
    (call before freeze_classes; `refused` records the attempt as a sandbox violation)."""
    original = abc.ABCMeta.register

    def register(cls: Any, subclass: Any) -> Any:
        if immutable(cls) and immutable(subclass):
            what = f"registering {type.__repr__(subclass)} with {type.__repr__(cls)}"
            refused(what)
            raise TypeError(f"environment code may not change the standard library: {what}")
        return original(cls, subclass)

    register.__doc__ = original.__doc__
    abc.ABCMeta.register = register  # type: ignore[method-assign]


def class_freezer() -> Callable[[], int]:
    """A function that makes every heap class now alive immutable, except env code's own;
    returns how many it changed. Built while ctypes can still be imported."""
    import ctypes

    class _Probe:
        pass

    # tp_flags' place in the type object, found rather than assumed, then checked on each class.
    word = ctypes.sizeof(ctypes.c_ulong)
    offset = next((o for o in range(0, 64 * word, word)
                   if ctypes.c_ulong.from_address(id(_Probe) + o).value == _Probe.__flags__
                   and ctypes.c_ulong.from_address(id(int) + o).value == int.__flags__), None)
    if offset is None:
        raise RuntimeError("cannot find tp_flags in this interpreter's type objects")

    def freeze() -> int:
        changed = 0
        for obj in gc.get_objects():
            # Read through `type` itself: a metaclass of env code's cannot answer instead.
            if not issubclass(type(obj), type) or _FLAGS(obj) & IMMUTABLE or any(obj is c for c in _STDLIB_MUTATES):
                continue
            module = _TYPE_DICT(obj).get("__module__")
            if type(module) is str and module.startswith(_ENV_MODULE_PREFIX):
                continue
            flags = ctypes.c_ulong.from_address(id(obj) + offset)
            if flags.value != _FLAGS(obj):
                raise RuntimeError(f"unexpected type layout for {type.__repr__(obj)}")
            flags.value |= IMMUTABLE
            changed += 1
        return changed

    return freeze
