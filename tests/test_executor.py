"""The parts of `--executor ray` that need no Ray: env folders as bytes, the shared budget ledger,
and the one-line error when Ray is not installed. The Ray runs are in test_executor_ray.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile

import pytest

from synth.folder.pack import PackError, pack_env, pack_files, unpack_env, unpack_files
from synth.llm import BudgetExceeded
from synth.llm.usage import UsageMeter


def tree(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def make_env(out, folder: str, env_id: str, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = out / folder / env_id / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_unpacking_makes_the_receiving_folder_hold_exactly_what_the_worker_had(tmp_path):
    worker, driver = tmp_path / "worker", tmp_path / "driver"
    make_env(worker, "envs", "clinic", {"env.json": b'{"status": "verified"}', "db/initial.sqlite": bytes(range(256))})
    # The driver still has the earlier attempt: a failed build (which the worker's success supersedes)
    # and a stale file in envs/ the worker's folder does not have. Another env is left alone.
    make_env(driver, "failed", "clinic", {"env.json": b'{"status": "failed"}'})
    make_env(driver, "envs", "clinic", {"stale.txt": b"old"})
    make_env(driver, "envs", "library", {"env.json": b"{}"})
    unpack_env(pack_env(worker, "clinic"), driver, "clinic")
    assert tree(driver / "envs" / "clinic") == tree(worker / "envs" / "clinic")
    assert not (driver / "failed" / "clinic").exists()
    assert tree(driver / "envs" / "library") == {"env.json": b"{}"}
    assert not (driver / ".incoming").exists()  # the staging folder is cleaned up


def test_a_tar_with_anything_but_that_envs_folders_is_refused_and_nothing_changes(tmp_path):
    make_env(tmp_path, "envs", "clinic", {"env.json": b"kept"})
    for name in ("envs/other/env.json", "envs/clinic/../../escape.txt", "runs/x/run.sqlite"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
        with pytest.raises(PackError, match="unexpected entry"):
            unpack_env(buffer.getvalue(), tmp_path, "clinic")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("envs/clinic/env.json")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(PackError):
        unpack_env(buffer.getvalue(), tmp_path, "clinic")
    assert tree(tmp_path) == {"envs/clinic/env.json": b"kept"}


def test_input_files_travel_by_name_as_files_or_folders(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text("{}")
    recordings = tmp_path / "demo"
    (recordings / "sub").mkdir(parents=True)
    (recordings / "sub" / "a.json").write_text("[]")
    got = unpack_files(pack_files({"prices_file": prices, "replay_file": recordings, "other": None}),
                       tmp_path / "worker", ["prices_file", "replay_file", "other"])
    assert got["prices_file"].read_text() == "{}" and got["prices_file"].name == "prices.json"
    assert (got["replay_file"] / "sub" / "a.json").read_text() == "[]"
    assert "other" not in got


def test_a_worker_reads_the_input_files_the_driver_sent_not_the_driver_s_paths(tmp_path):
    from synth.config import Settings
    from synth.pipeline.executor_worker import SHIPPED, local_settings

    prices = tmp_path / "driver" / "prices.json"
    prices.parent.mkdir()
    prices.write_text('{"openai/m": {"input": 1, "output": 2}}')
    settings = Settings(model="openai/m", prices_file=prices, out=tmp_path / "driver" / "out")
    shipped = pack_files({name: getattr(settings, name) for name in SHIPPED})
    prices.unlink()  # the worker's machine does not have it
    mine = local_settings(settings, tmp_path / "worker", shipped)
    assert mine.prices_file.read_text() == '{"openai/m": {"input": 1, "output": 2}}'
    assert mine.prices_file.is_relative_to(tmp_path / "worker") and mine.replay_file is None
    assert mine.out == tmp_path / "worker" / "out" and mine.cache_dir == tmp_path / "worker" / "cache"
    assert mine.model_copy(update={"out": settings.out, "cache_dir": settings.cache_dir,
                                   "prices_file": settings.prices_file}) == settings


def test_a_task_removes_the_folders_of_tasks_whose_worker_died(tmp_path, monkeypatch):
    import tempfile

    from synth.pipeline.executor_worker import TMP_PREFIX, remove_orphans

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, alive = tmp_path / f"{TMP_PREFIX}{gone.stdout.strip()}-x1", tmp_path / f"{TMP_PREFIX}{os.getpid()}-x2"
    for folder in (dead, alive, tmp_path / "other-123-x"):
        (folder / "out").mkdir(parents=True)
    remove_orphans()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([alive.name, "other-123-x"])


class Ledger:
    """What another process spent is in here too; a Ray actor plays this part in a run."""

    def __init__(self, spent: float):
        self.spent = spent

    def add(self, cost: float) -> None:
        self.spent += cost

    def total(self) -> float:
        return self.spent


def test_a_shared_ledger_decides_the_budget_and_gets_every_cost_recorded_here():
    ledger = Ledger(spent=0.5)
    meter = UsageMeter(max_cost=1.0, ledger=ledger)
    meter.record("tasks", cached=False, prompt_tokens=10, completion_tokens=5, cost=0.25)
    assert ledger.spent == 0.75 and not meter.budget_reached
    meter.record("tasks", cached=False, prompt_tokens=10, completion_tokens=5, cost=0.25, spend=False)
    assert ledger.spent == 0.75 and meter.total.cost == 0.5  # a cost another process already added: counted only
    ledger.add(0.3)  # another worker's call
    assert meter.budget_reached
    with pytest.raises(BudgetExceeded, match=r"budget of \$1\.00 reached"):
        meter.check_budget()


def test_executor_ray_without_ray_installed_says_what_to_install(tmp_path):
    # `None` in sys.modules makes `import ray` fail as it does where Ray is not installed.
    code = ("import sys; sys.modules['ray'] = None; from synth.cli import main; "
            "sys.argv = ['synth', 'run', '--executor', 'ray', '--plain']; main()")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        'error: --executor ray needs Ray, which is not installed here: pip install "synth[ray]"']
    assert not (tmp_path / "generated").exists()  # nothing started
