"""Blocking queue server client: one socket to the primary, failover down the server list.

Reconnect rule (the same in AsyncQueueClient):
- Before each request the client checks that the server has not closed the
  connection meanwhile (it was killed, restarted, shut down). A closed or
  never-opened connection is replaced first: nothing of the request was sent,
  so any request goes on transparently to the primary found then.
- Connecting tries every server of the list; reachable ones are sent
  `AUTH <token>` (when a token is set) and asked INTERCONNECT for their id; the
  lowest id wins (list order breaks ties, a server without an id ranks last).
  With a single server no INTERCONNECT is sent. Unreachable servers are
  skipped; with none reachable it retries the list
  `reconnect_attempts` more times, then raises ServerUnreachable.
- Read-only requests (PING, TOTAL, STATS, RUNLIST) that lose the connection
  mid-way are repeated on a fresh connection.
- Requests that change state (PUT, GET*, DONE, LATER, call) that lose the
  connection after sending raise ConnectionLost: the server may have acted on
  them. The next call reconnects.
- A reply that does not come within `timeout_s` (or `call`'s own timeout)
  closes the connection and raises ReplyTimeout: a late reply would otherwise
  be read as the answer to the next request. Blocking GETs wait without limit.
- An error reply (QueueServerError) keeps the connection, except 413 and
  `400 Line Too Long`, after which the server closes it.

Not thread-safe: use one client per thread.
"""
from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Final, NoReturn, Self, TypeVar

from queue_server import client_requests as req
from queue_server.client_errors import (
    BadReply,
    QueueServerError,
    ServerUnreachable,
    closes_connection,
    connection_failure,
)
from queue_server.client_requests import Address, Block, Then
from queue_server.replies import (
    NEED_MORE,
    DoneResult,
    Job,
    Parser,
    QueueStats,
    ReplyBuffer,
    RunningJob,
    Total,
    done_parser,
    later_parser,
    parse_get,
    parse_interconnect,
    parse_job,
    parse_ok,
    parse_put,
    parse_stats,
    parse_total,
    parse_wait_ack,
    runlist_parser,
)

T = TypeVar("T")

RECV_BYTES: Final = 256 * 1024
# put_many writes at most two chunks ahead of the replies it has read, so
# neither side's socket buffers can fill up and stall both ends.
PUT_MANY_CHUNK: Final = 1000
_FOREVER: Final = None
_DEFAULT: Final = -1.0


def backoff_s(attempt: int) -> float:
    """Pause before pass `attempt` (1, 2, ...) over the server list."""
    return min(0.05 * 2 ** (attempt - 1), 1.0)


class _Connection:
    """One socket, its unparsed bytes and its read loop."""

    __slots__ = ("_poll", "_timeout_s", "_view", "address", "replies", "server_id", "sock")

    def __init__(self, sock: socket.socket, address: Address, view: memoryview, timeout_s: float):
        self.sock = sock
        self.address = address
        self.server_id: int | None = None
        self.replies = ReplyBuffer()
        self._view = view
        self._timeout_s = timeout_s
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)

    def unusable(self) -> bool:
        """True when the server closed the connection or sent bytes nobody asked for."""
        if self.replies.pending:
            return True
        return bool(self._poll.poll(0))

    def request(self, data: bytes, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
        self.sock.sendall(data)
        return self.read(parse, timeout_s)

    def read(self, parse: Parser[T], timeout_s: float | None = _DEFAULT) -> T:
        """The next reply; `timeout_s` None waits forever, default is the client's timeout."""
        replies = self.replies
        if replies.pending:
            value = replies.take(parse)
            if value is not NEED_MORE:
                return value
        if timeout_s == _DEFAULT:
            return self._read_more(parse)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while True:
                if deadline is not None:
                    remaining_s = deadline - time.monotonic()
                    if remaining_s <= 0:
                        raise TimeoutError("reply deadline passed")
                    self.sock.settimeout(remaining_s)
                else:
                    self.sock.settimeout(None)
                self._recv()
                value = replies.take(parse)
                if value is not NEED_MORE:
                    return value
        finally:
            self.sock.settimeout(self._timeout_s)

    def _read_more(self, parse: Parser[T]) -> T:
        while True:
            self._recv()
            value = self.replies.take(parse)
            if value is not NEED_MORE:
                return value

    def _recv(self) -> None:
        count = self.sock.recv_into(self._view)
        if not count:
            raise EOFError("the server closed the connection")
        self.replies.feed(self._view[:count])

    def close(self) -> None:
        self.sock.close()


class QueueClient:
    """A blocking client of the queue server (PROTOCOL.md); see the module doc for reconnects."""

    def __init__(
        self,
        servers: str | Sequence[str] = req.DEFAULT_SERVER,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        reconnect_attempts: int = 2,
    ) -> None:
        self.addresses = req.parse_servers(servers)
        self._auth = None if token is None else req.auth_request(token)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.reconnect_attempts = reconnect_attempts
        self._conn: _Connection | None = None
        self._view = memoryview(bytearray(RECV_BYTES))


    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def address(self) -> Address | None:
        """The server in use, None while not connected."""
        return None if self._conn is None else self._conn.address

    @property
    def server_id(self) -> int | None:
        """The id (INTERCONNECT) of the server in use; None with a single server or not connected."""
        return None if self._conn is None else self._conn.server_id


    def put(
        self,
        queue: str,
        data: bytes | str,
        *,
        priority: int = 0,
        item: str | None = None,
        new_item: bool = False,
        delay_s: float | None = None,
    ) -> str | None:
        """Add a job; returns the new item's name with `new_item=True`, else None."""
        request = req.put_request(
            queue, data, priority_=priority, item=item, new_item=new_item, delay_s=delay_s
        )
        return self._request(request, parse_put)

    def put_many(
        self, queue: str, datas: Iterable[bytes | str], *, priority: int = 0
    ) -> int:
        """PUT every item of `datas`, pipelined; returns how many the server acknowledged.

        All replies are read even when some are errors; the first error is then raised
        (the PUTs acknowledged before and after it are stored).
        """
        items = list(datas)
        chunks = [items[i : i + PUT_MANY_CHUNK] for i in range(0, len(items), PUT_MANY_CHUNK)]
        requests = [req.put_many_request(queue, chunk, priority_=priority) for chunk in chunks]
        if not requests:
            return 0
        conn = self._ready()
        acknowledged = 0
        first_error: QueueServerError | None = None
        try:
            conn.sock.sendall(requests[0])
            for index, chunk in enumerate(chunks):
                if index + 1 < len(requests):
                    conn.sock.sendall(requests[index + 1])
                for _ in chunk:
                    try:
                        conn.read(parse_put)
                        acknowledged += 1
                    except BadReply:
                        raise
                    except QueueServerError as exc:
                        first_error = first_error or exc
        except (OSError, EOFError, BadReply) as exc:
            self._drop()  # replies of the rest are still on the way
            self._raise_failed(conn, f"put_many ({acknowledged} of {len(items)} acknowledged)", exc)
        except BaseException:
            self._drop()
            raise
        if first_error is not None:
            raise first_error
        return acknowledged

    def get(
        self,
        queues: str | Sequence[str] | None = None,
        *,
        count: int | None = None,
        expire_s: float | None = None,
        then: Then | None = None,
        block: Block = False,
    ) -> list[Job]:
        """GET (GETB with block=True, GETBE with "until_empty"); [] on `404 Queue Empty`.

        A blocking get waits as long as it takes (no timeout_s).
        """
        request = req.get_request(queues, count=count, expire_s=expire_s, then=then, block=block)
        return self._request(request, parse_get, _FOREVER if block else _DEFAULT)

    def done(self, *ids: int) -> list[DoneResult]:
        """DONE for each id in one request; one DoneResult per id, in order."""
        return self._request(req.done_request(ids), done_parser(len(ids)))

    def later(self, *ids: int, delay_s: float | None = None) -> list[bool]:
        """LATER for each id in one request; per id, whether it was running."""
        return self._request(req.later_request(ids, delay_s=delay_s), later_parser(len(ids)))

    def call(
        self,
        queue: str,
        data: bytes | str,
        *,
        output_queue: str,
        priority: int = 0,
        expire_s: float | None = None,
        then: Then | None = None,
        timeout_s: float | None = None,
    ) -> Job:
        """PUT ... NEW WAIT: put a job under a new item, wait for that item's job in `output_queue`.

        The returned output job is running: DONE it (or give expire_s with then="done").
        After `timeout_s` the connection is closed (the output job, when it comes,
        stays in `output_queue` for anyone) and ReplyTimeout is raised.
        """
        request = req.put_request(
            queue, data, priority_=priority, new_item=True, wait_queue=output_queue,
            expire_s=expire_s, then=then,
        )
        conn = self._ready()
        try:
            conn.request(request, parse_wait_ack)
            return conn.read(parse_job, timeout_s)
        except (OSError, EOFError, QueueServerError) as exc:
            self._raise_failed(conn, "PUT ... WAIT", exc)
        except BaseException:
            self._drop()  # a late output job would be read as the next reply
            raise

    def stats(self, queue: str | None = None) -> dict[str, QueueStats]:
        """STATS [q]: queue name -> its counters."""
        return self._request(req.named_request(b"STATS", queue), parse_stats, read_only=True)

    def total(self, queue: str | None = None) -> Total:
        """TOTAL [q]."""
        return self._request(req.named_request(b"TOTAL", queue), parse_total, read_only=True)

    def runlist(self, *, with_data: bool = False) -> list[RunningJob]:
        """RUNLIST [DATA]: the running jobs."""
        parse = runlist_parser(with_data=with_data)
        return self._request(req.runlist_request(with_data=with_data), parse, read_only=True)

    def ping(self) -> None:
        """PING; raises when the server does not answer `200 PONG`."""
        text = self._request(req.PING, parse_ok, read_only=True)
        if text != "PONG":
            raise BadReply(f"unexpected reply to PING: {text!r}")

    def _request(
        self,
        request: bytes,
        parse: Parser[T],
        timeout_s: float | None = _DEFAULT,
        *,
        read_only: bool = False,
    ) -> T:
        conn = self._ready()
        retries = self.reconnect_attempts if read_only else 0
        while True:
            try:
                return conn.request(request, parse, timeout_s)
            except (OSError, EOFError) as exc:
                if retries <= 0 or isinstance(exc, TimeoutError):
                    self._raise_failed(conn, req.verb_of(request), exc)
                self._drop()
                retries -= 1
                conn = self._ready()
            except QueueServerError as exc:
                self._raise_failed(conn, req.verb_of(request), exc)
            except BaseException:
                self._drop()  # interrupted mid-request: a late reply would answer the next one
                raise

    def _raise_failed(self, conn: _Connection, what: str, exc: BaseException) -> NoReturn:
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

    def _drop(self) -> None:
        self.close()

    def _ready(self) -> _Connection:
        """The connection to use now: the current one if the server has not closed it."""
        conn = self._conn
        if conn is not None and not conn.unusable():
            return conn
        self._drop()
        self._conn = conn = self._connect()
        return conn

    def _connect(self) -> _Connection:
        errors: dict[Address, str] = {}
        for attempt in range(self.reconnect_attempts + 1):
            if attempt:
                time.sleep(backoff_s(attempt))
            conn = self._open_primary(errors)
            if conn is not None:
                return conn
        reasons = "; ".join(f"{req.format_address(a)}: {why}" for a, why in errors.items())
        raise ServerUnreachable(f"cannot reach a queue server ({reasons})")

    def _open_primary(self, errors: dict[Address, str]) -> _Connection | None:
        """Connect to every server, keep the one with the lowest id."""
        if len(self.addresses) == 1:
            return self._open(self.addresses[0], errors, ask_id=False)
        reachable: list[_Connection] = []
        try:
            for address in self.addresses:
                conn = self._open(address, errors, ask_id=True)
                if conn is not None:
                    reachable.append(conn)
        except BaseException:
            for conn in reachable:
                conn.close()
            raise
        if not reachable:
            return None
        order = req.rank_servers([conn.server_id for conn in reachable])
        for index in order[1:]:
            reachable[index].close()
        return reachable[order[0]]

    def _open(self, address: Address, errors: dict[Address, str], *, ask_id: bool) -> _Connection | None:
        """A connected, authenticated connection; None (reason in `errors`) when unreachable."""
        try:
            sock = socket.create_connection(address, timeout=self.connect_timeout_s)
        except OSError as exc:
            errors[address] = exc.strerror or str(exc) or type(exc).__name__
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.settimeout(self.timeout_s)
        conn = _Connection(sock, address, self._view, self.timeout_s)
        try:
            if self._auth is not None:
                conn.request(self._auth, parse_ok)
            if ask_id:
                conn.server_id = self._ask_id(conn)
        except (OSError, EOFError) as exc:
            conn.close()
            errors[address] = f"lost while connecting: {exc}"
            return None
        except BaseException:
            conn.close()
            raise
        return conn

    @staticmethod
    def _ask_id(conn: _Connection) -> int | None:
        """The server's id; None when it does not answer INTERCONNECT with one."""
        try:
            return conn.request(req.INTERCONNECT, parse_interconnect)
        except BadReply:
            raise
        except QueueServerError:
            return None
