"""Reading the files of an env folder that may come from someone else.

An env folder is input, not trusted state: a file in it may be a symlink to a
secret (`db/initial.sqlite -> /root/.ssh/id_rsa`), a FIFO that blocks forever,
a device, a 1.5 GB database, JSON nested thousands deep or bytes that are not
UTF-8. `read_env_bytes` is the one function every command (check, show, verify,
export, serve, rollout, view) reads an env folder's files through: it opens
without following links at any level below the env folder (O_NOFOLLOW, and
O_NONBLOCK so a FIFO never blocks), refuses anything but a regular file, checks
the size before reading a byte, and turns a failure into one InputError line
naming the file. The other readers here only decode what it returns.

`safe_env_id` is the one check for an env id before it becomes part of a path
or a URL.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from synth.errors import InputError

ENV_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

_MB = 1 << 20
# Largest size accepted per file (bytes); anything else under the folder: 16 MB.
SIZE_LIMITS = {
    "env.json": 4 * _MB, "tools.json": 4 * _MB, "tasks.jsonl": 32 * _MB, "tests.jsonl": 64 * _MB,
    "report.json": 64 * _MB, "rules.json": 4 * _MB, "review.json": _MB, "tools.py": 4 * _MB,
    "verifiers.py": 4 * _MB, "db/schema.sql": 16 * _MB, "db/data.sql": 256 * _MB,
    "db/initial.sqlite": 512 * _MB, "task_templates.jsonl": 32 * _MB, "calibration.json": 64 * _MB,
}
_DEFAULT_LIMIT = 16 * _MB



DB_FILE = "db/initial.sqlite"


def missing_hint(root: Path | str, missing: list[str] | tuple[str, ...]) -> str:
    """What to do about files missing from an env folder, naming the command that does it."""
    missing = list(missing)
    if missing == [DB_FILE]:
        return f"`synth rebuild-db {root}` rebuilds it from db/schema.sql and db/data.sql"
    return ("the env folder is incomplete: copy the whole folder again, or build the env again from its "
            "scenario (`synth build`)")

class EnvFileError(InputError):
    """A file of an env folder that cannot be used as it is."""


class EnvFileMissing(EnvFileError):
    """The file does not exist (optional files are read with read_optional_*)."""


def safe_env_id(value: Any, where: str = "env.json") -> str:
    """`value` if it is a usable env id (lower-case letters, digits, _ and -; no dots or slashes)."""
    if not isinstance(value, str) or not ENV_ID_RE.match(value):
        raise EnvFileError(f"{where}: env id {str(value)[:80]!r} is not a slug (lower-case letters, digits, "
                           "'_' and '-', at most 64 characters); fix the id or rebuild the env")
    return value


def _open_beneath(root: Path, rel: str) -> int:
    """An fd for root/rel, refusing a symlink at any level below root."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise EnvFileError(f"{root}: bad file name {rel!r}")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise EnvFileMissing(f"{root}: no such env folder") from None
    except OSError as exc:
        raise EnvFileError(f"{root}: cannot be opened as a folder ({exc.strerror})") from None
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | (0 if last else os.O_DIRECTORY)
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except OSError as exc:
                if os.path.islink(os.path.join(root, *parts[: i + 1])):
                    raise EnvFileError(f"{root / rel}: a symbolic link; env folders must hold regular files "
                                       "only, copy the real file in") from None
                if isinstance(exc, FileNotFoundError):
                    raise EnvFileMissing(f"{root / rel}: missing; {missing_hint(root, [rel])}") from None
                raise EnvFileError(f"{root / rel}: cannot be opened ({exc.strerror})") from None
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_env_bytes(root: Path | str, rel: str, limit: int | None = None, *, prefix: int | None = None) -> bytes:
    """The bytes of root/rel: a regular file, no symlink on the way, at most `limit` bytes
    (`prefix`: only its first bytes, after the same checks)."""
    root = Path(root)
    limit = limit if limit is not None else SIZE_LIMITS.get(rel, _DEFAULT_LIMIT)
    fd = _open_beneath(root, rel)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise EnvFileError(f"{root / rel}: not a regular file; env folders must hold regular files only")
        if info.st_size > limit:
            raise EnvFileError(f"{root / rel}: {info.st_size:,} bytes, over the limit of {limit:,}; "
                               "this is not a file synth wrote")
        if prefix is not None:
            return os.read(fd, prefix)
        chunks, left = [], limit + 1
        while left > 0:  # the file may grow while we read: stop past the limit
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise EnvFileError(f"{root / rel}: over the limit of {limit:,} bytes")
        return data
    finally:
        os.close(fd)


def read_env_text(root: Path | str, rel: str, limit: int | None = None) -> str:
    data = read_env_bytes(root, rel, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvFileError(f"{Path(root) / rel}: not UTF-8 text (byte {exc.start}); rebuild the env") from None


def parse_json(text: str, where: str) -> Any:
    """json.loads with every failure, deep nesting included, as one EnvFileError line."""
    try:
        return json.loads(text)
    except RecursionError:
        raise EnvFileError(f"{where}: JSON nested too deeply; rebuild the env") from None
    except ValueError as exc:
        raise EnvFileError(f"{where}: invalid JSON ({str(exc).splitlines()[0][:200]}); rebuild the env") from None


def read_env_json(root: Path | str, rel: str) -> Any:
    return parse_json(read_env_text(root, rel), str(Path(root) / rel))


def read_optional_text(root: Path | str, rel: str) -> str | None:
    """read_env_text, or None when the file does not exist (a link or a FIFO is still refused)."""
    try:
        return read_env_text(root, rel)
    except EnvFileMissing:
        return None


def read_optional_json(root: Path | str, rel: str, default: Any = None) -> Any:
    """read_env_json, or `default` when the file does not exist."""
    text = read_optional_text(root, rel)
    return default if text is None else parse_json(text, str(Path(root) / rel))


def foreign_entries(root: Path | str, limit: int = 10_000) -> list[str]:
    """What an env folder holds besides folders and regular files (symlinks, FIFOs, devices,
    sockets), as "<path>: <what it is>" lines; links are not followed."""
    found, seen, todo = [], 0, [Path(root)]
    while todo and seen < limit:
        try:
            entries = list(os.scandir(todo.pop()))
        except OSError as exc:
            found.append(f"{exc.filename}: cannot be listed ({exc.strerror})")
            continue
        for entry in entries:
            seen += 1
            if entry.is_symlink():
                found.append(f"{entry.path}: a symbolic link")
            elif entry.is_dir(follow_symlinks=False):
                todo.append(Path(entry.path))
            elif not entry.is_file(follow_symlinks=False):
                found.append(f"{entry.path}: not a regular file")
    return sorted(found)


def env_file_exists(root: Path | str, rel: str) -> bool:
    """True if root/rel exists as anything, a symlink included (readers then refuse it)."""
    return os.path.lexists(os.path.join(root, rel))
