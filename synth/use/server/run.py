"""Running the server: in the foreground for `synth serve`, or on a background
thread (tests, tooling that needs a server next to it) bound to a port the OS
picks, started and stopped deterministically."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from synth.errors import InputError, SynthError
from synth.use.server.app import LoadedEnvs, create_app, load_envs
from synth.use.server.guard import ServerGuards


def build(root: Path | str, *, trusted: bool = False, workers: int | None = None, max_episodes: int = 256,
          idle_timeout: float = 300.0, include_failed: bool = False, include_rejected: bool = False,
          reap_interval: float | None = None, guards: ServerGuards | None = None, max_argument_bytes: int | None = None,
          max_result_bytes: int | None = None, env_memory_mb: int = 1024,
          reward: str = "rubric", process: Any = None) -> tuple[Any, LoadedEnvs]:
    """Load the envs under `root` and make the app; raises InputError when none loads.

    Each env's code runs in sandbox worker processes of its own: `workers` caps those running tools
    (`synth serve --sandbox-workers`; default: one per env, at most 32; as many more run verifiers);
    `env_memory_mb` is each worker's address space. `process`: this server's place among several
    (routing.Process)."""
    if max_episodes < 1 or idle_timeout <= 0 or (workers is not None and workers < 1) or env_memory_mb < 64:
        raise InputError("--max-episodes and --sandbox-workers must be at least 1, --idle-timeout positive and "
                         "--env-memory-mb at least 64")
    pool = None
    if not trusted:
        from synth.folder.dirs import find_env_dirs
        from synth.runtime import SandboxPool

        count = workers or max(2, min(32, len(find_env_dirs(root))))
        pool = SandboxPool(workers=count, memory_mb=env_memory_mb, max_argument_bytes=max_argument_bytes,
                           max_result_bytes=max_result_bytes, verifier_workers=count)
    loaded = load_envs(root, trusted=trusted, pool=pool, include_failed=include_failed,
                       include_rejected=include_rejected)
    if not loaded.envs:
        if pool is not None:
            pool.close()
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in loaded.skipped[:3])
        raise InputError(f"no env under {root} could be served ({reasons})")

    def shutdown() -> None:
        for env in loaded.envs.values():
            env.close()
        if pool is not None:
            pool.close()

    app = create_app(loaded, max_episodes=max_episodes, idle_timeout=idle_timeout, reap_interval=reap_interval,
                     on_shutdown=shutdown, guards=guards, reward=reward, process=process)
    return app, loaded


# How long an idle keep-alive connection stays open. uvicorn's default (5 s) is shorter than a trainer's
# pause between two steps of an episode (the policy generating), and a client that sends on a
# connection the server is closing gets a reset (the K = 256 load test saw it on a loaded machine).
KEEP_ALIVE_SECONDS = 120


def serve_forever(app: Any, host: str, port: int, log_level: str = "warning") -> None:
    try:
        uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_keep_alive=KEEP_ALIVE_SECONDS)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port") from exc


class BackgroundServer:
    """uvicorn on 127.0.0.1 (port 0 = any free port) in a daemon thread.

    with BackgroundServer(app) as server:
        httpx.get(server.url + "/health")
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, startup_timeout: float = 30.0):
        self.app, self.host = app, host
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.startup_timeout = startup_timeout
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5,
                                timeout_keep_alive=KEEP_ALIVE_SECONDS)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=f"synth-server-{self.port}", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._sock])
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc

    def start(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise SynthError(f"the server on {self.url} failed to start: {self._error or 'see the log'}")
            if time.monotonic() > deadline:
                self.stop()
                raise SynthError(f"the server on {self.url} did not start within {self.startup_timeout:g}s")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> "BackgroundServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def background(root: Path | str, **options: Any) -> tuple[BackgroundServer, LoadedEnvs]:
    """build() + BackgroundServer (not yet started)."""
    app, loaded = build(root, **options)
    return BackgroundServer(app), loaded

