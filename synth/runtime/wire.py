"""Length-prefixed pickle messages over pipes between the pool and its workers.

The parent trusts what it sends; it does not trust what a worker sends back (the
worker runs generated code), so replies are unpickled with no globals allowed:
only plain data (str, bytes, numbers, lists, tuples, dicts) can come back, and a
reply announced larger than the caller's limit is refused before a byte of it is
read.
"""

from __future__ import annotations

import io
import os
import pickle
import select
import struct
import time

_HEADER = struct.Struct("!I")
_CHUNK = 1 << 20
MAX_MESSAGE = 1 << 30  # more than a worker can hold in memory: a bigger header is a lie


class WireClosed(EOFError):
    """The other end closed the pipe (the process exited)."""


class WireTimeout(TimeoutError):
    """No complete message arrived before the deadline."""


class TooLarge(ValueError):
    """A message over the sender's limit; nothing was sent."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"message of {size} bytes; the limit is {limit}")
        self.size, self.limit = size, limit


class ReplyTooLarge(ValueError):
    """A worker announced a message over the reader's limit; none of it was read."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"reply of {size} bytes announced; the limit is {limit}")
        self.size, self.limit = size, limit


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):  # noqa: ARG002 - refuse every global
        raise pickle.UnpicklingError(f"reply refers to {module}.{name}; only plain data is accepted")


def frame(obj: object, limit: int | None = None) -> bytes:
    """One message as written on the pipe; over `limit` bytes raises TooLarge."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    if limit is not None and len(data) > limit:
        raise TooLarge(len(data), limit)
    return _HEADER.pack(len(data)) + data


def write(fd: int, framed: bytes) -> None:
    view = memoryview(framed)
    while view:
        view = view[os.write(fd, view) :]


def send(fd: int, obj: object, limit: int | None = None) -> None:
    """Write one message; over `limit` bytes raises TooLarge before anything is written."""
    write(fd, frame(obj, limit))


def _read_exact(fd: int, n: int, poller: select.poll | None, deadline: float | None) -> bytes:
    parts = []
    while n:
        if poller is not None and deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(left * 1000):
                raise WireTimeout()
        chunk = os.read(fd, min(n, _CHUNK))
        if not chunk:
            raise WireClosed()
        parts.append(chunk)
        n -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def recv_bytes(fd: int, poller: select.poll | None = None, deadline: float | None = None,
               limit: int = MAX_MESSAGE) -> bytes:
    """One message's payload, at most `limit` bytes; waits until `deadline` (time.monotonic)
    when a poller is given."""
    (n,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, poller, deadline))
    if n > limit:
        raise ReplyTooLarge(n, limit)
    return _read_exact(fd, n, poller, deadline)


def recv_trusted(fd: int) -> object:
    """Worker side: messages from the parent."""
    return pickle.loads(recv_bytes(fd))


def recv_untrusted(fd: int, poller: select.poll, deadline: float, limit: int = MAX_MESSAGE) -> object:
    """Parent side: a worker's reply, plain data only, at most `limit` bytes."""
    return _PlainUnpickler(io.BytesIO(recv_bytes(fd, poller, deadline, limit))).load()
