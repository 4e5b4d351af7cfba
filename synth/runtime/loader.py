"""Second layer of defence: run generated code as a module whose builtins are
restricted (no open/exec/eval/compile, getattr & co. refusing private and
dangerous names) and whose imports give read-only stand-ins of the allowed
modules that carry only what tool code may touch: no module reachable through
another module's attributes (`typing.sys`, `uuid.os`), no helper that takes an
attribute or module name as a string or evaluates one (`operator.attrgetter`,
`typing.get_type_hints`, `enum.global_enum`, `functools.singledispatch`; guarded
versions of `functools.update_wrapper`/`wraps` and `dataclasses.dataclass`), no
mutable module-level object (`decimal.DefaultContext`; lists and sets come as
tuples and frozensets), and `random`'s functions drawing from the running
episode's own generator (isolation.py).

Code is compiled once and executed again for every episode (`run_module`), so
module-level state never outlives an episode.

Used by the sandbox worker and by the trusted in-process mode alike, so both
run the same code the same way.
"""

from __future__ import annotations

import __future__
import builtins
import dataclasses
import functools
import keyword
import linecache
import sys
import types
from typing import Any

from synth.runtime.codecheck import _PARSE_LOCK, ALLOWED_IMPORTS, DANGEROUS_NAMES, refused_name
from synth.runtime.isolation import random_function

_REMOVED = {
    "exec", "eval", "compile", "open", "globals", "locals", "vars", "breakpoint", "input", "help", "exit",
    "quit", "copyright", "credits", "license", "memoryview", "__loader__", "__spec__", "__import__",
}
# Per allowed module, public names that still lead out: evaluation of strings, attribute
# lookups by name, and process-wide state one episode could leave for the next (mutable
# module-level objects, functions that change them).
_DENIED = {
    "typing": {"get_type_hints", "ForwardRef", "get_overloads", "clear_overloads"},
    "operator": {"attrgetter", "methodcaller"},
    "string": {"Formatter"},
    "sqlite3": {"register_adapter", "register_converter", "adapters", "converters", "enable_callback_tracebacks",
                "enable_shared_cache", "complete_statement"},
    "time": {"tzset"},
    "decimal": {"DefaultContext", "BasicContext", "ExtendedContext"},
    "calendar": {"c", "setfirstweekday"},
    "copy": {"dispatch_table"},
    "datetime": {"datetime_CAPI"},
    "enum": {"global_enum"},  # copies members into the globals of any module, named by the class
    "functools": {"singledispatch", "singledispatchmethod"},  # evaluate annotation strings (get_type_hints)
}
# Mutable module-level values env code may read: it gets an immutable copy.
_COPIED = {"calendar": {"mdays", "day_name", "day_abbr", "month_name", "month_abbr"},
           "hashlib": {"algorithms_guaranteed", "algorithms_available"}, "typing": {"EXCLUDED_ATTRIBUTES"}}
# Submodules tool code may use as attributes of their package (`collections.abc.Mapping`).
_SUBMODULES = {"collections": ("abc",)}


# What env code tried and was refused (hidden module attributes, dangerous names). The host
# reports it as a sandbox violation even when the code swallowed the error.
REFUSED: list[str] = []
_HIDDEN: dict[str, frozenset[str]] = {}  # stand-in name -> real attributes it leaves out


def refuse(what: str) -> None:
    if len(REFUSED) < 20:
        REFUSED.append(what)


class SafeModule(types.ModuleType):
    """A read-only stand-in for an allowed module."""

    def __getattr__(self, name: str) -> Any:
        if name in _HIDDEN.get(self.__name__, ()):
            refuse(f"{self.__name__[len('<sandboxed '):-1]}.{name}")
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r} (environment code may use "
                             "only the plain functions and classes of allowed modules)")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"module {self.__name__!r} is read-only in environment code")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"module {self.__name__!r} is read-only in environment code")


@functools.cache
def safe_module(name: str) -> SafeModule:
    """The stand-in for module `name` (its __name__ is not the real one, so `from x import y`
    cannot fall back to sys.modules and reach a real submodule)."""
    real = sys.modules.get(name) or builtins.__import__(name, fromlist=("_",))
    denied = _DENIED.get(name, set())
    keep = {k: v for k, v in vars(real).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType) and k not in denied
            and k not in DANGEROUS_NAMES}
    for k in _COPIED.get(name, ()):
        keep[k] = frozenset(keep[k]) if isinstance(keep[k], set) else tuple(keep[k])
    keep.update(_GUARDED.get(name, {}))
    if name == "random":  # each episode draws from a generator of its own
        keep.update({k: random_function(k) for k, v in keep.items() if getattr(v, "__self__", None) is real._inst})
    for sub in _SUBMODULES.get(name, ()):
        keep[sub] = safe_module(f"{name}.{sub}")
    module = SafeModule(f"<sandboxed {name}>")
    vars(module).update(keep)
    _HIDDEN[module.__name__] = frozenset(k for k in vars(real) if not k.startswith("__") and k not in keep)
    return module


def _standard_names(names: Any, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(names)
    for name in names:
        if type(name) is not str or name not in allowed:
            refuse(f"functools {what} name {str(name)[:60]!r}")
            raise AttributeError(f"functools.update_wrapper may copy only the standard attributes in environment "
                                 f"code ({', '.join(allowed)})")
    return names


def _update_wrapper(wrapper: Any, wrapped: Any, assigned: Any = functools.WRAPPER_ASSIGNMENTS,
                    updated: Any = functools.WRAPPER_UPDATES) -> Any:
    """functools.update_wrapper with the standard attribute names only: given others it would read
    and write any attribute by name (a function's __globals__, for one)."""
    return functools.update_wrapper(wrapper, wrapped, _standard_names(assigned, functools.WRAPPER_ASSIGNMENTS,
                                                                      "assigned"),
                                    _standard_names(updated, functools.WRAPPER_UPDATES, "updated"))


def _wraps(wrapped: Any, assigned: Any = functools.WRAPPER_ASSIGNMENTS,
           updated: Any = functools.WRAPPER_UPDATES) -> Any:
    return functools.partial(_update_wrapper, wrapped=wrapped,
                             assigned=_standard_names(assigned, functools.WRAPPER_ASSIGNMENTS, "assigned"),
                             updated=_standard_names(updated, functools.WRAPPER_UPDATES, "updated"))


def _dataclass(cls: Any = None, /, **options: Any) -> Any:
    """dataclasses.dataclass for env code's own classes: it compiles methods from the field names,
    with the globals of the module the class names, so both must be env code's."""

    def wrap(klass: Any) -> Any:
        namespace = type.__dict__["__dict__"].__get__(klass) if issubclass(type(klass), type) else {}
        module = namespace.get("__module__")
        fields = namespace.get("__annotations__", {})
        if not (type(module) is str and module.startswith("synth_env_") and type(fields) is dict and all(
                type(f) is str and f.isidentifier() and not keyword.iskeyword(f) for f in fields)):
            refuse("dataclass of a class that is not environment code's own")
            raise TypeError("dataclass() takes a class environment code defines, with identifier field names")
        return dataclasses.dataclass(klass, **options)

    return wrap if cls is None else wrap(cls)


_GUARDED = {"functools": {"update_wrapper": _update_wrapper, "wraps": _wraps},
            "dataclasses": {"dataclass": _dataclass}}
_IMPORTED: dict[tuple[str, bool], SafeModule] = {}  # (name, from-import?) -> stand-in: imports run per episode


def _restricted_import(name: str, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
    name = str.__str__(name) if isinstance(name, str) else name  # a str subclass could answer checks falsely
    found = _IMPORTED.get((name, bool(fromlist))) if not level and isinstance(name, str) else None
    if found is not None:
        return found
    if level or not isinstance(name, str) or name.split(".")[0] not in ALLOWED_IMPORTS:
        refuse(f"import {str(name)[:60]}")
        raise ImportError(f"import of {name!r} is not allowed in environment code")
    builtins.__import__(name, None, None, (), 0)  # loads it (and its parents) if needed
    module = safe_module(name) if fromlist else safe_module(name.split(".")[0])
    _IMPORTED[(name, bool(fromlist))] = module
    return module


def _public(name: Any) -> str:
    if not isinstance(name, str):
        raise TypeError("attribute name must be a string")
    name = str.__str__(name)  # an exact str: a subclass could answer startswith() falsely
    if refused_name(name):
        refuse(f"attribute {name[:60]!r} by name")
        raise AttributeError(f"access to attribute {name!r} is not allowed in environment code")
    return name


def _getattr(obj: Any, name: str, *default: Any) -> Any:
    return getattr(obj, _public(name), *default)


def _hasattr(obj: Any, name: str) -> bool:
    return hasattr(obj, _public(name))


def _setattr(obj: Any, name: str, value: Any) -> None:
    setattr(obj, _public(name), value)


def _delattr(obj: Any, name: str) -> None:
    delattr(obj, _public(name))


@functools.cache
def _builtins_template() -> dict[str, Any]:
    table = {k: v for k, v in vars(builtins).items() if k not in _REMOVED}
    table.update(__import__=_restricted_import, getattr=_getattr, hasattr=_hasattr, setattr=_setattr,
                 delattr=_delattr)
    return table


def compile_source(source: str, filename: str) -> types.CodeType:
    """Compile once per env; the source goes into linecache so tracebacks need no file reads."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    with _PARSE_LOCK:  # see codecheck: the 3.11 parser is not thread-safe
        # Annotations stay strings (PEP 563): evaluating them on every episode's run is wasted work.
        return compile(source, filename, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)


def run_module(name: str, code: types.CodeType, filename: str, *, restricted: bool = True) -> types.ModuleType:
    """Execute compiled env code as a new module `name`.

    The module is registered in sys.modules so that stdlib helpers that look a
    module's globals up by name (typing, dataclasses) get its restricted
    builtins rather than an empty dict that would be filled with the real ones.
    """
    module = types.ModuleType(name)
    module.__file__ = filename
    if restricted:
        # Shared, not copied: env code has no way to the dict (no __builtins__, vars or globals,
        # no dunder attributes), and a worker process only ever holds one env.
        module.__dict__["__builtins__"] = _builtins_template()
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # noqa: S102 - this is the loader; the code passed the checks
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_module(name: str, source: str, filename: str, *, restricted: bool = True) -> types.ModuleType:
    """compile_source + run_module."""
    return run_module(name, compile_source(source, filename), filename, restricted=restricted)


def drop_module(name: str) -> None:
    """Forget a module and empty its namespace: that breaks the function <-> globals cycles,
    so an episode's module is freed at once instead of by a later garbage collection."""
    module = sys.modules.pop(name, None)
    if module is not None:
        vars(module).clear()


def unload_module(name: str, filename: str) -> None:
    sys.modules.pop(name, None)
    linecache.cache.pop(filename, None)
