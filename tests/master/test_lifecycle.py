"""The slot lifecycle as the master sees it: allowed moves, events, actions, checks."""
from __future__ import annotations

import signal
from collections.abc import Sequence

import pytest

from master.crashes import crash_cause
from master.leases import renewals
from master.lifecycle import (
    ALLOWED,
    Action,
    Beaconed,
    Count,
    Counter,
    DeadlinePassed,
    Exited,
    Hung,
    Leased,
    Limits,
    Log,
    OverMemory,
    Resolved,
    SendSignal,
    SettleJobs,
    Slot,
    SlotState,
    StopRequested,
    TransitionError,
    check,
    on_event,
)
from slot.beacon import Assignment, Beacon, SlotPhase
from slot.exit_codes import SlotExit

LIMITS = Limits(beacon_interval_s=0.2, hung_after_beacons=3, hard_memory_limit_bytes=1000, startup_grace_s=5.0)
ASSIGNMENT = Assignment(queue="q", batch_size=10, lock_timeout_s=2.0, private_dirty_limit_bytes=500)


def new_slot(now: float = 100.0) -> Slot:
    return Slot(slot_id=1, pid=4242, assignment=ASSIGNMENT, started_at=now)


def beacon(**changes: object) -> Beacon:
    fields: dict[str, object] = {"slot_id": 1, "pid": 4242, "seq": 1, "phase": SlotPhase.IDLE, "queue": "q"}
    fields.update(changes)
    return Beacon.model_validate(fields)


def running_slot() -> Slot:
    slot = new_slot()
    on_event(slot, Beaconed(beacon()), 100.1)
    return slot


def signals(actions: Sequence[Action]) -> list[int]:
    return [a.signal for a in actions if isinstance(a, SendSignal)]


def counts(actions: Sequence[Action]) -> list[Counter]:
    return [a.counter for a in actions if isinstance(a, Count)]


def test_finished_states_allow_no_move() -> None:
    assert ALLOWED[SlotState.EXITED] == frozenset()
    assert ALLOWED[SlotState.FAILED] == frozenset()


def test_first_beacon_makes_a_starting_slot_running() -> None:
    slot = new_slot()
    assert on_event(slot, Beaconed(beacon()), 100.1) == []
    assert slot.state is SlotState.RUNNING
    assert slot.last_beacon_at == 100.1


def test_stop_sends_sigterm_once_and_sets_the_deadline() -> None:
    slot = running_slot()
    assert signals(on_event(slot, StopRequested(deadline_s=10.0), 200.0)) == [signal.SIGTERM]
    assert slot.state is SlotState.DRAINING and slot.stop_deadline == 210.0
    assert on_event(slot, StopRequested(deadline_s=10.0), 201.0) == []


def test_draining_slot_past_its_deadline_gets_sigkill() -> None:
    slot = running_slot()
    on_event(slot, StopRequested(deadline_s=10.0), 200.0)
    on_event(slot, Beaconed(beacon()), 209.8)
    assert check(slot, 209.9, LIMITS) is None
    event = check(slot, 210.0, LIMITS)
    assert isinstance(event, DeadlinePassed)
    assert signals(on_event(slot, event, 210.0)) == [signal.SIGKILL]
    assert slot.state is SlotState.STOPPING


def test_slot_silent_for_the_missed_beacons_is_hung_and_killed() -> None:
    slot = running_slot()
    assert check(slot, 100.1 + 0.6, LIMITS) is None
    event = check(slot, 100.1 + 0.61, LIMITS)
    assert isinstance(event, Hung) and "no beacon" in event.reason
    actions = on_event(slot, event, 100.8)
    assert signals(actions) == [signal.SIGKILL] and counts(actions) == [Counter.KILLED_HUNG]
    # Killing twice is not counted twice.
    assert on_event(slot, Hung("again"), 100.9) == []


def test_a_starting_slot_gets_a_grace_period_before_its_first_beacon() -> None:
    slot = new_slot(now=100.0)
    assert check(slot, 105.5, LIMITS) is None
    assert isinstance(check(slot, 105.7, LIMITS), Hung)


def test_a_batch_past_the_lock_time_is_renewed_not_hung_and_past_its_timeout_is_hung() -> None:
    slot = running_slot()
    slot.assignment = ASSIGNMENT.model_copy(update={"batch_timeout_s": 30.0})
    on_event(slot, Beaconed(beacon(phase=SlotPhase.BUSY, batch_age_s=2.5)), 103.0)
    assert check(slot, 103.0, LIMITS) is None  # lock time 2 s: its lease is renewed
    on_event(slot, Beaconed(beacon(phase=SlotPhase.BUSY, batch_age_s=30.5)), 131.0)
    event = check(slot, 131.0, LIMITS)
    assert isinstance(event, Hung) and "batch_timeout_s 30 s" in event.reason


def test_a_dead_slots_lease_is_settled_with_its_outcomes_and_a_clean_one_is_not() -> None:
    slot = running_slot()
    on_event(slot, Leased(((7, 1), (8, 2)), 2.0, ("k7", "k8")), 101.0)
    on_event(slot, Resolved(b"D 7"), 101.2)
    assert slot.lease is not None and slot.lease.renewed_at == 101.0
    actions = on_event(slot, Exited(None, signal.SIGKILL), 102.0)
    [settle] = [a for a in actions if isinstance(a, SettleJobs)]
    assert settle.lease.jobs == ((7, 1), (8, 2)) and settle.lease.keys == ("k7", "k8")
    assert settle.outcomes == (b"D 7",) and settle.blame
    assert settle.reason == "slot 1 (pid 4242) killed by SIGKILL"
    assert slot.lease is None
    released = running_slot()
    on_event(released, Leased(((7, 1),), 2.0), 101.0)
    on_event(released, Resolved(b"D 7"), 101.2)
    on_event(released, Leased((), 0.0), 101.5)
    assert released.outcomes == []
    assert not [a for a in on_event(released, Exited(None, signal.SIGKILL), 102.0)
                if isinstance(a, SettleJobs)]


def test_a_hung_slots_jobs_are_settled_with_why_the_master_killed_it() -> None:
    slot = running_slot()
    on_event(slot, Leased(((7, 1),), 2.0), 101.0)
    on_event(slot, Hung("no beacon for 0.70 s"), 101.8)
    actions = on_event(slot, Exited(None, signal.SIGKILL), 101.9)
    [settle] = [a for a in actions if isinstance(a, SettleJobs)]
    assert settle.reason == ("slot 1 (pid 4242) killed by SIGKILL: the master killed it, "
                             "hung (no beacon for 0.70 s)")
    assert settle.blame


def test_a_slot_killed_for_its_stop_deadline_blames_no_job() -> None:
    slot = running_slot()
    on_event(slot, Leased(((7, 1),), 2.0), 101.0)
    on_event(slot, StopRequested(1.0), 101.1)
    on_event(slot, DeadlinePassed(), 102.2)
    [settle] = [a for a in on_event(slot, Exited(None, signal.SIGKILL), 102.3)
                if isinstance(a, SettleJobs)]
    assert not settle.blame


def test_leases_of_live_slots_are_renewed_every_third_of_their_lock() -> None:
    slot = running_slot()
    on_event(slot, Leased(((7, 1), (8, 1)), 3.0), 100.0)
    assert renewals([slot], 100.5) == []
    assert renewals([slot], 101.0) == [7, 8]
    assert renewals([slot], 101.5) == []
    assert renewals([slot], 102.0) == [7, 8]
    on_event(slot, Hung("test"), 102.1)  # killed: renewed no more
    assert renewals([slot], 110.0) == []


def test_slot_over_the_hard_memory_limit_is_killed_and_counted() -> None:
    slot = running_slot()
    on_event(slot, Beaconed(beacon(private_dirty_bytes=1001)), 101.0)
    event = check(slot, 101.0, LIMITS)
    assert event == OverMemory(1001, 1000)
    assert counts(on_event(slot, event, 101.0)) == [Counter.KILLED_OVER_MEMORY]


def test_clean_exit_ends_in_exited_and_memory_exit_is_counted_as_recycled() -> None:
    slot = running_slot()
    actions = on_event(slot, Exited(SlotExit.MEMORY_LIMIT, None), 150.0)
    assert slot.state is SlotState.EXITED
    assert counts(actions) == [Counter.RECYCLED_FOR_MEMORY]


def test_crash_and_boot_failure_end_in_failed_with_their_counters() -> None:
    crashed = running_slot()
    assert counts(on_event(crashed, Exited(None, signal.SIGSEGV), 150.0)) == [Counter.CRASHED]
    assert crashed.state is SlotState.FAILED
    broken = new_slot()
    assert counts(on_event(broken, Exited(SlotExit.SETUP_FAILED, None), 100.2)) == [Counter.BOOT_FAILED]


def test_a_slot_killed_by_the_master_is_not_counted_as_crashed() -> None:
    slot = running_slot()
    on_event(slot, Hung("test"), 101.0)
    assert counts(on_event(slot, Exited(None, signal.SIGKILL), 101.1)) == []
    assert slot.state is SlotState.FAILED


def test_a_move_not_allowed_raises_an_error_naming_both_states() -> None:
    slot = running_slot()
    on_event(slot, Exited(0, None), 150.0)
    with pytest.raises(TransitionError, match="from exited to draining"):
        on_event(slot, StopRequested(deadline_s=1.0), 151.0)


@pytest.mark.parametrize("code, counter, words", [
    (SlotExit.MAX_JOBS, Counter.RECYCLED_FOR_JOBS, "recycled: 7 jobs"),
    (SlotExit.MAX_AGE, Counter.RECYCLED_FOR_AGE, "recycled: age 3612 s"),
    (SlotExit.MEMORY_LIMIT, Counter.RECYCLED_FOR_MEMORY, "recycled for memory"),
])
def test_a_recycled_slot_exits_cleanly_counted_and_logged_with_its_reason(
    code: SlotExit, counter: Counter, words: str
) -> None:
    slot = running_slot()
    on_event(slot, Leased(((1, 1), (2, 1), (3, 1), (4, 1)), 2.0), 101.0)
    on_event(slot, Leased((), 2.0), 101.5)
    on_event(slot, Leased(((5, 1), (6, 1), (7, 1)), 2.0), 102.0)
    on_event(slot, Leased((), 2.0), 102.5)
    actions = on_event(slot, Exited(code, None), 100.0 + 3612.4)
    assert slot.state is SlotState.EXITED and slot.jobs_taken == 7
    assert counts(actions) == [counter]
    assert any(isinstance(a, Log) and not a.warning and a.message.endswith(words) for a in actions), actions
    assert crash_cause(code, None, None) is None  # no crash event, no backoff
