"""What `synth view PATH...` looks at: env folders and run folders on disk.

A PATH may be an output folder (generated/: envs/, built/, failed/, runs/), a run
folder (generated/runs/<run_id>/, whose output folder's envs are shown too),
one env folder, or a folder of env folders. Folders are listed again on every
request (cheap), so envs and runs that appear while the viewer runs show up.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from synth.errors import InputError

ENV_PARENTS = ("envs", "built", "failed")  # verified, waiting for verification, failed


@dataclass
class Sources:
    env_parents: list[Path] = field(default_factory=list)  # every subfolder is an env folder
    env_dirs: list[Path] = field(default_factory=list)  # env folders given directly
    run_parents: list[Path] = field(default_factory=list)  # every subfolder is a run folder
    run_dirs: list[Path] = field(default_factory=list)

    def envs(self) -> list[Path]:
        """Env folders, sorted, without repeats; folders that are not envs (broken ones) included."""
        found = list(self.env_dirs)
        for parent in self.env_parents:
            found += _subfolders(parent)
        return _unique(found)

    def runs(self) -> list[Path]:
        found = list(self.run_dirs)
        for parent in self.run_parents:
            found += [d for d in _subfolders(parent) if _is_run(d)]
        return _unique(found)


def _subfolders(parent: Path) -> list[Path]:
    try:
        with os.scandir(parent) as it:
            return [Path(e.path) for e in it if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []


def _unique(paths: list[Path]) -> list[Path]:
    seen: dict[Path, None] = {}
    for p in paths:
        seen.setdefault(p.resolve(), None)
    return sorted(seen)


def _is_run(path: Path) -> bool:
    return (path / "summary.json").is_file() or (path / "run.sqlite").is_file()


def _add_output(sources: Sources, out: Path) -> None:
    for name in ENV_PARENTS:
        if (out / name).is_dir():
            sources.env_parents.append(out / name)
    if (out / "runs").is_dir():
        sources.run_parents.append(out / "runs")


def resolve(paths: list[Path | str]) -> Sources:
    """Classify each PATH; raises InputError for one that does not exist or is a file."""
    sources = Sources()
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            what = "is a file" if p.exists() else "does not exist"
            raise InputError(f"{p} {what}; pass an output folder (generated/), a run folder "
                             "(generated/runs/<run_id>) or env folders")
        if os.path.lexists(p / "env.json"):
            sources.env_dirs.append(p)
        elif _is_run(p):
            sources.run_dirs.append(p)
            if p.parent.name == "runs":
                _add_output(sources, p.parent.parent)
        elif any((p / name).is_dir() for name in (*ENV_PARENTS, "runs")):
            _add_output(sources, p)
        else:
            sources.env_parents.append(p)
    return sources
