"""A silent slot judged by the kernel's word (master/silence.py): busy in C code, or hung."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

from polling import poll_until
from test_lifecycle import ASSIGNMENT, LIMITS, beacon, running_slot

from master.lifecycle import Beaconed, Hung, OverMemory, Slot, check, on_event
from master.silence import Vitals, judge, read_vitals
from slot.beacon import SlotPhase

# LIMITS: 3 beacons of 0.2 s; the running slot's last beacon came at 100.1.
SILENT_AT = 100.8


def silent_hung(slot: Slot, now: float) -> Hung:
    event = check(slot, now, LIMITS)
    assert isinstance(event, Hung) and event.silent, event
    return event


def vitals(cpu_ticks: int, *, runnable: bool = True, private_dirty_bytes: int = 0) -> Vitals:
    return Vitals(cpu_ticks=cpu_ticks, runnable=runnable, private_dirty_bytes=private_dirty_bytes)


def test_a_silent_slot_whose_cpu_time_grows_is_busy_and_gets_another_allowance() -> None:
    slot = running_slot()
    assert judge(slot, silent_hung(slot, SILENT_AT), vitals(50), SILENT_AT, LIMITS) is None
    assert check(slot, SILENT_AT + 0.5, LIMITS) is None  # within its new allowance
    later = SILENT_AT + 0.7
    assert judge(slot, silent_hung(slot, later), vitals(120), later, LIMITS) is None


def test_a_silent_slot_whose_cpu_time_stopped_growing_is_hung() -> None:
    slot = running_slot()
    assert judge(slot, silent_hung(slot, SILENT_AT), vitals(50), SILENT_AT, LIMITS) is None
    later = SILENT_AT + 0.7
    event = judge(slot, silent_hung(slot, later), vitals(50), later, LIMITS)
    assert isinstance(event, Hung) and "no CPU time used for 0.70 s" in event.reason, event
    assert "no beacon for 1.40 s" in event.reason


def test_a_stopped_or_vanished_silent_slot_is_hung_at_the_first_look() -> None:
    slot = running_slot()
    hung = silent_hung(slot, SILENT_AT)
    assert judge(slot, hung, vitals(50, runnable=False), SILENT_AT, LIMITS) is hung
    assert judge(slot, hung, None, SILENT_AT, LIMITS) is hung


def test_a_busy_silent_slot_over_the_hard_memory_limit_is_killed_for_memory() -> None:
    slot = running_slot()
    event = judge(slot, silent_hung(slot, SILENT_AT), vitals(50, private_dirty_bytes=5000), SILENT_AT, LIMITS)
    assert event == OverMemory(5000, LIMITS.hard_memory_limit_bytes)


def test_a_batch_keeps_ageing_toward_its_timeout_while_its_slot_is_silent() -> None:
    slot = running_slot()
    slot.assignment = ASSIGNMENT.model_copy(update={"batch_timeout_s": 30.0})
    on_event(slot, Beaconed(beacon(phase=SlotPhase.BUSY, batch_age_s=1.0)), 101.0)
    slot.busy_seen_at = 131.0  # the kernel said busy: no beacon, CPU time growing
    event = check(slot, 131.0, LIMITS)
    assert isinstance(event, Hung) and not event.silent and "batch running 31.0 s" in event.reason, event


def test_read_vitals_sees_cpu_time_grow_and_a_stopped_process() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = read_vitals(spinner.pid)
        assert first is not None and first.runnable and first.private_dirty_bytes > 0
        poll_until(lambda: (now := read_vitals(spinner.pid)) is not None and now.cpu_ticks > first.cpu_ticks,
                   what="its CPU time grown")
        os.kill(spinner.pid, signal.SIGSTOP)
        poll_until(lambda: (now := read_vitals(spinner.pid)) is not None and not now.runnable,
                   what="seen stopped")
    finally:
        spinner.kill()
        spinner.wait()
    assert read_vitals(spinner.pid) is None
