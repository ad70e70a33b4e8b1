"""The journal's replica streams: a link gets only the records made after its snapshot."""
from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.server import snapshot
from queue_server.server.connection import Connection
from queue_server.server.follower import FollowLink, LinkState
from queue_server.server.server import QueueServer
from queue_server.server.settings import ServerSettings


class Transport:
    """Keeps what it is given; never closes (an in-process connection)."""

    def __init__(self) -> None:
        self.out: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.out.append(data)

    def is_closing(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...

    def get_write_buffer_size(self) -> int:
        return 0


def _connect(server: QueueServer) -> tuple[Connection, Transport]:
    conn, transport = Connection(server), Transport()
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn, transport


def test_a_put_in_the_same_loop_turn_as_a_snapshot_reaches_the_new_replica_only_in_the_snapshot(
        tmp_path: Path) -> None:
    async def scenario() -> bytes:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="always"))
        server.open()
        producer, _ = _connect(server)
        replica, stream = _connect(server)
        # One loop turn: the PUT's record is not committed yet when the replica links.
        producer.data_received(b"PUT q 0 5\r\nfirst")
        replica.data_received(b"SNAPSHOT 2 127.0.0.1 7401\r\n")
        producer.data_received(b"PUT q 0 6\r\nsecond")
        await asyncio.sleep(0.05)  # the turn's flush: the commit streams to the link
        server.data_dir.close()
        return b"".join(stream.out)

    received = asyncio.run(scenario())
    # Each job once: "first" in the snapshot, "second" down the stream, never both (the
    # order is checked below, by a follower fed what its link received).
    assert received.count(b"first") == 1, "a record already in the snapshot was streamed too"
    assert received.count(b"second") == 1
    assert b"SYNC PUT q 0 6" in received


# ------------------------------------------------------------ a replica following the stream
#
# Every record must be in exactly one of (the snapshot the replica received, the stream
# after it), in order: a follower fed what its link received then holds the primary's state.


class FollowTransport(Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closed = False

    def close(self) -> None:
        self.closed = True


async def _follow(received: bytes, data_dir: Path) -> tuple[LinkState, bytes]:
    """A replica server fed `received` as its link from the primary: the link's state after
    it, and the replica's whole state (a snapshot of it)."""
    replica = QueueServer(ServerSettings(data_dir=str(data_dir), fsync="never", server_id=2))
    replica.open()
    link = FollowLink(replica)
    link.transport = FollowTransport()  # type: ignore[assignment]
    link.state = LinkState.AWAITING_SNAPSHOT  # no token: SNAPSHOT was the request
    link.data_received(received)
    await asyncio.sleep(0)
    state = replica.store
    replica.data_dir.close()
    return link.state, snapshot.encode(state)


def test_a_replica_linking_mid_turn_gets_its_snapshot_reply_before_that_turns_records(
        tmp_path: Path) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="always"))
        server.open()
        producer, _ = _connect(server)
        replica, stream = _connect(server)
        replica.data_received(b"SNAPSHOT 2 127.0.0.1 7401\r\n")  # held until the turn's fsync
        producer.data_received(b"PUT q 0 5\r\nafter")
        await asyncio.sleep(0.05)
        server.data_dir.close()
        return b"".join(stream.out), snapshot.encode(server.store)

    received, primary = asyncio.run(scenario())
    assert received.startswith(b"200 OK "), "the turn's records went out ahead of the SNAPSHOT reply"
    state, replica = asyncio.run(_follow(received, tmp_path / "r"))
    assert state is LinkState.STREAMING
    assert replica == primary


def test_a_second_replica_linking_mid_turn_gets_no_record_of_that_turn_twice(tmp_path: Path) -> None:
    async def scenario() -> tuple[bytes, bytes, bytes]:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="always"))
        server.open()
        producer, _ = _connect(server)
        first, first_stream = _connect(server)
        first.data_received(b"SNAPSHOT 2 127.0.0.1 7401\r\n")
        await asyncio.sleep(0.05)  # the first replica is linked and synced
        # One loop turn: records already streamed to the first link, then a second link.
        producer.data_received(b"PUT q 0 6\r\nbefore")
        second, second_stream = _connect(server)
        second.data_received(b"SNAPSHOT 3 127.0.0.1 7402\r\n")
        producer.data_received(b"PUT q 0 5\r\nafter")
        await asyncio.sleep(0.05)
        server.data_dir.close()
        return b"".join(first_stream.out), b"".join(second_stream.out), snapshot.encode(server.store)

    first, second, primary = asyncio.run(scenario())
    assert second.count(b"before") == 1, "a record in the second replica's snapshot was streamed too"
    for n, received in enumerate((first, second)):
        state, replica = asyncio.run(_follow(received, tmp_path / f"r{n}"))
        assert state is LinkState.STREAMING
        assert replica == primary


@pytest.mark.parametrize("early_write", ["housekeeping snapshot", "final flush"])
def test_records_written_before_the_turns_commit_still_reach_the_replicas(
        tmp_path: Path, early_write: str) -> None:
    async def scenario() -> tuple[bytes, bytes]:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="always"))
        server.open()
        producer, _ = _connect(server)
        replica, stream = _connect(server)
        replica.data_received(b"SNAPSHOT 2 127.0.0.1 7401\r\n")
        await asyncio.sleep(0.05)
        producer.data_received(b"PUT q 0 7\r\nwritten")
        # Before the turn's flush, something else writes the pending records to the log.
        if early_write == "housekeeping snapshot":
            server.data_dir.log_bytes = server.data_dir.snapshot_log_bytes  # the log outgrew it
            server.housekeeping.snapshot_if_due()
            await _reaped(server)
        else:
            server.flush_records()  # as the way out does (server.py _final_flush)
        await asyncio.sleep(0.05)
        server.data_dir.close()
        return b"".join(stream.out), snapshot.encode(server.store)

    received, primary = asyncio.run(scenario())
    assert b"written" in received, "a record written to the log early never reached the replica"
    state, replica = asyncio.run(_follow(received, tmp_path / "r"))
    assert state is LinkState.STREAMING
    assert replica == primary


async def _reaped(server: QueueServer) -> None:
    """Wait for the snapshot child (a fork writing the state) to finish."""
    data_dir = server.data_dir
    # A process that fsyncs: on a busy shared machine it can take seconds (was 5 s).
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        data_dir.reap_snapshot()
        if data_dir._snapshot_child is None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the snapshot child did not finish within {DEADLINE_S} s")


class ClosableTransport(Transport):
    def __init__(self) -> None:
        super().__init__()
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


def test_clone_on_a_primary_cuts_its_replicas_so_they_resync_from_the_new_state(tmp_path: Path) -> None:
    async def scenario() -> tuple[bool, bytes, set[Connection]]:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="never"))
        server.open()
        replica, stream = Connection(server), ClosableTransport()
        replica.connection_made(stream)  # type: ignore[arg-type]
        replica.data_received(b"SNAPSHOT 2 127.0.0.1 7401\r\n")
        await asyncio.sleep(0.05)
        other = QueueServer(ServerSettings(data_dir=str(tmp_path / "other"), fsync="never"))
        other.open()
        donor, _ = _connect(other)
        donor.data_received(b"PUT cloned 0 4\r\ndata")
        await asyncio.sleep(0.05)
        blob = snapshot.encode(other.store)
        admin, admin_out = _connect(server)
        admin.data_received(b"CLONE %d\r\n" % len(blob) + blob)
        await asyncio.sleep(0.05)
        server.data_dir.close()
        other.data_dir.close()
        return stream.aborted, b"".join(admin_out.out), set(server.journal.links)

    aborted, reply, links = asyncio.run(scenario())
    assert reply == b"200 OK\r\n"
    # No record could take the replica from the old state to the cloned one.
    assert aborted and links == set()
