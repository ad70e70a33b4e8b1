"""The queue servers' authority record in the cluster database (table queue_authority):
the primary and the epoch. Every change is a compare-and-set on the epoch the caller
read, so a manager that lost its lock without noticing yet changes nothing (docs/DESIGN.md
"Failover that loses nothing"). No consensus of our own: the database decides.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from manager.storage.db import QueueAuthority

ROW_ID = 1


@dataclass(frozen=True, slots=True)
class Record:
    epoch: int
    primary: str  # HOST:PORT
    in_sync: bool
    sync_replicas: tuple[str, ...]
    # The confirmations the primary waits for before it acknowledges, as it reported them
    # in ROLE (0: async); None: not reported (an older server, or a record written before
    # this was kept) and the manager's config stands in. What a promotion is judged by.
    min_sync_replicas: int | None = None


def read(engine: Engine) -> Record | None:
    with Session(engine) as session:
        row = session.scalars(select(QueueAuthority).where(QueueAuthority.id == ROW_ID)).first()
        if row is None:
            return None
        replicas = tuple(r for r in row.sync_replicas.split(",") if r)
        return Record(row.epoch, row.primary, row.in_sync, replicas, row.min_sync_replicas)


def take_over(engine: Engine, seen: Record | None, new: Record) -> Record | None:
    """The record `new` in place of `seen` (None: no record yet), if the record is still
    `seen`: the first record, or one above every epoch the servers report (a new or restored
    database, manager/failover/takeover.py). None if another manager changed it first."""
    values = dict(epoch=new.epoch, primary=new.primary, in_sync=new.in_sync,
                  sync_replicas=",".join(new.sync_replicas), min_sync_replicas=new.min_sync_replicas,
                  updated_at_unix=time.time())
    if seen is None:
        try:
            with Session(engine) as session, session.begin():
                session.add(QueueAuthority(id=ROW_ID, **values))
        except IntegrityError:
            return None
        return new
    with Session(engine) as session, session.begin():
        changed = session.execute(
            update(QueueAuthority)
            .where(QueueAuthority.id == ROW_ID, QueueAuthority.epoch == seen.epoch)
            .values(**values))
        return new if _rows(changed) == 1 else None


def promote(engine: Engine, seen: Record, primary: str, min_sync_replicas: int | None) -> Record | None:
    """Epoch + 1 with `primary` (which said it waits for `min_sync_replicas`), if the record
    is still `seen`; the new record or None. `in_sync` is compared too: a primary's fallback
    to async recorded after `seen` was read (by a manager that has not yet noticed it lost
    its lock) makes the promotion fail."""
    new = Record(seen.epoch + 1, primary, True, (), min_sync_replicas)
    with Session(engine) as session, session.begin():
        changed = session.execute(
            update(QueueAuthority)
            .where(QueueAuthority.id == ROW_ID, QueueAuthority.epoch == seen.epoch,
                   QueueAuthority.in_sync == seen.in_sync)
            .values(epoch=new.epoch, primary=primary, in_sync=True, sync_replicas="",
                    min_sync_replicas=min_sync_replicas, updated_at_unix=time.time()))
        return new if _rows(changed) == 1 else None


def note_sync(engine: Engine, seen: Record, in_sync: bool, replicas: tuple[str, ...],
              min_sync_replicas: int | None) -> Record | None:
    """Which replicas were in sync at the last look, whether any is, and how many
    confirmations the primary waits for (same epoch only)."""
    with Session(engine) as session, session.begin():
        changed = session.execute(
            update(QueueAuthority)
            .where(QueueAuthority.id == ROW_ID, QueueAuthority.epoch == seen.epoch)
            .values(in_sync=in_sync, sync_replicas=",".join(replicas),
                    min_sync_replicas=min_sync_replicas, updated_at_unix=time.time()))
        if _rows(changed) != 1:
            return None
    return Record(seen.epoch, seen.primary, in_sync, replicas, min_sync_replicas)


def _rows(result: object) -> int:
    """Rows an UPDATE changed (the compare-and-set won when 1)."""
    assert isinstance(result, CursorResult)
    return int(result.rowcount)
