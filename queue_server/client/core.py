"""What QueueClient and AsyncQueueClient share without I/O: settings, failure rules, failover choice.

The reconnect rule itself is written out in queue_server/client/sync.py; each client
keeps only the sends, reads, connects and sleeps, and asks this module what they mean.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Generic, NoReturn, Protocol, TypeVar

from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import (
    BadReply,
    OfflineError,
    QueueServerError,
    ServerUnreachable,
    closes_connection,
    connection_failure,
)
from queue_server.protocol.requests import Address

RECV_BYTES: Final = 256 * 1024
# put_many writes at most two chunks ahead of the replies it has read, so
# neither side's socket buffers can fill up and stall both ends.
PUT_MANY_CHUNK: Final = 1000
# A read's timeout_s: the client's own timeout_s (None waits without limit).
CLIENT_TIMEOUT: Final = -1.0
# Between two tries of a request refused with `500 Offline Mode` (offline_wait_s).
OFFLINE_RETRY_S: Final = 0.2


def backoff_s(attempt: int) -> float:
    """Pause before pass `attempt` (1, 2, ...) over the server list."""
    return min(0.05 * 2 ** (attempt - 1), 1.0)


def unreachable_reason(exc: OSError) -> str:
    """Why a connect failed, for ServerUnreachable's message."""
    return exc.strerror or str(exc) or type(exc).__name__


def lost_while_connecting(exc: OSError | EOFError) -> str:
    """Why a server that accepted the connection is skipped (AUTH or INTERCONNECT broke off)."""
    return f"lost while connecting: {exc}"


class PutMany:
    """The pipelined PUTs of one put_many call and the tally of their replies."""

    __slots__ = ("_counts", "_first_error", "_requests", "acknowledged", "total")

    def __init__(self, queue: str, datas: Iterable[bytes | str], *, priority: int) -> None:
        items = list(datas)
        chunks = [items[i : i + PUT_MANY_CHUNK] for i in range(0, len(items), PUT_MANY_CHUNK)]
        self._requests = [req.put_many_request(queue, chunk, priority_=priority) for chunk in chunks]
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


class Connection(Protocol):
    """What the shared logic needs of either client's connection."""

    address: Address
    server_id: int | None

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


class ClientCore(Generic[C]):
    """Settings, the connection in use and the failure rules of a queue client; no I/O but close()."""

    def __init__(
        self,
        servers: str | Sequence[str] = req.DEFAULT_SERVER,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        reconnect_attempts: int = 2,
        offline_wait_s: float = 0.0,
    ) -> None:
        self.addresses = req.parse_servers(servers)
        self.offline_wait_s = offline_wait_s
        self._auth = None if token is None else req.auth_request(token)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_attempts = reconnect_attempts
        self._conn: C | None = None

    @property
    def address(self) -> Address | None:
        """The server in use, None while not connected."""
        return None if self._conn is None else self._conn.address

    @property
    def server_id(self) -> int | None:
        """The id (INTERCONNECT) of the server in use; None with a single server or not connected."""
        return None if self._conn is None else self._conn.server_id

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _raise_failed(self, conn: C, what: str, exc: BaseException) -> NoReturn:
        """Raise what a failed request means; the connection is dropped unless still in step."""
        if isinstance(exc, QueueServerError) and not isinstance(exc, BadReply):
            if closes_connection(exc):
                self._drop()
            raise exc
        self._drop()
        if isinstance(exc, OSError | EOFError):
            server = req.format_address(conn.address)
            raise connection_failure(exc, what=what, server=server) from exc
        raise exc

    def _retry_or_raise(self, conn: C, what: str, exc: BaseException, *, retries_left: int) -> None:
        """Return (connection dropped) when a read-only request may go again; else _raise_failed.

        It may when the connection was lost (not timed out) and retries are left.
        """
        if retries_left > 0 and isinstance(exc, OSError | EOFError) and not isinstance(exc, TimeoutError):
            self._drop()
            return
        self._raise_failed(conn, what, exc)

    def _offline_pause(self, exc: BaseException, offline_since: float | None,
                       now: float) -> tuple[float | None, float | None]:
        """(seconds to wait before trying again, when the refusals began) for a request
        refused with `500 Offline Mode`, within offline_wait_s; (None, ...) to raise.

        The refused request was not carried out, so trying it again is safe. The
        connection is dropped: the next try asks the server list again for the lowest
        id, so a replica that takes over after a failover, or a primary back from
        maintenance, is found.
        """
        if not isinstance(exc, OfflineError) or self.offline_wait_s <= 0:
            return None, offline_since
        since = now if offline_since is None else offline_since
        left = since + self.offline_wait_s - now
        if left <= 0:
            return None, since
        self._drop()
        return min(OFFLINE_RETRY_S, left), since

    @staticmethod
    def _keep_primary(reachable: list[C]) -> C | None:
        """The connection to the lowest server id (see rank_servers); the others are closed."""
        if not reachable:
            return None
        order = req.rank_servers([conn.server_id for conn in reachable])
        for index in order[1:]:
            reachable[index].close()
        return reachable[order[0]]

    @staticmethod
    def _close_all(conns: Iterable[C]) -> None:
        for conn in conns:
            conn.close()

    @staticmethod
    def _raise_unreachable(errors: dict[Address, str]) -> NoReturn:
        reasons = "; ".join(f"{req.format_address(a)}: {why}" for a, why in errors.items())
        raise ServerUnreachable(f"cannot reach a queue server ({reasons})")
