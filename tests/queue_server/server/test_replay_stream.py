"""The replication stream arrives in pieces: parse_records takes the complete records and
leaves the rest, whatever the cut points, and agrees with iter_records on the whole."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queue_server.server import records, replay
from queue_server.server.errors import SnapshotError

RECORDS = [
    records.put("q", 3, b"data with\r\nnewlines", None, None),
    records.put("r", -2, b"", "item_1", 1_900_000_000.25),
    records.get("q", 7, 3, False, 1_900_000_030.5, True),
    records.done([7, 8, 9], records.time_text(1_900_000_031.0)),
    records.done([11], records.time_text(1_900_000_032.0), "slot.h1.2", b"a result\r\nwith newlines"),
    records.later([10], None),
    records.wake(1_900_000_001.0),
    records.ids(11, 2),
]
STREAM = b"".join(RECORDS)


def _fed_in_pieces(cuts: list[int]) -> list[replay.SyncCommand]:
    received = bytearray()
    commands: list[replay.SyncCommand] = []
    previous = 0
    for cut in [*sorted(cuts), len(STREAM)]:
        received += STREAM[previous:cut]
        previous = cut
        complete, used = replay.parse_records(bytes(received))
        commands.extend(complete)
        del received[:used]
    assert received == b""
    return commands


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_cut_points_give_the_same_commands(cuts: list[int]) -> None:
    assert _fed_in_pieces(cuts) == list(replay.iter_records(STREAM))


def test_an_incomplete_data_block_waits_for_the_rest() -> None:
    record = records.put("q", 0, b"0123456789", None, None)
    commands, used = replay.parse_records(record[:-1])
    assert (commands, used) == ([], 0)
    commands, used = replay.parse_records(record)
    assert len(commands) == 1 and used == len(record)


def test_a_line_that_is_not_a_sync_record_is_an_error() -> None:
    with pytest.raises(SnapshotError, match="not a SYNC record"):
        replay.parse_records(records.done([1], records.time_text(1_900_000_000.0)) + b"PUT q 0 1\r\nx")
