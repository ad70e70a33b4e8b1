"""A put_many call's pipelined PUTs (queue_server/client/operations.py) and the tally of their
replies, without I/O."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import QueueServerError

# put_many writes at most two chunks ahead of the replies it has read, so
# neither side's socket buffers can fill up and stall both ends.
PUT_MANY_CHUNK: Final = 1000


class PutMany:
    """The pipelined PUTs of one put_many call and the tally of their replies."""

    __slots__ = ("_counts", "_first_error", "_requests", "acknowledged", "total")

    def __init__(self, queue: str, datas: Iterable[bytes | str], *, priority: int,
                 trace: bytes | None = None) -> None:
        items = list(datas)
        chunks = [items[i : i + PUT_MANY_CHUNK] for i in range(0, len(items), PUT_MANY_CHUNK)]
        self._requests = [req.put_many_request(queue, chunk, priority_=priority, trace=trace)
                          for chunk in chunks]
        self._counts = [len(chunk) for chunk in chunks]
        self._first_error: QueueServerError | None = None
        self.total = len(items)
        self.acknowledged = 0

    def steps(self) -> Iterator[tuple[bytes, int]]:
        """(bytes to send, then how many replies to read), in order.

        Each chunk is sent before the replies of the one before it are read.
        """
        ahead = [*self._requests[1:], b""]
        yield self._requests[0], 0
        yield from zip(ahead, self._counts, strict=True)

    def add(self, error: QueueServerError | None) -> None:
        """One reply (parse_put_outcome): stored, or refused with `error`."""
        if error is None:
            self.acknowledged += 1
        elif self._first_error is None:
            self._first_error = error

    def what(self) -> str:
        """The request named in a connection failure, with how far it got."""
        return f"put_many ({self.acknowledged} of {self.total} acknowledged)"

    def result(self) -> int:
        """How many PUTs were stored; the first refusal is raised once every reply is read."""
        if self._first_error is not None:
            raise self._first_error
        return self.acknowledged
