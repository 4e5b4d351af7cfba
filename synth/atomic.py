"""Atomic file writes: a temp file in the same folder, fsync, rename over the target.

A kill -9 at any moment leaves the old file or the new one, never half of one;
used for env folders, run folders, exports and trajectories alike.
"""

from __future__ import annotations

import functools
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


@functools.cache
def _umask() -> int:
    try:  # read, not set: setting it for a moment would race with other threads
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(path: Path) -> int:
    """The mode a new file gets from open() (0666 minus the umask), or the file's own if it exists.

    mkstemp creates 0600 files; without this every atomically written file would be private.
    A symlink or special file in its place is replaced, so its mode (or its target's) is not copied."""
    try:
        info = os.lstat(path)
        if stat.S_ISREG(info.st_mode):
            return info.st_mode & 0o777
    except OSError:
        pass
    return 0o666 & ~_umask()


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write via a temp file in the same folder, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, file_mode(path))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode() if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, value: Any, *, sort_keys: bool = True) -> None:
    """sort_keys=False keeps an order that means something (a funnel, stages in pipeline order)."""
    write_atomic(path, json.dumps(value, indent=2, sort_keys=sort_keys, default=str) + "\n")
