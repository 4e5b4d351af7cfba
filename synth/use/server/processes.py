"""`synth serve --workers N`: N server processes on one port (routing.py says how
requests find their episode's process).

This process (the supervisor) starts the N processes, each listening on the port
with SO_REUSEPORT (the kernel spreads new connections evenly over them; one
inherited socket would let whichever process is least busy take nearly all),
waits until each serves, and then only watches:
a process that dies is started again (its episodes are lost; requests for them
answer 404), and SIGINT/SIGTERM stop them all gracefully (every episode closed,
every sandbox worker stopped). A server process also stops when the supervisor
is gone, so none is left behind.

Child: `python -m synth.use.server.processes CONFIG_JSON` with a pipe on which
it reports, in one JSON line, its envs or its error.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from synth.errors import InputError

STARTUP_TIMEOUT = 120.0  # loading envs and starting sandbox workers


def listening_socket(host: str, port: int) -> socket.socket:
    """The port, shared with the other server processes (SO_REUSEPORT)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port") from None
    sock.listen(2048)
    return sock


class Supervisor:
    def __init__(self, root: Path | str, count: int, host: str, port: int, options: dict[str, Any],
                 guards: dict[str, Any], say: Callable[[str], None] = print):
        if count < 2:
            raise InputError("--workers N runs N server processes; pass at least 2 (1 is the default)")
        self.root, self.count, self.options, self.guards, self.say = root, count, options, guards, say
        self.host, self.port = host, port
        self.folder = tempfile.mkdtemp(prefix="synth-serve-")  # their Unix sockets; 0700, ours alone
        self.sockets = [os.path.join(self.folder, f"p{i}.sock") for i in range(count)]
        self.procs: list[subprocess.Popen | None] = [None] * count
        self._stop = threading.Event()

    def _config(self, index: int, ready_fd: int) -> str:
        share = -(-self.options["max_episodes"] // self.count)  # ceil: the cap is shared out
        return json.dumps({"root": str(self.root), "index": index, "count": self.count, "sockets": self.sockets,
                           "host": self.host, "port": self.port, "ready_fd": ready_fd, "guards": self.guards,
                           "options": {**self.options, "max_episodes": share}})

    def launch(self, index: int) -> int:
        """Start process `index`; returns the pipe its report comes on (see wait)."""
        read_end, write_end = os.pipe()
        try:
            self.procs[index] = subprocess.Popen(
                [sys.executable, "-m", "synth.use.server.processes", self._config(index, write_end)],
                pass_fds=(write_end,), start_new_session=True)
        finally:
            os.close(write_end)
        return read_end

    def wait(self, index: int, read_end: int) -> dict[str, Any]:
        """Process `index`'s report once it serves (raises InputError with its reason, after stopping all)."""
        proc = self.procs[index]
        with os.fdopen(read_end, "rb") as ready:
            line = b""
            deadline = time.monotonic() + STARTUP_TIMEOUT
            while not line.endswith(b"\n") and time.monotonic() < deadline:
                if not select.select([ready], [], [], 0.2)[0]:
                    if proc is None or proc.poll() is not None:
                        break
                    continue
                chunk = ready.read1(4096)
                if not chunk:
                    break
                line += chunk
        report = json.loads(line) if line.strip() else {"error": f"server process {index} did not start serving"}
        if "error" in report:
            self.stop()
            raise InputError(report["error"])
        return report

    def run(self, serving: Callable[[dict[str, Any]], None]) -> None:
        """Start every process, report once, then watch until SIGINT/SIGTERM."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: self._stop.set())
        try:
            pipes = [self.launch(i) for i in range(self.count)]  # they load their envs side by side
            reports = [self.wait(i, pipe) for i, pipe in enumerate(pipes)]
            serving(reports[0])
            while not self._stop.wait(0.5):
                for index, proc in enumerate(self.procs):
                    if proc is not None and proc.poll() is not None and not self._stop.is_set():
                        self.say(f"server process {index} exited ({proc.returncode}); starting it again "
                                 "(the episodes it held are lost)")
                        self.wait(index, self.launch(index))
        finally:
            self.stop()

    def stop(self, timeout: float = 30.0) -> None:
        for proc in self.procs:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            if proc is None:
                continue
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _watch_parent(ppid: int, server: Any) -> None:
    while os.getppid() == ppid:
        time.sleep(0.5)
    server.should_exit = True  # the supervisor is gone: stop gracefully


def child_main(config: dict[str, Any]) -> None:
    import uvicorn

    from synth.use.server.guard import ServerGuards
    from synth.use.server.routing import Process
    from synth.use.server.run import KEEP_ALIVE_SECONDS, build

    ppid = os.getppid()
    report = os.fdopen(config["ready_fd"], "w")
    process = Process(config["index"], config["count"], tuple(config["sockets"]))
    try:
        listen = listening_socket(config["host"], config["port"])
        app, loaded = build(config["root"], guards=ServerGuards(**config["guards"]), process=process,
                            **config["options"])
    except Exception as exc:  # noqa: BLE001 - reported by the supervisor as `error: ...`
        report.write(json.dumps({"error": str(exc)}) + "\n")
        report.close()
        sys.exit(2)
    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = process.sockets[process.index]
    if os.path.exists(path):
        os.unlink(path)  # left by this index's previous process
    own.bind(path)
    own.listen(2048)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5,
                                           timeout_keep_alive=KEEP_ALIVE_SECONDS))

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.02)
        report.write(json.dumps({"envs": list(loaded.envs), "skipped": loaded.skipped}) + "\n")
        report.close()

    threading.Thread(target=announce, daemon=True).start()
    threading.Thread(target=_watch_parent, args=(ppid, server), daemon=True).start()
    server.run(sockets=[listen, own])


if __name__ == "__main__":
    child_main(json.loads(sys.argv[1]))
