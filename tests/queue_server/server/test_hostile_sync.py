"""The data directory keeps durability on by itself (queue_server/server/persistence.py): an everysec
log left unsynced too long is synced on the write path, and a snapshot that cannot start
changes nothing and is tried again later instead of wedging the snapshot machinery."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from queue_server.server import persistence
from queue_server.server.persistence import DataDir
from queue_server.server.store import Store

CHUNK = b"SYNC DONE 1\r\n"


def _started(path: Path, fsync: persistence.FsyncPolicy, **kwargs: int) -> DataDir:
    data_dir = DataDir(path, fsync=fsync, **kwargs)
    data_dir.lock()
    store, _ = data_dir.recover(Store, 0.0)
    data_dir.start(store)
    return data_dir


def test_everysec_syncs_on_the_write_path_when_the_periodic_sync_is_overdue(tmp_path, caplog):
    data_dir = _started(tmp_path, "everysec")
    try:
        data_dir.append(CHUNK)
        assert data_dir._unsynced
        data_dir._unsynced_since -= persistence.SYNC_OVERDUE_S + 1  # as if the sync never ran
        with caplog.at_level(logging.WARNING, logger="slotmap.queue_server.persistence"):
            data_dir.append(CHUNK)
        assert "not synced for" in caplog.text
        assert data_dir._unsynced_since > 0 and not caplog.records[1:]
    finally:
        data_dir.close()


def test_everysec_does_not_sync_on_the_write_path_while_on_schedule(tmp_path, caplog):
    data_dir = _started(tmp_path, "everysec")
    try:
        with caplog.at_level(logging.WARNING, logger="slotmap.queue_server.persistence"):
            for _ in range(100):
                data_dir.append(CHUNK)
        assert "not synced" not in caplog.text
        assert data_dir.sync_if_needed()
    finally:
        data_dir.close()


def test_a_snapshot_that_cannot_open_its_new_log_changes_nothing_and_is_retried_later(tmp_path, caplog):
    data_dir = _started(tmp_path, "always", snapshot_log_bytes=4096)
    try:
        while not data_dir.wants_snapshot():
            data_dir.append(CHUNK * 50)
        seq = data_dir.seq
        (tmp_path / f"log-{seq + 1}.log").mkdir()  # open(O_WRONLY) of it fails: EISDIR
        with caplog.at_level(logging.ERROR, logger="slotmap.queue_server.persistence"):
            assert data_dir.snapshot_in_background(Store()) is False
        assert "could not start" in caplog.text
        assert data_dir.seq == seq
        assert not data_dir.wants_snapshot()  # not before SNAPSHOT_RETRY_S
        data_dir.append(CHUNK)  # the old log goes on
        data_dir.fsync_log()
        (tmp_path / f"log-{seq + 1}.log").rmdir()
        data_dir._snapshot_retry_at = 0.0  # the retry time has come
        assert data_dir.wants_snapshot()
        assert data_dir.snapshot_in_background(Store()) is True
        assert data_dir.seq == seq + 1
        child = data_dir._snapshot_child
        assert child is not None
    finally:
        data_dir.close()
    assert (tmp_path / f"snapshot-{seq + 1}.snap").exists()
    with pytest.raises(ChildProcessError):
        os.waitpid(child, os.WNOHANG)  # the snapshot child was reaped by close()
