"""The journal's replica streams: a link gets only the records made after its snapshot."""
from __future__ import annotations

import asyncio
from pathlib import Path

from queue_server.server.connection import Connection
from queue_server.server.server import QueueServer, ServerSettings


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
    # Each job once: "first" in the snapshot, "second" down the stream, never both. (The
    # stream of a turn is written before that turn's replies, the snapshot among them, as
    # it always was: the order is not what this test checks.)
    assert received.count(b"first") == 1, "a record already in the snapshot was streamed too"
    assert received.count(b"second") == 1
    assert b"SYNC PUT q 0 6" in received
