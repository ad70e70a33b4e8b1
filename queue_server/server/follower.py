"""`--replica-of HOST:PORT`: this server follows a primary (sockPQd replication).

It connects to the primary and sends `SNAPSHOT <own id> <own ip> <own port>`: the reply
is the primary's whole state, which replaces ours (as CLONE does: written as a local
snapshot), and the same connection then carries every later change as SYNC records,
applied and logged here in order. While it follows, the server is offline for queue
commands (`500 Offline Mode`; TOTAL, STATS, RUNLIST and PING answer): producers and
slots use the live server with the lowest id, the primary. It fires no timer of its own
(server.py `following`): expiries, WAKEs and dead bounds arrive as the primary's records.

If the link breaks, the follower reconnects (and syncs from a new snapshot). If the
primary has not been reachable for `promote_after_s`, this server goes online and is
the primary from then on. The old primary must then come back as a replica of it,
with a new, higher id (PROTOCOL.md: "a former primary that comes back gets max+1").
"""
from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import TYPE_CHECKING, cast

from queue_server.protocol.framing import FrameReader
from queue_server.server import replay
from queue_server.server.errors import ReplicationApplyError, SnapshotError

if TYPE_CHECKING:
    from queue_server.server.server import QueueServer

log = logging.getLogger("slotmap.queue_server")

RETRY_S = 0.5
CONNECT_TIMEOUT_S = 2.0


class LinkState(enum.Enum):
    AUTHENTICATING = "authenticating"
    AWAITING_SNAPSHOT = "awaiting snapshot"
    STREAMING = "streaming"
    CLOSED = "closed"


class FollowLink(asyncio.Protocol):
    """One connection to the primary: AUTH (if a token is set), SNAPSHOT, then the stream."""

    def __init__(self, server: QueueServer) -> None:
        self.server = server
        self.state = LinkState.AUTHENTICATING
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(None)  # the primary is trusted: no line limit, as before
        self.snapshot_len = -1
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        settings = self.server.settings
        own_ip = transport.get_extra_info("sockname")[0]
        request = b"SNAPSHOT %d %s %d\r\n" % (settings.server_id, own_ip.encode(), settings.port)
        if settings.token is not None:
            request = b"AUTH " + settings.token.encode() + b"\r\n" + request
        else:
            self.state = LinkState.AWAITING_SNAPSHOT
        self.transport.write(request)

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = LinkState.CLOSED
        if not self.closed.done():
            self.closed.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        try:
            self._advance()
            self.reader.compact()
        except SnapshotError as exc:  # a record that does not parse: the reader is past its
            # line, shown too (a line, never a data block: job data stays out of the logs)
            end = self.reader.position
            line = self.reader.buffer[self.reader.buffer.rfind(b"\n", 0, end - 1) + 1:end]
            streaming = self.state is LinkState.STREAMING
            self._resync(f"{exc}: {bytes(line[:200]).rstrip()!r}" if streaming else str(exc))
        except (ReplicationApplyError, ValueError) as exc:
            self._resync(str(exc))
        except Exception as exc:  # a bug applying a record: same remedy, with the traceback
            log.exception("applying the primary's stream raised")
            self._resync(f"{type(exc).__name__}: {exc}")

    def _resync(self, why: str) -> None:
        """What the primary sent cannot be applied here: this server's state may now differ
        from the primary's, so the link is closed and the next one starts from a full
        snapshot (Follower.run; replica_health.py counts it for INFO and backs off while
        that keeps failing)."""
        log.error("replication: cannot apply what the primary sent (%s) while %s; this "
                  "replica's state may differ from the primary's: resyncing from a full "
                  "snapshot", why, self.state.value)
        self.server.replication.failed(why)
        self._close()

    def _advance(self) -> None:
        if self.state is LinkState.AUTHENTICATING:
            line = self._line()
            if line is None:
                return
            if line != b"200 OK":
                raise ValueError(f"the primary refused AUTH: {line[:200]!r}")
            self.state = LinkState.AWAITING_SNAPSHOT
        if self.state is LinkState.AWAITING_SNAPSHOT:
            if self.snapshot_len < 0:
                line = self._line()
                if line is None:
                    return
                head = line.split()
                if len(head) != 3 or head[:2] != [b"200", b"OK"] or not head[2].isdigit():
                    raise ValueError(f"unexpected reply to SNAPSHOT: {line[:200]!r}")
                self.snapshot_len = int(head[2])
            blob = self.reader.block(self.snapshot_len)
            if blob is None:
                return
            if not self.server.replace_state(blob):
                self._close()  # the local log failed: the server is stopping
                return
            log.info("replica of the primary: snapshot of %d bytes applied, streaming", len(blob))
            self.server.replication.snapshot_applied()
            self.state = LinkState.STREAMING
        if self.state is LinkState.STREAMING:
            commands = replay.take_records(self.reader)
            if commands:
                self.server.apply_replicated(commands)

    def _line(self) -> bytes | None:
        line = self.reader.line()
        return None if line is None else line.rstrip(b"\r")

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Follower:
    """Keeps a link to the primary; promotes this server when the primary stays away."""

    def __init__(self, server: QueueServer, primary: tuple[str, int], promote_after_s: float) -> None:
        self.server = server
        self.primary = primary
        self.promote_after_s = promote_after_s

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.primary
        unreachable_since = time.monotonic()
        while True:
            try:
                _, link = await asyncio.wait_for(
                    loop.create_connection(lambda: FollowLink(self.server), host, port),
                    CONNECT_TIMEOUT_S)
            except (TimeoutError, OSError) as exc:
                log.warning("primary %s:%d unreachable: %s", host, port, exc)
            else:
                await link.closed
                if self.server.log_error is not None:
                    return  # stopping
                log.warning("link to the primary %s:%d lost", host, port)
                unreachable_since = time.monotonic()
            if time.monotonic() - unreachable_since >= self.promote_after_s:
                log.warning("primary %s:%d unreachable for %.1f s: promoting this server",
                            host, port, self.promote_after_s)
                self.server.promote()
                return
            await asyncio.sleep(self.server.replication.retry_delay(RETRY_S))
