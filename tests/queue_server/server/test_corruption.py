"""Corruption is never silent (issue 16): damage before valid frames, or in a snapshot, stops
the start with the file, the offset and what a repair drops; `--repair` keeps the bad bytes
aside and the valid prefix; a torn tail stays automatic. Real servers, real files."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.queue_server.server_proc import (
    EXIT_DEADLINE_S,
    REPO_ROOT,
    launch_queue_server,
    slotmap_command,
)
from tests.queue_server.util import drain, poll_until, put_ok, total

ALWAYS = ("--fsync", "always")
FRAME = re.compile(rb"#(\d+) ([0-9a-f]{8})\n")
STARTUP_S = 30.0  # a busy CI machine


def _frames(log: Path) -> list[int]:
    """Where each frame of the log starts."""
    blob = log.read_bytes()
    starts, position = [], 0
    while (head := FRAME.match(blob, position)) is not None:
        starts.append(position)
        position = head.end() + int(head.group(1))
    return starts


def _log_of(data_dir: Path) -> Path:
    logs = sorted(data_dir.glob("log-*.log"), key=lambda p: int(p.stem.split("-")[1]))
    return logs[-1]


def _job(n: int) -> bytes:
    """200 bytes: 100 of them span several 4 KiB pages."""
    return (b"job %03d " % n).ljust(200, b"x")


def _hundred_jobs(start_queue_server) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A data dir whose newest log holds 100 PUTs, one frame each (each acknowledged before
    the next is sent), left as after kill -9."""
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    for n in range(100):
        put_ok(client, "q", 0, _job(n))
    server.kill()
    log = _log_of(server.data_dir)
    assert len(_frames(log)) == 100
    return server.data_dir, log


def _refused(tmp_path: Path, data_dir: Path) -> tuple[int, str]:
    """Start a server on `data_dir`: it must exit (it binds its port before recovering, so
    listening proves nothing; one that serves instead fails the poll)."""
    launch = launch_queue_server(tmp_path, *ALWAYS, data_dir=data_dir, name="refused")
    try:
        poll_until(lambda: launch.process.poll() is not None, STARTUP_S,
                   what=lambda: f"the server refuses to start; its output:\n{launch.log_text()}")
        return launch.process.returncode, launch.log_text()
    finally:
        launch.kill()


def _repair(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*slotmap_command(), "queue-server", "--repair", "--data-dir",
                           str(data_dir)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                          timeout=STARTUP_S + EXIT_DEADLINE_S, check=False)


def _jobs(start_queue_server, data_dir: Path) -> list[bytes]:  # type: ignore[no-untyped-def]
    server = start_queue_server(*ALWAYS, data_dir=data_dir)
    return [job.data for job in drain(server.connect(), "q")]


def test_a_flipped_bit_mid_log_stops_the_start_naming_file_offset_and_what_a_repair_drops(
        start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    data_dir, log = _hundred_jobs(start_queue_server)
    tenth = _frames(log)[9]
    with log.open("r+b") as file:  # a bit of frame 10's job data
        file.seek(tenth + 100)
        byte = file.read(1)
        file.seek(-1, 1)
        file.write(bytes([byte[0] ^ 0x10]))
    before = log.read_bytes()
    code, output = _refused(tmp_path, data_dir)
    assert code == 3
    assert f"{log.name}: frame checksum mismatch at byte {tenth} (frame 10 of the file)" in output
    assert "90 valid frame(s) with 90 record(s) (90 PUT)" in output
    assert "--repair" in output
    assert log.read_bytes() == before  # refusing changes nothing


def test_repair_keeps_the_bad_bytes_aside_reports_the_drop_and_the_prefix_comes_back(
        start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    data_dir, log = _hundred_jobs(start_queue_server)
    tenth = _frames(log)[9]
    blob = log.read_bytes()
    end = len(blob.rstrip(b"\0"))
    with log.open("r+b") as file:
        file.seek(tenth + 20)
        file.write(bytes([blob[tenth + 20] ^ 0x01]))
    repaired = _repair(data_dir)
    assert repaired.returncode == 0, repaired.stderr
    assert f"at byte {tenth}" in repaired.stdout and "90 valid frame(s)" in repaired.stdout
    assert "9 waiting jobs" in repaired.stdout
    kept = log.with_name(log.name + ".corrupt").read_bytes()
    assert len(kept) == end - tenth and kept[21:] == blob[tenth + 21:end]
    assert _jobs(start_queue_server, data_dir) == [_job(n) for n in range(9)]


def test_a_zeroed_4k_page_mid_log_stops_the_start_and_repair_recovers_the_prefix(
        start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    data_dir, log = _hundred_jobs(start_queue_server)
    frames = _frames(log)
    with log.open("r+b") as file:
        file.seek(4096)
        file.write(b"\0" * 4096)
    damaged = max(start for start in frames if start <= 4096)  # the frame the page starts in
    code, output = _refused(tmp_path, data_dir)
    assert code == 3 and f"{log.name}: " in output and f"at byte {damaged}" in output
    assert _repair(data_dir).returncode == 0
    assert _jobs(start_queue_server, data_dir) == [_job(n) for n in range(frames.index(damaged))]


def test_a_torn_tail_is_still_cut_off_automatically_with_its_bytes_kept_aside(
        start_queue_server):  # type: ignore[no-untyped-def]
    data_dir, log = _hundred_jobs(start_queue_server)
    last = _frames(log)[-1]
    blob = log.read_bytes()
    with log.open("r+b") as file:
        file.truncate(last + 20)  # the last frame cut short, as by a crash mid-write
    server = start_queue_server(*ALWAYS, data_dir=data_dir)
    assert total(server.connect(), "q")[2] == 99
    assert "torn" in server.output_text()
    assert log.with_name(log.name + ".corrupt").read_bytes() == blob[last:last + 20]


def _snapshots(data_dir: Path) -> dict[int, Path]:
    return {int(p.stem.split("-")[1]): p for p in data_dir.glob("snapshot-*.snap")}


def test_a_damaged_snapshot_stops_the_start_and_repair_falls_back_to_the_older_one_and_its_logs(
        start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    for n in range(20):
        put_ok(client, "q", 0, b"first %02d" % n)
    server.kill()
    server = start_queue_server(*ALWAYS, data_dir=server.data_dir)  # snapshot 2 holds the 20
    client = server.connect()
    for n in range(5):
        put_ok(client, "q", 0, b"second %d" % n)
    server.kill()
    data_dir = server.data_dir
    newest = _snapshots(data_dir)[max(_snapshots(data_dir))]
    with newest.open("r+b") as file:
        file.seek(40)
        byte = file.read(1)
        file.seek(40)
        file.write(bytes([byte[0] ^ 0x04]))
    code, output = _refused(tmp_path, data_dir)
    assert code == 3 and f"{newest.name} is damaged" in output and "--repair" in output
    repaired = _repair(data_dir)
    assert repaired.returncode == 0, repaired.stderr
    assert "recovering from snapshot-1.snap" in repaired.stdout
    assert newest.with_name(newest.name + ".corrupt").exists()
    assert _jobs(start_queue_server, data_dir) == (
        [b"first %02d" % n for n in range(20)] + [b"second %d" % n for n in range(5)])


def test_a_damaged_snapshot_without_an_older_chain_is_refused_and_repair_says_it_cannot(
        start_queue_server, tmp_path):  # type: ignore[no-untyped-def]
    server = start_queue_server(*ALWAYS)
    put_ok(server.connect(), "q", 0, b"only")
    server.kill()
    server = start_queue_server(*ALWAYS, data_dir=server.data_dir)  # snapshot 2 holds it
    assert server.connect().request(b"PING") == b"200 PONG"  # serving: snapshot 2 is written
    server.kill()
    data_dir = server.data_dir
    (data_dir / "log-1.log").unlink()  # as after a CLONE: snapshot 1 no longer leads anywhere
    newest = _snapshots(data_dir)[2]
    blob = bytearray(newest.read_bytes())
    blob[25] ^= 0x02
    newest.write_bytes(bytes(blob))
    before = sorted(p.name for p in data_dir.iterdir())
    code, output = _refused(tmp_path, data_dir)
    assert code == 3 and f"{newest.name} is damaged" in output and "cannot" in output
    repaired = _repair(data_dir)
    assert repaired.returncode == 1 and "cannot" in repaired.stderr
    assert sorted(p.name for p in data_dir.iterdir()) == before  # nothing moved
