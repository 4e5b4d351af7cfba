"""Trusted in-process mode: the same Host the sandbox worker runs, called directly.

It runs generated code in this process with no protection: no OS boundary, no
resource limit, no timeout, no immutable classes, and tools and verifiers share
one interpreter. The static check and the restricted builtins still run, but they
are filters that catch mistakes, not a security boundary. Use it only for envs
you wrote or reviewed; chosen explicitly with Env.load(..., trusted=True).
"""

from __future__ import annotations

import itertools
import uuid

from synth.runtime.host import Host
from synth.runtime.sandbox import EnvLoadError, EpisodeLost, check_env_code


class LocalHost:
    """Same interface as SandboxPool (register_env, open_episode, call, ...), in-process."""

    def __init__(self) -> None:
        from synth.config import load_settings

        self._host = Host(timeout=None, restricted=True, max_result_bytes=load_settings().max_result_bytes)
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:6]  # module names stay unique across LocalHosts

    def register_env(self, key: str, label: str, tools_src: str, verifiers_src: str, initial: bytes,
                     tool_names: list[str]) -> dict:
        check_env_code(tools_src, verifiers_src)
        reply = self._host.op_load(f"{self._prefix}_{key}", label, tools_src, verifiers_src, initial, tool_names)
        if reply[0] != "ok":
            raise EnvLoadError(f"{reply[2]}; fix the env's code")
        return reply[1]

    def unregister_env(self, key: str) -> None:
        self._host.op_unload(f"{self._prefix}_{key}")

    def open_episode(self, key: str) -> int:
        ep = next(self._ids)
        reply = self._host.op_open(ep, f"{self._prefix}_{key}")
        if reply[0] != "ok":
            raise EnvLoadError(f"the env's code failed to start an episode: {reply[2]}")
        return ep

    def _check(self, ep: int) -> None:
        if ep not in self._host.episodes:
            raise EpisodeLost("episode lost: it was closed")

    def call(self, ep: int, tool: str, kwargs: dict) -> tuple:
        self._check(ep)
        return self._host.op_call(ep, tool, kwargs)

    def lane(self, ep: int) -> int:
        return 0  # one process, one interpreter: calls run one after another anyway

    def call_many(self, calls: list[tuple[int, str, dict]]) -> list[tuple | EpisodeLost]:
        replies: list[tuple | EpisodeLost] = []
        for ep, tool, kwargs in calls:
            try:
                replies.append(self.call(ep, tool, kwargs))
            except EpisodeLost as exc:
                replies.append(exc)
        return replies

    def unverifiable(self) -> str | None:
        return None  # trusted mode is the operator's explicit choice

    def verify(self, key: str, verifier: str, final: bytes, answer: str | None) -> tuple:
        return self._host.op_verify(f"{self._prefix}_{key}", verifier, final, answer)

    def evaluate(self, ep: int, verifier: str, answer: str | None) -> tuple:
        """The verifier on the episode's database as it is now."""
        self._check(ep)
        return self._host.op_verify(self._host.episodes[ep].key, verifier, self.snapshot(ep), answer)

    def snapshot(self, ep: int) -> bytes:
        self._check(ep)
        reply = self._host.op_snapshot(ep)
        if reply[0] != "ok":
            raise EpisodeLost(reply[2])
        return reply[1]

    def close_episode(self, ep: int) -> None:
        self._host.op_close(ep)

    def close(self) -> None:
        for key in list(self._host.envs):
            self._host.op_unload(key)
