"""The live episodes of `synth serve`: created per request, looked up by id,
closed on DELETE, on idle expiry, or at shutdown. A cap bounds how many are
live at once so a trainer that forgets to close episodes cannot exhaust the
sandbox workers' memory; over the cap the server answers 503.

The registry is shared by the REST routes and the MCP endpoint; lookups happen
on the event loop, the (blocking) episode work in threads, so its state sits
behind a threading lock.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

from synth.errors import InputError

_EXPIRED_MEMORY = 4096  # ids of expired episodes remembered for a clearer 404


class RegistryError(Exception):
    """An error the HTTP layer turns into a status code with `message` as the detail."""

    status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(RegistryError):
    status = 404


class Full(RegistryError):
    status = 503


@dataclass
class LiveEpisode:
    id: str
    env_id: str
    task_id: str | None
    episode: Any  # synth.runtime.Episode
    created: float
    last_used: float
    in_flight: int = 0  # requests working on it now; it never expires mid-call
    calls: int = 0

    @property
    def tools(self) -> list[dict[str, Any]]:
        return self.episode.tools

    @property
    def instruction(self) -> str | None:
        task = self.episode.task
        return task.instruction if task is not None else None


class EpisodeRegistry:
    def __init__(self, envs: dict[str, Any], *, max_episodes: int = 256, idle_timeout: float = 300.0,
                 clock: Callable[[], float] = time.monotonic, id_prefix: str = ""):
        if max_episodes < 1:
            raise InputError("--max-episodes must be at least 1")
        if idle_timeout <= 0:
            raise InputError("--idle-timeout must be a positive number of seconds")
        self.envs = envs
        self.max_episodes = max_episodes
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._live: dict[str, LiveEpisode] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()  # id -> why it is gone
        self._lock = threading.RLock()  # get() is called with it held
        self.created_total = 0
        self.id_prefix = id_prefix  # names the server process that owns the episode (routing.py)

    def __len__(self) -> int:
        return len(self._live)

    def env(self, env_id: str) -> Any:
        env = self.envs.get(env_id)
        if env is None:
            known = ", ".join(sorted(self.envs)) or "none"
            raise NotFound(f"unknown env {env_id!r}; served envs: {known} (GET /envs lists them)")
        return env

    def create(self, env_id: str, task_id: str | None = None) -> LiveEpisode:
        """Open an episode (blocking: it reserves a database copy in a sandbox worker)."""
        env = self.env(env_id)
        if task_id is not None and task_id not in env.tasks:
            raise NotFound(f"env {env_id!r} has no task {task_id!r}; tasks: {', '.join(env.tasks) or 'none'}")
        with self._lock:
            if len(self._live) >= self.max_episodes:
                raise Full(f"too many live episodes ({len(self._live)}, the cap is {self.max_episodes}); "
                           "DELETE /episodes/{id} when an episode is done, or restart the server with a "
                           "higher --max-episodes")
            placeholder = f"pending-{self.created_total}"
            self.created_total += 1
            self._live[placeholder] = None  # type: ignore[assignment]  # holds the slot while opening
        try:
            # record=False: nobody reads a served trajectory back
            episode = env.episode(task_id, record=False, episode_id=self.id_prefix + uuid.uuid4().hex[:16])
        except InputError as exc:
            raise NotFound(str(exc)) from exc
        finally:
            with self._lock:
                self._live.pop(placeholder, None)
        now = self._clock()
        live = LiveEpisode(id=episode.id, env_id=env_id, task_id=task_id, episode=episode, created=now, last_used=now)
        with self._lock:
            self._live[live.id] = live
        return live

    def get(self, episode_id: str) -> LiveEpisode:
        """The live episode (its idle clock restarts), or NotFound saying why it is gone."""
        with self._lock:
            live = self._live.get(episode_id)
            if live is None:
                why = self._expired.get(episode_id)
                if why:
                    raise NotFound(f"episode {episode_id!r} is gone: {why}; create a new one")
                raise NotFound(f"unknown episode {episode_id!r}; create one with POST /envs/{{env_id}}/episodes")
            live.last_used = self._clock()
            return live

    def begin(self, episode_id: str) -> LiveEpisode:
        """get() for a request that will work on the episode; pair with end()."""
        with self._lock:
            live = self.get(episode_id)
            live.in_flight += 1
            return live

    def end(self, live: LiveEpisode) -> None:
        with self._lock:
            live.in_flight -= 1
            live.last_used = self._clock()

    def close(self, episode_id: str, reason: str = "it was closed") -> LiveEpisode:
        """Remove and close an episode (blocking)."""
        with self._lock:
            live = self._live.get(episode_id)
            if live is None:
                self.get(episode_id)  # raises the right NotFound
            self._forget(episode_id, reason)
        live.episode.close()
        return live

    def _forget(self, episode_id: str, reason: str) -> None:
        self._live.pop(episode_id, None)
        self._expired[episode_id] = reason
        while len(self._expired) > _EXPIRED_MEMORY:
            self._expired.popitem(last=False)

    def idle(self) -> list[LiveEpisode]:
        """Episodes idle for longer than the timeout, removed from the registry (close them)."""
        now = self._clock()
        with self._lock:
            stale = [e for e in self._live.values()
                     if e is not None and e.in_flight == 0 and now - e.last_used > self.idle_timeout]
            for e in stale:
                self._forget(e.id, f"it expired after {self.idle_timeout:g}s without requests")
        return stale

    def close_all(self) -> None:
        with self._lock:
            live = [e for e in self._live.values() if e is not None]
            for e in live:
                self._forget(e.id, "the server shut down")
        for e in live:
            e.episode.close()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"live": sum(1 for e in self._live.values() if e is not None), "cap": self.max_episodes,
                    "created": self.created_total, "idle_timeout": self.idle_timeout}
