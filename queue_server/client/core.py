"""What QueueClient and AsyncQueueClient share without I/O: settings, the connection in
use, failover down the server list, retries; each client only performs the effects.

Reconnect rule (both clients):
- Before each request the client checks that the server has not closed the
  connection meanwhile (it was killed, restarted, shut down). A closed or
  never-opened connection is replaced first: nothing of the request was sent,
  so any request goes on transparently to the primary found then.
- Connecting tries every server of the list; reachable ones are sent
  `AUTH <token>` (when a token is set) and asked INTERCONNECT for their id and ROLE
  whether they acknowledge now; the lowest id among those that do wins (a replica, a
  deposed primary or one refusing in sync mode after them; list order breaks ties, a
  server without an id ranks last), so a failover is followed whatever the ids.
  With a single server no INTERCONNECT is sent. With several, each has
  `connect_timeout_s` to answer this handshake too (a frozen server accepts and never
  answers). Unreachable servers are skipped; with none reachable it retries the list
  `reconnect_attempts` more times, then raises ServerUnreachable.
- Read-only requests (PING, TOTAL, STATS, RUNLIST, JOB, JOBS, INTERCONNECT) that
  lose the connection mid-way are repeated on a fresh connection.
- Requests that change state (PUT, GET*, DONE, LATER, FAIL, call) that lose the
  connection after sending raise ConnectionLost: the server may have acted on
  them. The next call reconnects. Except a PUT with the producer's own key: sent
  again with the same key it is never a second job (`EXISTS` if the first arrived),
  so it is retried like a read-only request (a primary cut off mid-failover).
- A reply that does not come within `timeout_s` (or `call`'s own timeout)
  closes the connection and raises ReplyTimeout: a late reply would otherwise
  be read as the answer to the next request. With several servers, a request that
  may go again (read-only, or a PUT with its own key) goes to the primary found anew
  when its server is silent or no longer primary (asked after FOLLOW_CHECK_S, as an
  outcome's, wait_check.py held_reply), until `timeout_s` has passed (a frozen primary,
  follow.py resends_until); a live primary's late reply is waited for. Blocking GETs
  wait without limit; given `check_s`, and result()'s waits, the server is checked on
  meanwhile (wait_check.py, WAIT_CHECK_S).
- An error reply (QueueServerError) keeps the connection, except 413 and
  `400 Line Too Long`, after which the server closes it.
- With `offline_wait_s` > 0, a request refused with `500 Offline Mode` (not carried
  out) is tried again, the server list asked afresh each time, for up to that long:
  a replica that is not promoted yet, or a primary in maintenance, is waited out.
- A request refused with `500 Offline Mode` always drops its connection, waited out or
  not: the next request asks the server list again, never the same refusing server
  (a restarted old primary that answered first, issue 25).
- Outcomes given `until` (DONE, LATER, FAIL, TOUCH, a reply's PUT: a running job's lock)
  follow the primary through a failover (follow.py); a late reply is waited for while
  the server still answers, since it holds it (wait_check.py held_reply).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Final, Generic, NoReturn, Protocol, TypeVar

from queue_server.client import wait_check
from queue_server.client.effects import Op, Open, Request, Send, Sleep
from queue_server.client.follow import FOLLOW_CHECK_S, follow_pause, resend_pause, resends_until
from queue_server.protocol import requests as req
from queue_server.protocol.client_errors import (
    BadReply,
    OfflineError,
    QueueServerError,
    ServerUnreachable,
    WaitWoken,
    closes_connection,
    connection_failure,
)
from queue_server.protocol.reply_parsers import parse_ok, parse_server_id, parse_serving
from queue_server.protocol.reply_reading import Parser
from queue_server.protocol.requests import Address

RECV_BYTES: Final = 256 * 1024
# A read's timeout_s: the client's own timeout_s (None waits without limit).
CLIENT_TIMEOUT: Final = -1.0
T = TypeVar("T")
# Between two tries of a request refused with `500 Offline Mode` (offline_wait_s).
OFFLINE_RETRY_S: Final = 0.2
BAD_REQUEST_CODE: Final = 400  # a server that does not know an optional request (CLIENT NAME)


def backoff_s(attempt: int) -> float:
    """Pause before pass `attempt` (1, 2, ...) over the server list."""
    return min(0.05 * 2 ** (attempt - 1), 1.0)


def unreachable_reason(exc: OSError) -> str:
    """Why a connect failed, for ServerUnreachable's message."""
    return exc.strerror or str(exc) or type(exc).__name__


def lost_while_connecting(exc: OSError | EOFError) -> str:
    """Why a server that accepted the connection is skipped (AUTH or INTERCONNECT broke off)."""
    return f"lost while connecting: {exc}"


class Connection(Protocol):
    """What the shared logic needs of either client's connection."""

    address: Address
    server_id: int | None
    serving: bool | None  # ROLE: acknowledges now (None: not asked, or no ROLE)

    def unusable(self) -> bool: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


class ClientCore(Generic[C]):
    """Settings, the connection in use and the failure rules of a queue client; its
    operations yield effects (queue_server/client/effects.py) that the client performs."""

    def __init__(
        self,
        servers: str | Sequence[str] = req.DEFAULT_SERVER,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 3.0,
        reconnect_attempts: int = 2,
        offline_wait_s: float = 0.0,
        name: str | None = None,
    ) -> None:
        """`name`: sent as `CLIENT NAME <name>` on each connection, the door the server counts
        this client's RETRY and DELETE under (cli, dashboard, api; none: `client`)."""
        self.addresses = req.parse_servers(servers)
        self.offline_wait_s = offline_wait_s
        self._auth = None if token is None else req.auth_request(token)
        self._name = None if name is None else req.client_name_request(name)
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

    def _request(
        self,
        request: bytes,
        parse: Parser[T],
        timeout_s: float | None = CLIENT_TIMEOUT,
        *,
        read_only: bool = False,
        idempotent: bool = False,
        wake_fd: int | None = None,
        until: float | None = None,
        check_s: float | None = None,
    ) -> Op[T]:
        """Send `request` and read its reply, on the primary, by the reconnect rule. Which read:
        - a wait (`timeout_s` None with `wake_fd`, or given `check_s`: with several servers,
          its server checked every `check_s`, follow.py WAIT_CHECK_S): wait_check.wait;
        - with `until` (time.monotonic()), a request that follows the primary: sent again to
          the primary found anew after a refusal, a lost connection or a server gone silent
          (or no longer primary) until then;
        - without `until`, a request that may go again (read-only, or `idempotent`: a PUT
          with its own key), with several servers: sent again to the primary found anew
          after a lost connection or a server gone silent, for the client's timeout_s
          (follow.py resends_until);
        - either of these two with no reply within FOLLOW_CHECK_S: wait_check.held_reply,
          a late reply from a live primary waited for (until `until`, or that timeout_s),
          never sent again;
        - else one reply wait of `timeout_s`."""
        if timeout_s == CLIENT_TIMEOUT or len(self.addresses) == 1:
            check_s = None  # only a wait, with another server to go to
        waits = check_s is not None or (timeout_s is None and wake_fd is not None)
        follow_s = None if until is None else self._follow_check_s(timeout_s)
        timeout_s = timeout_s if follow_s is None else follow_s
        conn = None if until is None else (yield from self._following(until, wake_fd))
        if conn is None:
            conn = self._conn
            if conn is None or conn.unusable():
                conn = yield from self._ready()
        retries = self.reconnect_attempts if read_only or idempotent else 0
        resend_until = None
        if until is None and timeout_s == CLIENT_TIMEOUT and (read_only or idempotent):
            resend_until = resends_until(time.monotonic(), servers=len(self.addresses),
                                         timeout_s=self.timeout_s)
            follow_s = None if resend_until is None else self._follow_check_s(timeout_s)
            timeout_s = timeout_s if follow_s is None else follow_s
        held_until = until if until is not None else resend_until
        offline_since: float | None = None
        while True:
            try:
                if waits:
                    yield Send(conn, request)
                    return (yield from wait_check.wait(self, conn, parse, timeout_s=timeout_s,
                                                       check_s=check_s, wake_fd=wake_fd))
                try:
                    return (yield Request(conn, request, parse, timeout_s))
                except TimeoutError:
                    if follow_s is None or held_until is None:
                        raise
                    return (yield from wait_check.held_reply(self, conn, parse, until=held_until,
                                                             check_s=follow_s))
            except WaitWoken:
                self._drop()  # the server drops the waiter with the connection
                raise
            except BaseException as exc:  # interrupted: a late reply would answer the next request
                now = time.monotonic()
                pause = follow_pause(exc, until, now)
                if pause is None:
                    pause, offline_since = self._offline_pause(exc, offline_since, now)
                if pause is None and resend_until is not None:
                    pause = resend_pause(exc, resend_until, now)
                if pause is None:
                    self._retry_or_raise(conn, req.verb_of(request), exc, retries_left=retries)
                    retries -= 1
                else:
                    self._drop()
                    yield Sleep(pause, wake_fd)
            conn = None if until is None else (yield from self._following(until, wake_fd))
            if conn is None:
                conn = yield from self._ready()

    def _follow_check_s(self, timeout_s: float | None) -> float | None:
        """How long a request that follows the primary waits for its reply before it asks whether
        its server answers (follow.py FOLLOW_CHECK_S); None for a timeout of its own (GETB's)."""
        return None if timeout_s != CLIENT_TIMEOUT else min(FOLLOW_CHECK_S, self.timeout_s)

    def _following(self, until: float, wake_fd: int | None) -> Op[C | None]:
        """The connection to use while following the primary until `until`: no server
        reachable is waited out like a refusal; None once past `until` (then the
        reconnect rule's own errors are raised)."""
        while True:
            try:
                return (yield from self._ready())
            except ServerUnreachable as exc:
                pause = follow_pause(exc, until, time.monotonic())
                if pause is None:
                    return None
                yield Sleep(pause, wake_fd)

    def _ready(self) -> Op[C]:
        """The connection to use now: the current one if the server has not closed it."""
        conn = self._conn
        if conn is not None and not conn.unusable():
            return conn
        self._drop()
        self._conn = conn = yield from self._connect()
        return conn

    def _connect(self) -> Op[C]:
        errors: dict[Address, str] = {}
        for attempt in range(self.reconnect_attempts + 1):
            if attempt:
                yield Sleep(backoff_s(attempt))
            conn = yield from self._open_primary(errors)
            if conn is not None:
                return conn
        self._raise_unreachable(errors)

    def _open_primary(self, errors: dict[Address, str]) -> Op[C | None]:
        """Connect to every server, keep the one with the lowest id."""
        if len(self.addresses) == 1:
            return (yield from self._open(self.addresses[0], errors, ask_id=False))
        reachable: list[C] = []
        try:
            for address in self.addresses:
                conn = yield from self._open(address, errors, ask_id=True)
                if conn is not None:
                    reachable.append(conn)
        except BaseException:
            self._close_all(reachable)
            raise
        return self._keep_primary(reachable)

    def _open(self, address: Address, errors: dict[Address, str], *, ask_id: bool) -> Op[C | None]:
        """A connected, authenticated connection; None (reason in `errors`) when unreachable."""
        try:
            conn: C = yield Open(address)
        except OSError as exc:  # TimeoutError included
            errors[address] = unreachable_reason(exc)
            return None
        # Choosing among several servers, each is given the connect timeout to answer the
        # handshake too (every live server answers it at once): a frozen one accepts the
        # connection in its kernel and never answers, and held every reconnect for the
        # client's whole timeout_s (30 s) while another server was the primary.
        handshake_s = self.connect_timeout_s if ask_id else CLIENT_TIMEOUT
        try:
            if self._auth is not None:
                yield Request(conn, self._auth, parse_ok, handshake_s)
            if self._name is not None:
                yield from self._send_name(conn, handshake_s)
            if ask_id:
                conn.server_id = yield Request(conn, req.INTERCONNECT, parse_server_id, handshake_s)
                conn.serving = yield Request(conn, req.ROLE, parse_serving, handshake_s)
        except (OSError, EOFError) as exc:
            conn.close()
            errors[address] = lost_while_connecting(exc)
            return None
        except BaseException:
            conn.close()
            raise
        return conn

    def _send_name(self, conn: C, timeout_s: float) -> Op[None]:
        """CLIENT NAME; a server older than issue 15 answers 400, and is used unnamed."""
        try:
            yield Request(conn, self._name, parse_ok, timeout_s)  # type: ignore[arg-type]
        except QueueServerError as exc:
            if exc.code != BAD_REQUEST_CODE:
                raise

    def _close_answered_waits(self) -> None:
        """Before a call: close the given-up waits whose late reply came (calls.py)."""

    def _keep_for_late_reply(self, conn: C, late_reply_s: float) -> None:
        """Keep a call's connection open, unread, for `late_reply_s` (calls.py); each
        client waits its own way."""
        raise NotImplementedError

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _raise_failed(self, conn: C, what: str, exc: BaseException) -> NoReturn:
        """Raise what a failed request means; the connection is dropped unless still in step."""
        if isinstance(exc, QueueServerError) and not isinstance(exc, BadReply):
            # Offline: not the primary (now); the next request asks the server list again.
            if closes_connection(exc) or isinstance(exc, OfflineError):
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
        order = req.rank_servers([conn.server_id for conn in reachable],
                                 [conn.serving for conn in reachable])
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
