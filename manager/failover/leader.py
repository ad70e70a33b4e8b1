"""One active manager per database: a PostgreSQL advisory lock, or a file lock next to the SQLite file.

The lock dies with its holder (the kernel drops a dead process's flock; PostgreSQL ends
the session when its connection closes), so a standby polling for it takes over within
one poll interval of the active manager's death.

The lock is taken on the database (manager/storage/database_identity.py), never on the URL's
spelling: every URL naming one SQLite file takes the lock next to its resolved path.
An election attempt has three outcomes, kept apart in the log: this process holds the
lease, another manager holds it, or the database cannot be reached (a standby that
cannot see the database must not say that another manager is active).
Other work that must happen under the lease (a primary/epoch row) takes a `Lease` and
checks `still_held()`; `try_acquire` is the one election step.
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

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from manager.storage.database_identity import DatabaseIdentity, identify

log = logging.getLogger(__name__)

LOCK_NAME = "slotmap.manager"
POLL_S = 0.5
# A PostgreSQL server that does not answer (a dropped route) must not hold a standby's
# election for the kernel's TCP timeout (minutes): it is reported as unreachable.
CONNECT_TIMEOUT_S = 10
# An outage that lasts is said again at this interval, not at every poll.
UNREACHABLE_REMINDER_S = 60.0


class DatabaseUnreachable(Exception):
    """The election could not ask the database (connection refused, no route, a lock file
    that cannot be opened): nobody can tell whether another manager is active."""


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
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise DatabaseUnreachable(f"cannot open the lock file {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as exc:
            os.close(fd)
            raise DatabaseUnreachable(f"cannot lock {path}: {exc.strerror}") from exc
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
        # libpq's connect_timeout (psycopg 3 and 2); other drivers keep their own.
        libpq = make_url(url).get_driver_name() in ("psycopg", "psycopg2", "psycopg2cffi")
        engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
                               connect_args={"connect_timeout": CONNECT_TIMEOUT_S} if libpq else {})
        try:
            connection = engine.connect()
        except SQLAlchemyError as exc:
            engine.dispose()
            raise DatabaseUnreachable(_first_line(exc)) from exc
        try:
            scope = connection.execute(text("SELECT current_database(), current_schema()")).one()
            key = lock_key(f"{LOCK_NAME}:{scope[0]}:{scope[1]}")
            got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": key}).scalar()
        except SQLAlchemyError as exc:
            connection.close()
            engine.dispose()
            raise DatabaseUnreachable(_first_line(exc)) from exc
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
    """The lock file of a SQLite file URL: next to the file's resolved path, so that every
    spelling of it (driver, relative, absolute, symlinked) shares it; None otherwise."""
    return _lock_path(identify(url))


def _lock_path(database: DatabaseIdentity) -> Path | None:
    real = database.real_path
    return None if real is None else real.with_name(real.name + ".lock")


def try_acquire(url: str) -> Lease | None:
    """This process's lease, or None when another process holds it. DatabaseUnreachable
    when the database cannot be asked; ValueError for a database without an election."""
    database = identify(url)
    if database.kind == "postgresql":
        return AdvisoryLease.try_acquire(url)
    path = _lock_path(database)
    return NoLease() if path is None else FileLease.try_acquire(path)


def held_lock(url: str) -> str:
    """The lock another manager holds, with its pid when the lock file tells it."""
    path = lock_path(url)
    if path is None:
        return "the PostgreSQL advisory lock"
    try:
        pid = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        pid = ""
    return f"file lock {path}" + (f", pid {pid}" if pid.isdigit() else "")


def wait_for_lease(
    url: str, *, stopping: Callable[[], bool], poll_s: float = POLL_S
) -> Lease | None:
    """Block until this process holds the lease (None when `stopping()` turns true first).

    Each change of what the election sees is logged once: another manager active, the
    database unreachable (with the reason, again when the reason changes, and once a
    minute while it lasts), reachable again.
    """
    seen: str | None = None
    unreachable_since = 0.0
    reminded_at = 0.0
    while not stopping():
        try:
            lease = try_acquire(url)
        except DatabaseUnreachable as exc:
            now = time.monotonic()
            reason = str(exc)
            if seen != f"unreachable: {reason}":
                log.warning("cannot reach the database to elect the manager: %s; retrying every "
                            "%.1f s (no manager can be elected until it answers)", reason, poll_s)
                if seen is None or not seen.startswith("unreachable"):
                    unreachable_since = now
                seen, reminded_at = f"unreachable: {reason}", now
            elif now - reminded_at >= UNREACHABLE_REMINDER_S:
                log.warning("still cannot reach the database (for %.0f s): %s", now - unreachable_since, reason)
                reminded_at = now
            time.sleep(poll_s)
            continue
        if lease is not None:
            return lease
        if seen != "held":
            if seen is not None and seen.startswith("unreachable"):
                log.info("the database answers again")
            log.info("another manager is active (it holds the %s); standing by (polling every %.1f s)",
                     held_lock(url), poll_s)
            seen = "held"
        time.sleep(poll_s)
    return None


def _first_line(exc: BaseException) -> str:
    """A driver error's first line: the reason, without SQLAlchemy's background link."""
    original = getattr(exc, "orig", None)
    return (str(original) if original is not None else str(exc)).strip().splitlines()[0]
