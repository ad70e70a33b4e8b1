"""One active manager per database: a PostgreSQL advisory lock, or a file lock next to the SQLite file.

The lock dies with its holder (the kernel drops a dead process's flock; PostgreSQL ends
the session when its connection closes), so a standby polling for it takes over within
one poll interval of the active manager's death.
"""
from __future__ import annotations

import fcntl
import logging
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from manager.store import sqlite_path

log = logging.getLogger(__name__)

LOCK_NAME = "slotmap.manager"
POLL_S = 0.5


class Lease(Protocol):
    """Held leadership; `still_held()` is checked every loop turn of the active manager."""

    description: str

    def still_held(self) -> bool: ...

    def release(self) -> None: ...


class FileLease:
    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.description = f"file lock {path}"

    @classmethod
    def try_acquire(cls, path: Path) -> FileLease | None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return cls(path, fd)

    def still_held(self) -> bool:
        # Someone removing the file would let a second manager lock a fresh one.
        try:
            return os.stat(self.path).st_ino == os.fstat(self.fd).st_ino
        except OSError:
            return False

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class AdvisoryLease:
    """pg_try_advisory_lock on a connection of its own, kept open while active."""

    def __init__(self, engine: Engine, connection: Connection, key: int) -> None:
        self.engine = engine
        self.connection = connection
        self.key = key
        self.description = f"PostgreSQL advisory lock {key}"

    @classmethod
    def try_acquire(cls, url: str) -> AdvisoryLease | None:
        engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        connection = engine.connect()
        try:
            scope = connection.execute(text("SELECT current_database(), current_schema()")).one()
            key = lock_key(f"{LOCK_NAME}:{scope[0]}:{scope[1]}")
            got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar()
        except BaseException:
            connection.close()
            engine.dispose()
            raise
        if not got:
            connection.close()
            engine.dispose()
            return None
        return cls(engine, connection, key)

    def still_held(self) -> bool:
        try:
            self.connection.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            log.error("lost the database connection that holds the lock: %s", exc)
            return False
        return True

    def release(self) -> None:
        try:
            self.connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.key})
        except SQLAlchemyError as exc:
            log.warning("could not unlock (the session end unlocks it anyway): %s", exc)
        finally:
            self.connection.close()
            self.engine.dispose()


class NoLease:
    """In-memory SQLite: nothing to share, so nothing to elect."""

    description = "no lock (in-memory database)"

    def still_held(self) -> bool:
        return True

    def release(self) -> None:
        return None


def lock_key(name: str) -> int:
    """A stable signed 64-bit advisory lock key for `name`."""
    value = zlib.crc32(name.encode()) | (zlib.crc32(name[::-1].encode()) << 32)
    return value - (1 << 64) if value >= 1 << 63 else value


def lock_path(url: str) -> Path | None:
    database = sqlite_path(url)
    return None if database is None else database.with_name(database.name + ".lock")


def try_acquire(url: str) -> Lease | None:
    if url.startswith("postgresql"):
        return AdvisoryLease.try_acquire(url)
    if url.startswith("sqlite"):
        path = lock_path(url)
        return NoLease() if path is None else FileLease.try_acquire(path)
    raise ValueError(f"no leader election for {url.split(':', 1)[0]} databases (use sqlite or postgresql)")


def wait_for_lease(
    url: str, *, stopping: Callable[[], bool], poll_s: float = POLL_S
) -> Lease | None:
    """Block until this process holds the lease (None when `stopping()` turns true first)."""
    announced = False
    while not stopping():
        try:
            lease = try_acquire(url)
        except SQLAlchemyError as exc:
            log.warning("cannot reach the database to elect the manager (%s); retrying", exc)
            lease = None
        if lease is not None:
            return lease
        if not announced:
            log.info("another manager is active; standing by (polling every %.1f s)", poll_s)
            announced = True
        time.sleep(poll_s)
    return None
