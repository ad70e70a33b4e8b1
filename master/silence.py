"""A slot whose beacons stopped: hung, or busy in code that holds the GIL? The kernel says.

A slot's beacons come from a thread, and a thread needs the GIL. A handler in C code that
keeps it (sorted() of 3 million numbers: 3 s on the 2-core test machine; json.loads of 30 MB:
1 s; a long regex, most of pandas) silences a live slot as surely as a deadlock or a SIGSTOP.
Before this module such a slot was killed as "hung (no beacon for 0.60 s)" at every attempt
and its job charged each time, until it was dead: a job that sorts 3 million numbers could
never finish. gunicorn lives with the same blindness by waiting 30 s; we ask /proc instead,
and only about a slot that has been silent for its allowance (hung_after_beacons beacons):

- its CPU time grew since the master last looked: it is busy, not hung; it gets another
  allowance, its memory is read from /proc (smaps_rollup, as the slot reads its own) so the
  hard memory limit still holds, and its batch keeps ageing toward batch_timeout_s
  (master/lifecycle.py check), which ends a C loop that never returns;
- its CPU time did not grow, it is stopped (SIGSTOP, a debugger) or gone: hung, killed.

The first look at a silent slot only takes the baseline, so a deadlocked slot is killed after
two allowances instead of one (1.2 s by default).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from master.lifecycle import Hung, Limits, OverMemory, Slot, SlotEvent, check
from slot.memory import read_memory

# /proc/<pid>/stat states of a process that cannot be making progress: stopped, traced,
# zombie, dead.
_STOPPED = frozenset("TtZXx")


@dataclass(frozen=True, slots=True)
class Vitals:
    """What the kernel says of a silent slot."""

    cpu_ticks: int
    # False: stopped, traced or a zombie (its CPU time cannot grow).
    runnable: bool
    private_dirty_bytes: int


def read_vitals(pid: int) -> Vitals | None:
    """The slot's CPU time (user + system, clock ticks), state and Private_Dirty; None when
    it is gone (it is reaped on the next turn)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    try:
        private_dirty_bytes = read_memory(pid).private_dirty_bytes
    except (FileNotFoundError, ProcessLookupError):
        return None
    except PermissionError:
        # A slot whose handler changed its user: its memory is not ours to read, its CPU time
        # still is (stat is world-readable); the hard limit waits for its next beacon.
        private_dirty_bytes = 0
    # The command name (field 2) may hold spaces and parentheses: the fields after it start
    # past the last ')'. Then: state (3), ..., utime (14), stime (15).
    fields = stat[stat.rindex(b")") + 2:].split()
    return Vitals(cpu_ticks=int(fields[11]) + int(fields[12]),
                  runnable=fields[0].decode() not in _STOPPED,
                  private_dirty_bytes=private_dirty_bytes)


def judge(slot: Slot, silent: Hung, vitals: Vitals | None, now: float, limits: Limits) -> SlotEvent | None:
    """The event for `slot`, silent past its allowance (`silent`), given `vitals` (pure but for
    the look it records on `slot`): None while its CPU time grows."""
    if vitals is None or not vitals.runnable:
        return silent
    if slot.cpu_ticks is not None and vitals.cpu_ticks <= slot.cpu_ticks:
        if slot.busy_seen_at > slot.last_beacon_at:
            return Hung(f"{silent.reason}, and no CPU time used for {now - slot.busy_seen_at:.2f} s",
                        silent=True)
        return silent
    slot.cpu_ticks = vitals.cpu_ticks
    slot.busy_seen_at = now
    if vitals.private_dirty_bytes > limits.hard_memory_limit_bytes:
        return OverMemory(vitals.private_dirty_bytes, limits.hard_memory_limit_bytes)
    return None


def due_events(slots: Iterable[Slot], now: float, limits: Limits) -> Iterator[tuple[Slot, SlotEvent]]:
    """What the clock and the beacons imply for each slot now (the master's kill_hung): a
    silent slot may be busy in code that holds the GIL, so the kernel is asked first (judge)."""
    for slot in list(slots):
        event = check(slot, now, limits)
        if isinstance(event, Hung) and event.silent:
            event = judge(slot, event, read_vitals(slot.pid), now, limits)
        if event is not None:
            yield slot, event
