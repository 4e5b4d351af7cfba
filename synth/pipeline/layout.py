"""Where env folders live in an output folder, by status.

  <out>/envs/<env_id>/    verified envs only: a trainer can take the folder as it is
  <out>/built/<env_id>/   built and not yet verified (work in progress; a killed run resumes it)
  <out>/failed/<env_id>/  envs whose build or verification failed, with their reasons

An env moves between them when its status changes (`place_env`): `synth run` and
`synth verify` move a verified env into envs/ and a failed one into failed/, and
`synth check` moves an env whose status it changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ENVS_DIR = "envs"
BUILT_DIR = "built"
FAILED_DIR = "failed"
ENV_FOLDERS = (ENVS_DIR, BUILT_DIR, FAILED_DIR)
FOLDER_OF_STATUS = {"verified": ENVS_DIR, "built": BUILT_DIR, "failed": FAILED_DIR}


def env_path(out_dir: Path | str, env_id: str) -> Path:
    """A verified env's folder."""
    return Path(out_dir) / ENVS_DIR / env_id


def built_path(out_dir: Path | str, env_id: str) -> Path:
    """A built env's folder while it waits for verification."""
    return Path(out_dir) / BUILT_DIR / env_id


def failed_path(out_dir: Path | str, env_id: str) -> Path:
    return Path(out_dir) / FAILED_DIR / env_id


def place_env(folder: Path | str, status: str) -> Path:
    """Move an env folder of an output folder to where its status belongs; returns where it is now.

    Only a folder directly under envs/, built/ or failed/ moves (one given by any other path is
    the user's own layout and stays); an env already there with the same id is replaced."""
    folder = Path(folder)
    wanted = FOLDER_OF_STATUS.get(status)
    if wanted is None or folder.parent.name not in ENV_FOLDERS or folder.parent.name == wanted:
        return folder
    dest = folder.parent.parent / wanted / folder.name
    if dest.exists():
        shutil.rmtree(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    folder.rename(dest)
    if folder.parent.name == BUILT_DIR:
        try:
            folder.parent.rmdir()  # no work in progress left: no empty built/ to wonder about
        except OSError:
            pass  # other envs still wait there
    return dest
