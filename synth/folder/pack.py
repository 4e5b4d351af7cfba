"""Env folders and input files as bytes, for a worker on another machine (`--executor ray`).

A worker gets an env's folders as they are in the driver's output folder and
returns them finished, as a tar: `envs/<env_id>/`, `built/<env_id>/` and
`failed/<env_id>/`, each present or absent. Unpacking makes the receiving output folder hold exactly
what the tar holds for that env (a folder the tar lacks is removed), so the
driver's folder ends as the worker's did. Nothing assumes a shared file system.

Unpacking extracts into a staging folder first, accepts only those folders
(no links, no paths that climb out), then swaps each into place with renames.
"""

from __future__ import annotations

import io
import shutil
import tarfile
import uuid
from pathlib import Path

from synth.errors import SynthError
from synth.pipeline.layout import ENV_FOLDERS

STAGING = ".incoming"  # under the output folder, removed after each unpack


class PackError(SynthError):
    """A tar that is not what a worker sends back."""


def _tar(entries: dict[str, Path]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for name, path in entries.items():
            tar.add(path, arcname=name)
    return buffer.getvalue()


def _untar(data: bytes, dest: Path, allowed: set[str]) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            inside = any(m.name == top or m.name.startswith(top + "/") for top in allowed)
            if not inside or ".." in Path(m.name).parts or not (m.isfile() or m.isdir()):
                raise PackError(f"unexpected entry {m.name!r} in an env tar (only {', '.join(sorted(allowed))})")
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, members=members, filter="data")
        else:  # Python < 3.11.4: the checks above are the filter
            tar.extractall(dest, members=members)


def pack_env(out: Path, env_id: str) -> bytes:
    """The env's folders in `out` (envs/<id>, built/<id>, failed/<id>; those that exist) as a tar."""
    out = Path(out)
    entries = {f"{folder}/{env_id}": out / folder / env_id for folder in ENV_FOLDERS}
    return _tar({name: path for name, path in entries.items() if path.is_dir()})


def unpack_env(data: bytes, out: Path, env_id: str) -> None:
    """Make `out`'s folders for this env exactly the tar's: each is replaced, added or removed."""
    out = Path(out)
    names = {f"{folder}/{env_id}" for folder in ENV_FOLDERS}
    staging = out / STAGING / f"{env_id}.{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        _untar(data, staging / "new", names)
        for folder in ENV_FOLDERS:
            dest, new = out / folder / env_id, staging / "new" / folder / env_id
            if dest.exists():
                dest.rename(staging / f"old-{folder}")
            if new.is_dir():
                dest.parent.mkdir(parents=True, exist_ok=True)
                new.rename(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        try:
            (out / STAGING).rmdir()
        except OSError:
            pass  # another env is being unpacked, or it is gone already


def pack_files(files: dict[str, Path | None]) -> bytes:
    """Input files or folders a worker needs (a price table, replay recordings), by name."""
    return _tar({f"{name}/{Path(path).name}": Path(path) for name, path in files.items() if path is not None})


def unpack_files(data: bytes, dest: Path, names: list[str]) -> dict[str, Path]:
    """Extract what `pack_files` packed into `dest`; name -> its local path."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    _untar(data, dest, set(names))
    return {name: next((dest / name).iterdir()) for name in names if (dest / name).is_dir()}
