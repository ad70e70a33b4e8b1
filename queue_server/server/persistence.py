"""The data directory: append-only log of SYNC records, snapshots that bound it, recovery.

Files: `snapshot-<n>.snap` holds the state at the moment `log-<n>.log` was started; logs
continue each other in order of `n`. A frame is `#<len> <crc32 hex>\\n<records>`, one per
group commit. Recovery (recovery.py) loads the newest snapshot and replays every later log
frame by frame: a torn tail is cut off, damage before valid frames stops the start. One
generation before the newest snapshot is kept as a fallback for `--repair`; a state
replaced by CLONE or a replica's sync has none (its older logs go at once).
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from queue_server.server import lease_ids, snapshot
from queue_server.server.errors import DataDirLocked
from queue_server.server.recovery import Recovery, RecoveryReport, data_files, fsync_dir
from queue_server.server.store import Store

log = logging.getLogger("slotmap.queue_server.persistence")

FsyncPolicy = Literal["always", "everysec", "never"]
LOG_PREALLOCATE_BYTES = 16 * 1024 * 1024
# A snapshot that could not start or failed is tried again after this (Redis waits 5 s too).
SNAPSHOT_RETRY_S = 5.0
# everysec: a log left unsynced this long (the periodic sync is late or not running) is
# synced on the write path before anything more is acknowledged.
SYNC_OVERDUE_S = 2.0


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pwrite_rest(fd: int, data: bytes, offset: int) -> None:
    """The rest of `data` after a short pwrite at `offset` (the whole of it written again:
    pwrite at an offset is idempotent)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written


def write_snapshot_file(directory: Path, seq: int, store: Store) -> Path:
    """Write snapshot `seq` atomically (temp file, fsync, rename, fsync dir)."""
    final = directory / f"snapshot-{seq}.snap"
    temp = directory / f"snapshot-{seq}.snap.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, snapshot.encode(store))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, final)
    fsync_dir(directory)
    return final


class DataDir:
    def __init__(
        self, path: str | Path, *, fsync: FsyncPolicy = "always",
        snapshot_log_bytes: int = 256 * 1024 * 1024,
    ) -> None:
        self.path = Path(path)
        self.fsync_policy = fsync
        self.snapshot_log_bytes = snapshot_log_bytes
        self.seq = 0
        self._lock_fd = -1
        self._log_fd = -1
        self.log_bytes = 0  # written so far: the next frame goes here (read-only outside)
        self._log_allocated = 0  # bytes reserved with fallocate (-1: the file just grows)
        # A log is snapshotted away near snapshot_log_bytes: never reserve more than that.
        self._preallocate_bytes = min(LOG_PREALLOCATE_BYTES, snapshot_log_bytes)
        self._unsynced = False
        self._everysec = fsync == "everysec"
        self._unsynced_since = 0.0  # monotonic; meaningful while _unsynced (everysec only)
        self._snapshot_child: int | None = None
        self._snapshot_retry_at = 0.0  # monotonic: no snapshot is started before this

    # ------------------------------------------------------------ start-up

    def lock(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise DataDirLocked(f"{self.path} is in use by another queue server") from None
            raise

    def _files(self, kind: str) -> dict[int, Path]:
        return data_files(self.path, kind)

    def recover(self, new_store: Callable[[], Store], now: float, *,
                repair: bool = False) -> tuple[Store, RecoveryReport]:
        """Rebuild the state; running jobs come back ready (delivery is at least once).
        Raises DataCorrupt for damage that a repair must drop (recovery.py), unless
        `repair`, which drops it (keeping the bytes aside) and says so in the report."""
        recovery = Recovery(self.path, new_store, now, repair=repair)
        store = recovery.run()
        report = recovery.report
        store.drain_changes()  # rebuilt, not changed: nothing to log
        report.released_running = store.release_all_running(now)
        self.seq = max([*self._files("snapshot"), *self._files("log"), 0])
        if self.seq:  # a restart: ids a crash kept out of the log are never given again
            store.skip_ids(lease_ids.after_restart(store.next_id))
            report.next_id = store.next_id  # in the start-up snapshot (synced) before serving
        store.drain_changes()  # rebuilt, not changed: nothing to log
        store.woken.clear()
        store.idled.clear()
        return store, report

    def start(self, store: Store) -> None:
        """Snapshot the recovered state and open a fresh log after it."""
        self.seq += 1
        write_snapshot_file(self.path, self.seq, store)
        self._open_log()
        self._prune(keep_from=self.seq - 1)

    def _open_log(self) -> None:
        self._use_log(self._create_log(self.seq))

    def _create_log(self, seq: int) -> int:
        """Open (create) log `seq`, its directory entry durable; nothing changes on failure."""
        fd = os.open(self.path / f"log-{seq}.log", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fsync_dir(self.path)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _use_log(self, fd: int) -> None:
        self._log_fd = fd
        self.log_bytes = os.fstat(fd).st_size
        self._log_allocated = 0
        self._reserve(self._preallocate_bytes)

    def _prune(self, *, keep_from: int) -> None:
        """Drop files older than the generation before the newest snapshot."""
        snapshots = self._files("snapshot")
        older = [seq for seq in snapshots if seq < keep_from]
        if keep_from not in snapshots:
            return
        for seq in older:
            snapshots[seq].unlink(missing_ok=True)
        for seq, path in self._files("log").items():
            if seq < keep_from:
                path.unlink(missing_ok=True)

    # ------------------------------------------------------------ running

    def _reserve(self, size: int) -> None:
        """Preallocate log space: writing into it changes no file size, so fdatasync skips
        the size update (a third cheaper here). Zeros after the last frame mean "clean end"."""
        try:
            os.posix_fallocate(self._log_fd, self._log_allocated, size)
        except OSError as exc:  # a file system without fallocate: the file just grows
            log.info("log preallocation unavailable (%s); appending without it", exc.strerror)
            self._log_allocated = -1
            return
        self._log_allocated += size

    def append(self, chunk: bytes) -> None:
        """Write one group-commit frame (to the OS); `fsync_log` makes it durable."""
        frame = b"#%d %08x\n" % (len(chunk), zlib.crc32(chunk)) + chunk
        end = self.log_bytes + len(frame)
        if 0 <= self._log_allocated < end:
            self._reserve(max(self._preallocate_bytes, end - self._log_allocated))
        if os.pwrite(self._log_fd, frame, self.log_bytes) != len(frame):  # rare: a short write
            _pwrite_rest(self._log_fd, frame, self.log_bytes)
        self.log_bytes = end
        if self._everysec:
            self._keep_sync_schedule()
        self._unsynced = True

    def _keep_sync_schedule(self) -> None:
        """everysec without the periodic sync (late, or failing to run) must not mean never:
        past SYNC_OVERDUE_S the write path syncs before more is acknowledged. A failure
        raises OSError, which stops the server like a failed write."""
        now = time.monotonic()
        if not self._unsynced:
            self._unsynced_since = now
        elif now - self._unsynced_since > SYNC_OVERDUE_S:
            log.warning("the log was not synced for %.1f s (the periodic sync is late): "
                        "syncing before acknowledging more", now - self._unsynced_since)
            os.fdatasync(self._log_fd)
            self._unsynced_since = now

    def fsync_log(self) -> None:
        os.fdatasync(self._log_fd)

    def _close_log(self) -> None:
        """Sync, give back the unused preallocated tail, close."""
        os.fdatasync(self._log_fd)
        os.ftruncate(self._log_fd, self.log_bytes)
        os.close(self._log_fd)
        self._log_fd = -1

    def sync_if_needed(self) -> bool:
        """Sync what was written since the last sync; False if there was nothing."""
        if self._unsynced and self._log_fd >= 0:
            os.fdatasync(self._log_fd)
            self._unsynced = False
            return True
        return False

    def wants_snapshot(self) -> bool:
        return (self.log_bytes >= self.snapshot_log_bytes and self._snapshot_child is None
                and time.monotonic() >= self._snapshot_retry_at)

    def snapshot_in_background(self, store: Store) -> bool:
        """Fork: the child writes the state as of now; the parent continues on a new log.

        False when it could not start (no descriptor for the new log, no process): logged,
        nothing changed, the old log goes on and wants_snapshot() says yes again after
        SNAPSHOT_RETRY_S. OSError when the log itself could not be synced or closed.
        """
        new_seq = self.seq + 1
        try:
            new_fd = self._create_log(new_seq)
        except OSError as exc:
            return self._snapshot_not_started(new_seq, exc)
        try:
            os.fdatasync(self._log_fd)
            pid = os.fork()
        except OSError as exc:
            os.close(new_fd)
            (self.path / f"log-{new_seq}.log").unlink(missing_ok=True)
            if exc.errno in (errno.EAGAIN, errno.ENOMEM):  # fork: try again later
                return self._snapshot_not_started(new_seq, exc)
            raise
        if pid == 0:  # the child: copy-on-write view of the store
            code = 1
            try:
                write_snapshot_file(self.path, new_seq, store)
                code = 0
            except BaseException:
                log.exception("background snapshot %d failed; the logs still hold everything", new_seq)
            finally:
                os._exit(code)
        self._snapshot_child = pid
        self._close_log()
        self.seq = new_seq
        self._use_log(new_fd)
        log.info("snapshot %d being written by process %d", new_seq, pid)
        return True

    def _snapshot_not_started(self, seq: int, exc: OSError) -> bool:
        self._snapshot_retry_at = time.monotonic() + SNAPSHOT_RETRY_S
        log.error("snapshot %d could not start (%s); the log goes on growing, next try in "
                  "%.0f s", seq, exc, SNAPSHOT_RETRY_S)
        return False

    def rotate_with_snapshot(self, store: Store) -> None:
        """After CLONE: the new state is written at once and a new log follows it. The
        older logs go at once: an older snapshot plus them would not lead to this state, so
        a repair must never fall back over them (recovery.py)."""
        self._close_log()
        self.seq += 1
        write_snapshot_file(self.path, self.seq, store)
        for seq, path in self._files("log").items():
            if seq < self.seq:
                path.unlink(missing_ok=True)
        self._open_log()
        if self._snapshot_child is None:
            self._prune(keep_from=self.seq - 1)

    def reap_snapshot(self) -> None:
        if self._snapshot_child is None:
            return
        try:
            pid, status = os.waitpid(self._snapshot_child, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its outcome is unknown, keep the logs
            log.error("snapshot %d: its process %d is gone unreaped by us; logs kept",
                      self.seq, self._snapshot_child)
            self._snapshot_child = None
            return
        if pid == 0:
            return
        self._snapshot_child = None
        if os.waitstatus_to_exitcode(status) == 0:
            self._prune(keep_from=self.seq - 1)
        else:
            self._snapshot_retry_at = time.monotonic() + SNAPSHOT_RETRY_S
            log.error("background snapshot %d failed (status %d); logs kept, next try in %.0f s",
                      self.seq, status, SNAPSHOT_RETRY_S)

    def close(self, *, sync: bool = True) -> None:
        """Sync and close the log (sync=False after the log failed: just let go of it)."""
        if self._log_fd >= 0:
            if sync:
                self._close_log()
            else:
                os.close(self._log_fd)
                self._log_fd = -1
        if self._snapshot_child is not None:
            deadline = time.monotonic() + 30
            while self._snapshot_child is not None and time.monotonic() < deadline:
                self.reap_snapshot()
                time.sleep(0.01)
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
