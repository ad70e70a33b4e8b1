"""`--replica-of HOST:PORT`: this server follows a primary (sockPQd replication).

It connects to the primary and sends `SNAPSHOT <own id> <own ip> <own port>`: the reply
is the primary's whole state, which replaces ours (as CLONE does: written as a local
snapshot), and the same connection then carries every later change as SYNC records,
applied and logged here in order. While it follows, the server is offline for queue
commands (`500 Offline Mode`; TOTAL, STATS, RUNLIST and PING answer): producers and
slots use the live server with the lowest id, the primary. It fires no timer of its own
(server.py `following`): expiries, WAKEs and dead bounds arrive as the primary's records.

If the link breaks, the follower reconnects (and syncs from a new snapshot). Heartbeats
go both ways (liveness.py): the replica confirms what it applied and wrote with
`REPLACK <bytes>` after each commit and every HEARTBEAT_S, and closes a link on which
the primary stayed silent for LIVENESS heartbeats, whatever TCP says (a frozen primary).
If the primary has not been heard from for `promote_after_s`, this server goes online and
is the primary from then on. The old primary must then come back as a replica of it,
with a new, higher id (PROTOCOL.md: "a former primary that comes back gets max+1").
"""
from __future__ import annotations

import asyncio
import enum
import logging
import time
from typing import cast

from config.periodic import TurnBoundary
from queue_server.protocol.framing import FrameReader
from queue_server.server import replay
from queue_server.server.errors import ReplicationApplyError, SnapshotError
from queue_server.server.faces import Server
from queue_server.server.liveness import HEARTBEAT_S, SILENCE_LIMIT_S, Heard

log = logging.getLogger("slotmap.queue_server")

RETRY_S = 0.5
CONNECT_TIMEOUT_S = 2.0


class LinkState(enum.Enum):
    AUTHENTICATING = "authenticating"
    CHECKING_EPOCH = "checking epoch"  # ROLE's reply: a primary of an older epoch is refused
    AWAITING_SNAPSHOT = "awaiting snapshot"
    STREAMING = "streaming"
    CLOSED = "closed"


class FollowLink(asyncio.Protocol):
    """One connection to the primary: AUTH (if a token is set), SNAPSHOT, then the stream."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.state = LinkState.AUTHENTICATING
        self.transport: asyncio.Transport | None = None
        self.reader = FrameReader(None)  # the primary is trusted: no line limit, as before
        self.snapshot_len = -1
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.heard = Heard(time.monotonic())  # the primary's last byte, once applied
        self.applied = 0  # bytes of the stream applied (after the SNAPSHOT reply)
        self.acked = -1  # bytes confirmed to the primary (REPLACK)
        # A primary in sync mode waits for each commit's REPLACK; an async one needs only
        # the heartbeat's (ROLE says which): no REPLACK per record for it to read.
        self.ack_each_commit = True
        self.committed_bytes = 0  # applied and committed here (what a heartbeat confirms)
        self.committed_records = 0  # our position (records) at that commit
        self.base = 0  # the primary's position (records) where our snapshot stands
        self.records = 0  # records applied from the stream
        self._ticker: asyncio.TimerHandle | None = None
        self.ticks = TurnBoundary("the replica's heartbeat to its primary", log=log,
                                  next_turn=f"the next in {HEARTBEAT_S:g} s")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        settings = self.server.settings
        own_ip = transport.get_extra_info("sockname")[0]
        request = b"ROLE\r\nSNAPSHOT %d %s %d\r\n" % (settings.server_id, own_ip.encode(),
                                                       settings.port)
        token = settings.cluster_token
        if token is not None:
            request = b"AUTH " + token.encode() + b"\r\n" + request
        else:
            self.state = LinkState.CHECKING_EPOCH
        self.transport.write(request)
        self._ticker = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._tick)

    def connection_lost(self, exc: Exception | None) -> None:
        self.state = LinkState.CLOSED
        if self._ticker is not None:
            self._ticker.cancel()
        # The link stays the server's upstream until another one streams: its position is
        # where this replica's state still stands, which the sentinel compares once the
        # primary died. Cleared here, every replica of a dead primary said 0, and the
        # sentinel promoted the first one listed, not the furthest along (seen: a replica
        # that lagged promoted, its peer following it and dropping 31 acknowledged jobs).
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
        # The time spent applying is ours, not the primary's silence: a snapshot of a few MB
        # takes seconds to decode and write on a loaded box, and counting that against the
        # liveness closed every link right after its snapshot (seen: a replica resyncing in
        # a loop under load, each snapshot larger than the last).
        self.heard.at = time.monotonic()

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
            self.state = LinkState.CHECKING_EPOCH
        if self.state is LinkState.CHECKING_EPOCH:
            line = self._line()
            if line is None:
                return
            self._check_epoch(line)
            self.state = LinkState.AWAITING_SNAPSHOT
        if self.state is LinkState.AWAITING_SNAPSHOT:
            if self.snapshot_len < 0:
                line = self._line()
                if line is None:
                    return
                head = line.split()
                # Digits bounded before int(): 20 hold any length a snapshot can have.
                if (len(head) != 3 or head[:2] != [b"200", b"OK"] or not head[2].isdigit()
                        or len(head[2]) > 20):
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
            self.server.upstream = self
            self.committed_records = self.base
            self._confirm(0)  # the snapshot is written (replace_state): all before it is here
        if self.state is LinkState.STREAMING:
            before = self.reader.position
            commands = replay.take_records(self.reader)
            self.applied += self.reader.position - before  # empty lines (heartbeats) too
            self.records += len(commands)
            if commands:
                self.server.apply_replicated(commands)

    def _check_epoch(self, line: bytes) -> None:
        """ROLE's reply: `200 OK <role> <sync> <links> <released> <epoch> ...`; a server
        without ROLE (400) has no epoch. A primary of an epoch older than ours was deposed:
        its stream is refused."""
        words = line.split()
        if len(words) < 7 or words[:2] != [b"200", b"OK"] or not words[6].isdigit():
            return
        # The primary's position as its snapshot will stand (ROLE and SNAPSHOT are read in
        # one turn there): ours counts on from it with every record applied.
        self.base = int(words[9]) if len(words) >= 10 and words[9].isdigit() else 0
        self.ack_each_commit = words[3] != b"async"
        epoch, ours = int(words[6]), self.server.term.epoch
        if epoch < ours:
            raise ValueError(f"the primary is in epoch {epoch}, older than ours ({ours}): "
                             "its stream is refused")

    def position(self) -> int:
        return self.base + self.records

    def committed(self) -> None:
        """The server committed (under its fsync policy) all it applied so far."""
        self.committed_bytes = self.applied
        self.committed_records = self.position()
        if self.applied != self.acked and self.ack_each_commit:
            self._confirm(self.applied)

    def _confirm(self, applied: int) -> None:
        if self.transport is not None and not self.transport.is_closing():
            # The position lets the primary show our lag in records (REPLICAS, INFO).
            self.transport.write(b"REPLACK %d %d\r\n" % (applied, self.committed_records))
            self.acked = applied

    def _tick(self) -> None:
        """Every HEARTBEAT_S while streaming: our heartbeat, and the primary's checked."""
        self._ticker = None
        if self.state is LinkState.CLOSED:
            return
        with self.ticks:
            if not self._beat():
                return
        self._ticker = asyncio.get_running_loop().call_later(HEARTBEAT_S, self._tick)

    def _beat(self) -> bool:
        """False when the primary is silent past its liveness: the link is closed."""
        if self.state is LinkState.STREAMING:
            now = time.monotonic()
            if self.heard.dead(now):
                log.warning("the primary sent nothing for %.1f s (liveness %.1f s): link closed",
                            self.heard.silent_for(now), SILENCE_LIMIT_S)
                self._close()
                return False
            self._confirm(self.committed_bytes)
        return True

    def _line(self) -> bytes | None:
        line = self.reader.line()
        return None if line is None else line.rstrip(b"\r")

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Follower:
    """Keeps a link to the primary; promotes this server when the primary stays away."""

    def __init__(self, server: Server, primary: tuple[str, int], promote_after_s: float) -> None:
        self.server = server
        self.primary = primary
        self.promote_after_s = promote_after_s

    async def run(self) -> None:
        """Until promoted or stopping; cancelled when told to FOLLOW another. A round that
        raises is logged and tried again: the task ending would leave this replica following
        nobody, and nothing would say so (the server holds the task, so asyncio never reports
        its exception)."""
        host, port = self.primary
        heard = Heard(time.monotonic())  # the primary's last sign of life, over every link
        turns = TurnBoundary(f"following the primary {host}:{port}", log=log,
                             next_turn=f"tried again in {RETRY_S:g} s")
        while True:
            delay_s = RETRY_S
            with turns:
                if await self._round(heard):
                    return
                delay_s = self.server.replication.retry_delay(RETRY_S)
            await asyncio.sleep(delay_s)

    async def _round(self, heard: Heard) -> bool:
        """One link to the primary, until it is lost; True when following is over."""
        host, port = self.primary
        try:
            _, link = await asyncio.wait_for(
                asyncio.get_running_loop().create_connection(lambda: FollowLink(self.server), host, port),
                CONNECT_TIMEOUT_S)
        except (TimeoutError, OSError) as exc:
            log.warning("primary %s:%d unreachable: %s", host, port, exc)
        else:
            try:
                await self._watch(link, heard)
            except asyncio.CancelledError:  # told to FOLLOW another, or stopping
                link._close()
                raise
            if self.server.log_error is not None:
                return True  # stopping
            log.warning("link to the primary %s:%d lost", host, port)
        if heard.dead(time.monotonic(), self.promote_after_s):
            log.warning("primary %s:%d not heard from for %.1f s: promoting this server",
                        host, port, heard.silent_for(time.monotonic()))
            self.server.promote()
            return True
        return False

    async def _watch(self, link: FollowLink, heard: Heard) -> None:
        """Until the link closes. A link that is not streaming yet is closed once the
        primary has been silent for promote_after_s (a frozen primary's kernel still
        accepts connections: the SNAPSHOT is never answered)."""
        while True:
            done, _ = await asyncio.wait({link.closed}, timeout=HEARTBEAT_S)
            heard.at = max(heard.at, link.heard.at)
            if done:
                return
            if link.state is not LinkState.STREAMING and heard.dead(time.monotonic(),
                                                                    self.promote_after_s):
                link._close()
                await link.closed
                return
