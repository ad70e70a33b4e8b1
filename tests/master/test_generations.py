"""Which old-generation slots a code reload asks to stop, and when it has rolled (pure)."""
from __future__ import annotations

from master.generations import rolled, to_retire
from master.lifecycle import Slot, SlotState
from slot.beacon import Assignment


def slot(slot_id: int, queue: str, generation: int, state: SlotState = SlotState.RUNNING) -> Slot:
    return Slot(slot_id=slot_id, pid=1000 + slot_id, assignment=Assignment(queue=queue, batch_size=10, lock_timeout_s=30.0,
                                                          private_dirty_limit_bytes=1 << 30), started_at=0.0,
                state=state, generation=generation)


def test_one_old_slot_per_queue_at_a_time_the_lowest_id_first() -> None:
    slots = [slot(3, "a", 0), slot(1, "a", 0), slot(2, "b", 0), slot(4, "c", 1)]
    assert [s.slot_id for s in to_retire(slots, 1)] == [1, 2]


def test_a_queue_waits_while_an_old_slot_leaves_or_a_new_one_starts() -> None:
    leaving = [slot(1, "a", 0, SlotState.DRAINING), slot(2, "a", 0)]
    starting = [slot(1, "b", 1, SlotState.STARTING), slot(2, "b", 0)]
    assert to_retire(leaving, 1) == []
    assert to_retire(starting, 1) == []
    # A new slot up and running no longer holds the queue back.
    assert [s.slot_id for s in to_retire([slot(1, "b", 1), slot(2, "b", 0)], 1)] == [2]


def test_rolled_when_no_slot_of_an_older_generation_is_left() -> None:
    assert not rolled([slot(1, "a", 1), slot(2, "a", 0, SlotState.DRAINING)], 1)
    assert rolled([slot(1, "a", 1), slot(2, "a", 2)], 1)
    assert rolled([], 3)
