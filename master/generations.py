"""A code reload's roll from one generation of slots to the next (pure).

The master imports the new code, forks one trial process that runs each served handler's
setup() (master/reloading.py), and only then rolls: per queue, one slot of an old generation
at a time is asked to stop (SIGTERM: it finishes the job it runs, gives the unstarted jobs
of its batch back to the head of the queue uncharged, and exits), and the slot map forks
its replacement from the new code. The next old slot of that queue is asked only when no
old one of the queue is still on its way out and no new one is still starting, so a queue
of n slots keeps n - 1 serving all along (uWSGI's chain reload, per queue), and a queue of
one slot is without one only between the old slot's exit and the new one's fork.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum, auto

from master.lifecycle import SERVING, Slot, SlotState

LEAVING = frozenset({SlotState.DRAINING, SlotState.STOPPING})


class ReloadPhase(StrEnum):
    IDLE = auto()
    # The new code is imported on a thread (master/background_import.py); no fork meanwhile.
    IMPORTING = auto()
    # The new code is imported; its trial process runs the handlers' setup().
    TRYING = auto()
    # The trial passed: old slots are being replaced one per queue at a time.
    ROLLING = auto()


@dataclass(frozen=True, slots=True)
class Trial:
    pid: int
    deadline: float


def to_retire(slots: Iterable[Slot], generation: int) -> list[Slot]:
    """The old-generation slots to ask to stop now: at most one per queue, none for a queue
    with an old slot still leaving or a new slot still starting."""
    busy: set[str] = set()
    candidates: dict[str, Slot] = {}
    for slot in sorted(slots, key=lambda s: s.slot_id):
        queue = slot.assignment.queue
        old = slot.generation < generation
        if (old and slot.state in LEAVING) or (not old and slot.state is SlotState.STARTING):
            busy.add(queue)
        elif old and slot.state in SERVING:
            candidates.setdefault(queue, slot)
    return [slot for queue, slot in sorted(candidates.items()) if queue not in busy]


def rolled(slots: Iterable[Slot], generation: int) -> bool:
    """No slot of an older generation is left."""
    return all(slot.generation >= generation for slot in slots)
