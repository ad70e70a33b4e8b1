"""The log is preallocated: after a crash its unwritten zeros are a clean end, not damage."""
from __future__ import annotations

from pathlib import Path

from queue_server.server import records
from queue_server.server.persistence import DataDir
from queue_server.server.store import Store


def _crash_after_puts(path: Path, count: int) -> Path:
    data_dir = DataDir(path, fsync="always")
    data_dir.lock()
    store, _report = data_dir.recover(Store, 0.0)
    data_dir.start(store)
    for n in range(count):
        data_dir.append(records.put("q", 0, b"job %d" % n, None, None))
    data_dir.fsync_log()
    log = path / f"log-{data_dir.seq}.log"
    assert log.stat().st_size > len(log.read_bytes().rstrip(b"\0"))  # zeros after the data
    return log  # no close(): as after kill -9


def test_zeros_after_the_last_frame_are_a_clean_end_after_a_crash(tmp_path: Path) -> None:
    _crash_after_puts(tmp_path, 5)
    store, report = DataDir(tmp_path).recover(Store, 1.0)
    assert report.problems == []
    assert store.totals("q").jobs == 5


def test_garbage_after_the_zeros_is_still_reported(tmp_path: Path) -> None:
    log = _crash_after_puts(tmp_path, 3)
    with log.open("ab") as file:
        file.write(b"garbage")
    store, report = DataDir(tmp_path).recover(Store, 1.0)
    assert any("bad frame header" in problem for problem in report.problems)
    assert store.totals("q").jobs == 3


def test_a_clean_close_gives_the_unused_space_back(tmp_path: Path) -> None:
    data_dir = DataDir(tmp_path, fsync="always")
    data_dir.lock()
    store, _ = data_dir.recover(Store, 0.0)
    data_dir.start(store)
    data_dir.append(records.put("q", 0, b"x", None, None))
    data_dir.close()
    log = tmp_path / f"log-{data_dir.seq}.log"
    assert log.stat().st_size == len(log.read_bytes().rstrip(b"\0")) > 0
