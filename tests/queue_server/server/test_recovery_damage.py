"""Recovery's rules for damage, on real files in-process (queue_server/server/recovery.py):
what follows damage is counted but never executed, a gap in the log chain is damage, a
frame applies whole or not at all, and refusing changes nothing on disk."""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest

from queue_server.server import records
from queue_server.server.errors import DataCorrupt
from queue_server.server.persistence import DataDir
from queue_server.server.store import Store


def _frame(body: bytes) -> bytes:
    return b"#%d %08x\n" % (len(body), zlib.crc32(body)) + body


def _crashed_with(path: Path, chunks: list[bytes]) -> Path:
    """A data dir whose log holds one frame per chunk, left as after kill -9."""
    data_dir = DataDir(path, fsync="always")
    data_dir.lock()
    store, _ = data_dir.recover(Store, 0.0)
    data_dir.start(store)
    for chunk in chunks:
        data_dir.append(chunk)
    data_dir.fsync_log()
    os.close(data_dir._lock_fd)  # no close(): as after kill -9
    return path / f"log-{data_dir.seq}.log"


def _listing(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in path.iterdir() if p.name != "LOCK"}


def test_a_job_whose_data_is_a_valid_frame_is_counted_after_damage_but_never_executed(
        tmp_path: Path) -> None:
    forged = _frame(records.put("stolen", 9, b"forged", None, None))
    log = _crashed_with(tmp_path, [
        records.put("q", 0, b"one", None, None),
        records.put("q", 0, forged, None, None),  # a producer's data: a complete frame
        records.put("q", 0, b"three", None, None),
    ])
    blob = bytearray(log.read_bytes())
    carrier = blob.index(b"#", 1)
    blob[carrier + 1] = ord("9")  # the carrier frame's length: the scan meets the forgery
    log.write_bytes(bytes(blob))
    before = _listing(tmp_path)
    with pytest.raises(DataCorrupt, match=r"frame 2 of the file.*2 valid frame\(s\)"):
        DataDir(tmp_path).recover(Store, 1.0)
    assert _listing(tmp_path) == before  # refusing changes nothing
    store, report = DataDir(tmp_path).recover(Store, 1.0, repair=True)
    assert store.totals("q").jobs == 1 and "stolen" not in store.queues
    assert report.repairs and (tmp_path / (log.name + ".corrupt")).exists()


def test_a_missing_log_between_the_snapshot_and_a_later_log_is_damage(tmp_path: Path) -> None:
    log = _crashed_with(tmp_path, [records.put("q", 0, b"one", None, None)])
    seq = int(log.stem.split("-")[1])
    later = tmp_path / f"log-{seq + 1}.log"
    later.write_bytes(_frame(records.put("q", 0, b"two", None, None)))
    log.unlink()
    with pytest.raises(DataCorrupt, match=f"log-{seq}.log is missing"):
        DataDir(tmp_path).recover(Store, 1.0)
    store, report = DataDir(tmp_path).recover(Store, 1.0, repair=True)
    assert store.totals().jobs == 0 and not later.exists() and report.repairs


def test_a_checked_last_frame_with_a_bad_record_applies_none_of_its_records(tmp_path: Path) -> None:
    log = _crashed_with(tmp_path, [
        records.put("q", 0, b"kept", None, None),
        records.put("q", 0, b"not half", None, None) + b"SYNC NONSENSE\r\n",
    ])
    store, report = DataDir(tmp_path).recover(Store, 1.0)
    assert store.totals("q").jobs == 1  # the whole last frame went, not half of it
    assert any("torn tail" in problem for problem in report.problems), report.problems
    assert log.with_name(log.name + ".corrupt").exists()
