"""Many tool calls on one sandbox worker, written ahead of their replies.

Mixed into SandboxPool (sandbox.py): `call_many` answers each call as `call`
would, with the same bounds (arguments under --max-argument-bytes, each reply
refused unread over --max-result-bytes plus framing, a malformed reply kills
its worker), but the calls of one worker are pipelined: written ahead of their
replies, so the worker runs them back to back while this side reads the replies.
"""

from __future__ import annotations

import collections
import time

from synth.runtime import wire
from synth.runtime.workerproc import Died, EpisodeLost, Slot
from synth.runtime.workers import BROKEN, FRAMING, died_reply

PIPELINE_BYTES = 32 << 10  # call requests written ahead of their replies; a pipe holds 64 KiB


def _lost(slot: Slot, generation: int) -> EpisodeLost:
    return EpisodeLost(f"episode lost: worker crashed ({slot.deaths.get(generation, 'it was stopped')})")


class PipelinedCalls:
    """Needs the pool's _slots, _broken, _checked, _die, call_timeout, grace and byte limits."""

    def lane(self, handle) -> int:
        """Calls in the same lane share one worker and run one after another."""
        return handle.slot

    def call_many(self, calls: list[tuple]) -> list[tuple | EpisodeLost]:
        """Many (handle, tool, kwargs) calls of any episodes, each answered as call() would, or an
        EpisodeLost. Up to PIPELINE_BYTES of requests go unread (less than a pipe holds, so
        neither side blocks on a write). Calls on the same episode keep their order."""
        replies: list = [None] * len(calls)
        by_slot: dict[int, list[int]] = {}
        for i, (handle, _, _) in enumerate(calls):
            by_slot.setdefault(handle.slot, []).append(i)
        for index, positions in by_slot.items():
            slot = self._slots[index]
            with slot.lock:
                self._pipeline(slot, [(i, *calls[i]) for i in positions], replies)
        return replies

    def _pipeline(self, slot: Slot, items: list[tuple], replies: list) -> None:
        """Caller holds slot.lock; fills replies[position] for every (position, handle, tool, kwargs)."""
        waiting: collections.deque = collections.deque()  # (position, tool, bytes, when sent)
        try:
            self._pipe(slot, collections.deque(items), waiting, replies, self.call_timeout + self.grace)
        except BaseException:
            if waiting and slot.proc is not None:  # replies left unread: that pipe is out of step for good
                self._die(slot, "a batch of calls on it was interrupted")
            raise

    def _pipe(self, slot: Slot, todo: collections.deque, waiting: collections.deque, replies: list,
              timeout: float) -> None:
        unread, answered = 0, time.monotonic()
        reply_limit = self.max_result_bytes + FRAMING
        while todo or waiting:
            while todo:
                position, handle, tool, kwargs = todo[0]
                if slot.generation != handle.generation or slot.proc is None:
                    todo.popleft()
                    replies[position] = _lost(slot, handle.generation)
                    continue
                try:
                    framed = wire.frame(("call", handle.ep, tool, kwargs), self.max_argument_bytes)
                except wire.TooLarge as exc:
                    todo.popleft()
                    replies[position] = ("refused", f"the arguments are {exc.size:,} bytes; the limit is "
                                                    f"{exc.limit:,} bytes")
                    continue
                if waiting and unread + len(framed) > PIPELINE_BYTES:
                    break
                todo.popleft()
                try:
                    wire.write(slot.wfd, framed)
                except OSError as exc:
                    replies[position] = died_reply(f"tool {tool!r}", self._broken(slot, exc, timeout))
                    break
                waiting.append((position, tool, len(framed), time.monotonic()))
                unread += len(framed)
            if waiting and slot.proc is not None:
                position, tool, size, sent = waiting.popleft()
                try:
                    # The worker starts a call when it has answered the one before.
                    reply = wire.recv_untrusted(slot.rfd, slot.poller, max(answered, sent) + timeout, reply_limit)
                    replies[position] = self._checked(slot, reply)
                except BROKEN as exc:
                    replies[position] = died_reply(f"tool {tool!r}", self._broken(slot, exc, timeout))
                except Died as died:
                    replies[position] = died_reply(f"tool {tool!r}", died)
                answered = time.monotonic()
                unread -= size
            if slot.proc is None:  # it died: the calls written after the one that killed it are lost with it
                for later, *_ in waiting:
                    replies[later] = _lost(slot, slot.generation - 1)
                waiting.clear()
                unread = 0
