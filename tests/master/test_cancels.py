"""Stopping the slot of a cancelled job (pure): which slot holds a cancelled lease
(master/cancels.py), its kill (no crash, nobody blamed), and its batch's settlement (the
cancelled job left out, the jobs after it back at the head of the queue)."""
from __future__ import annotations

import random
import signal

from master.cancels import MATCH_FOR_S, CancelWatch
from master.crashes import crash_cause
from master.lifecycle import (
    Beaconed,
    Count,
    Exited,
    JobCancelled,
    KillCause,
    Leased,
    Log,
    SendSignal,
    SettleJobs,
    Slot,
    SlotState,
    on_event,
)
from master.settle import Done, Later, settle
from queue_server.client.cancels import CancelEntry
from slot.beacon import Assignment, Beacon, SlotPhase

ASSIGNMENT = Assignment(queue="q", batch_size=10, lock_timeout_s=2.0, private_dirty_limit_bytes=500)


def running_slot(slot_id: int = 1, jobs: tuple[int, ...] = ()) -> Slot:
    slot = Slot(slot_id=slot_id, pid=4000 + slot_id, assignment=ASSIGNMENT, started_at=100.0)
    on_event(slot, Beaconed(Beacon.model_validate({"slot_id": slot_id, "pid": slot.pid, "seq": 1,
                                                   "phase": SlotPhase.IDLE, "queue": "q"})), 100.1)
    if jobs:
        on_event(slot, Leased(tuple((j, 1) for j in jobs), 60.0, tuple(f"k{j}" for j in jobs), True), 100.2)
    return slot


def entry(lease: int, seq: int = 1, door: str = "cli") -> CancelEntry:
    return CancelEntry(seq=seq, lease=lease, queue="q", key=f"k{lease}", door=door, at=1.0)


def test_a_cancel_matches_the_slot_holding_its_lease_and_waits_for_a_note_not_read_yet() -> None:
    watch = CancelWatch()
    first, second = running_slot(1, (11, 12)), running_slot(2, (21,))
    [(slot, event)] = watch.matched([entry(12), entry(99, 2)], [first, second], 200.0)
    assert slot is first and event == JobCancelled(12, "k12", "cli")
    assert list(watch.waiting) == [99]  # maybe a batch whose note is on its way
    third = running_slot(3, (99,))
    [(slot, _)] = watch.matched([], [first, second, third], 201.0)
    assert slot is third and not watch.waiting


def test_a_cancel_no_slot_holds_is_forgotten_after_a_while() -> None:
    watch = CancelWatch()
    assert watch.matched([entry(5)], [running_slot(1, (6,))], 200.0) == []
    watch.matched([], [], 200.0 + MATCH_FOR_S + 0.1)
    assert not watch.waiting


def test_a_cancelled_slot_is_sigkilled_without_a_crash_and_its_batch_blames_nobody() -> None:
    slot = running_slot(1, (1, 2, 3))
    actions = on_event(slot, JobCancelled(2, "k2", "dashboard"), 101.0)
    assert SendSignal(slot.pid, signal.SIGKILL) in actions
    assert not [a for a in actions if isinstance(a, Count)]
    assert [a.warning for a in actions if isinstance(a, Log)] == [False]
    assert slot.state is SlotState.STOPPING and slot.kill_cause is KillCause.CANCELLED
    assert on_event(slot, JobCancelled(3, "k3", "cli"), 101.1) == []  # killed once
    exited = on_event(slot, Exited(None, signal.SIGKILL), 101.2)
    assert not [a for a in exited if isinstance(a, Count)]  # no CRASHED
    [settled] = [a for a in exited if isinstance(a, SettleJobs)]
    assert (settled.blame, settled.ordered, settled.gone) == (False, True, frozenset({2, 3}))
    assert settled.reason.endswith("the master killed it, its job k2 was cancelled by dashboard")
    assert crash_cause(None, signal.SIGKILL, KillCause.CANCELLED) is None


def test_the_cancelled_job_gets_no_request_and_the_jobs_after_it_go_back_to_the_front() -> None:
    lease = running_slot(1, (1, 2, 3, 4)).lease
    assert lease is not None
    result = settle(lease, [], reason="cancelled", blame=False, ordered=True, running=2,
                    gone=frozenset({2}), policy=None, reply_to=None, rng=random.Random(1))
    # Job 1 finished (before the running one), 2 is dead on the server, 3 and 4 never started.
    assert result.requests == (Done((1,)), Later((3, 4), front=True))
    assert (result.charged, result.blamed_key) == (0, None)


def test_unordered_batch_mates_of_a_cancelled_job_go_back_uncharged() -> None:
    lease = running_slot(1, (1, 2, 3)).lease
    assert lease is not None
    result = settle(lease, [], reason="cancelled", blame=False, ordered=False, running=None,
                    gone=frozenset({3}), policy=None, reply_to=None, rng=random.Random(1))
    assert result.requests == (Later((1, 2)),)
