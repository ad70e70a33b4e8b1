"""Beacon and Assignment frames: encode/decode round trips and clear errors."""
from __future__ import annotations

import pytest

from slot.beacon import Assignment, Beacon, SlotPhase
from slot.errors import MessageError


def make_beacon(**changes: object) -> Beacon:
    fields: dict[str, object] = {
        "slot_id": 3, "pid": 1234, "seq": 7, "phase": SlotPhase.BUSY, "queue": "resize_photo",
        "jobs_done": 120, "jobs_later": 4, "batches": 6, "errors": 1, "busy_s": 1.25, "batch_age_s": 0.5,
        "pss_bytes": 50_000_000, "private_dirty_bytes": 7_000_000,
    }
    fields.update(changes)
    return Beacon.model_validate(fields)


def test_beacon_survives_encode_and_decode_unchanged() -> None:
    beacon = make_beacon()
    assert Beacon.decode(beacon.encode()) == beacon


def test_final_beacon_carries_its_exit_reason() -> None:
    beacon = make_beacon(phase=SlotPhase.EXITING, exit_reason="memory_limit")
    decoded = Beacon.decode(beacon.encode())
    assert decoded.phase is SlotPhase.EXITING
    assert decoded.exit_reason == "memory_limit"


def test_beacon_of_a_slot_without_queue_decodes() -> None:
    assert Beacon.decode(make_beacon(queue=None).encode()).queue is None


@pytest.mark.parametrize(
    "frame",
    [b"", b"not json", b"{}", b'{"slot_id": -1}', make_beacon().encode().replace(b'"busy"', b'"dancing"')],
)
def test_garbage_beacon_frames_raise_message_error(frame: bytes) -> None:
    with pytest.raises(MessageError, match="bad Beacon frame"):
        Beacon.decode(frame)


def test_beacon_with_unknown_field_is_refused() -> None:
    frame = make_beacon().encode()[:-1] + b',"extra":1}'
    with pytest.raises(MessageError):
        Beacon.decode(frame)


def test_assignment_round_trips_and_checks_the_queue_name() -> None:
    assignment = Assignment(queue="q1", batch_size=20, lock_timeout_s=1.5, private_dirty_limit_bytes=10)
    assert Assignment.decode(assignment.encode()) == assignment
    with pytest.raises(MessageError):
        Assignment.decode(assignment.encode().replace(b'"q1"', b'"bad name"'))
