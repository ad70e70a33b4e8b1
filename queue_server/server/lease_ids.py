"""Lease ids that name one hand-out in the cluster's whole history (issue 25, point 2).

A job's id is given anew on every hand-out and is all a DONE, FAIL, LATER or TOUCH names,
so an id given twice lets a stale outcome hit another job: a deposed primary's hand-out
and the new primary's, or a hand-out a crash kept out of the log and the same id given
again after the restart. Ids are therefore split into *eras* of ERA_IDS ids:

    id = era * ERA_IDS + n          era = epoch * EPOCH_ERAS + generation

An era is used by one server only, and a server takes a new one whenever what it knew
of the ids may be stale or shared:
- at start-up, after recovery, when the data directory held anything (`after_restart`):
  the next era after the largest id it recovered, written to the start-up snapshot
  (synced) before it serves, so ids a crash kept out of the log are never given again;
- when it starts serving in a manager's epoch (`for_epoch`: LEASE, PROMOTE): the first
  era of that epoch, unless it is in it already. A deposed primary, still in its older
  epoch, stays below every era of the new one, however often it restarts (EPOCH_ERAS
  restarts or ERA_IDS * EPOCH_ERAS = 10**13 hand-outs in one epoch);
- on an unmanaged self-promotion (`for_self_promotion`): the first era of the next
  block of EPOCH_ERAS, as if a new epoch, since nothing records whose turn it is.

The counter just runs on from one era into the next (no check on the hot path: the era
is the id's leading digits). A jump makes no record of its own: replicas apply the ids
the primary gave (SYNC GET), recovery replays them, and snapshots carry the counter
(SYNC IDS), so the ids stay replicated and recovered as before; a jump nobody saw an id
of protects nothing yet. A client sees an opaque positive integer of at most 18 digits, as always
(ID_MAX). Pure logic.
"""
from __future__ import annotations

from typing import Final

from queue_server.protocol.numbers import ID_MAX

ERA_IDS: Final = 10**8
EPOCH_ERAS: Final = 10**5
LAST_ERA: Final = ID_MAX // ERA_IDS  # 10**10 - 1: epochs up to 99,999 have eras of their own


def era_of(next_id: int) -> int:
    """The era of the largest id given out so far (next_id is one past it)."""
    return (next_id - 1) // ERA_IDS


def first_id(era: int) -> int:
    """The next id once `era` starts (era 0 starts at 1: 0 is never a job's id)."""
    return max(1, min(era, LAST_ERA) * ERA_IDS)


def after_restart(next_id: int) -> int:
    """The next id after a restart: the first of the era after the last one used."""
    return first_id(era_of(next_id) + 1)


def for_epoch(next_id: int, epoch: int) -> int:
    """The next id for serving in the manager's `epoch`: its first era, or `next_id` if
    this server is in that epoch's eras (or past them) already."""
    return max(next_id, first_id(epoch * EPOCH_ERAS))


def for_self_promotion(next_id: int) -> int:
    """The next id after an unmanaged replica promoted itself: the next block of eras."""
    return first_id((era_of(next_id) // EPOCH_ERAS + 1) * EPOCH_ERAS)
