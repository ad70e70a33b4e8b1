"""Durability with --fsync always: kill -9 keeps acknowledged jobs; damaged log tails are survived."""
from __future__ import annotations

import re
from pathlib import Path

from polling import DEADLINE_S

from tests.queue_server.util import (
    drain,
    get,
    get_job,
    poll_until,
    put_ok,
    read_batch,
    runlist,
    total,
)

ALWAYS = ("--fsync", "always")
RECOVERY_WORDS = re.compile(
    r"corrupt|truncat|invalid|damag|garbage|torn|partial|incomplete|skip|ignor|discard|bad record|recover",
    re.IGNORECASE,
)


def _crash_and_restart(start_queue_server, server):
    server.kill()
    return start_queue_server(*ALWAYS, data_dir=server.data_dir)


def _newest_file(data_dir: Path) -> Path:
    files = [p for p in data_dir.rglob("*") if p.is_file() and p.stat().st_size > 0]
    assert files, f"the server wrote nothing into {data_dir}"
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.stat().st_size))


def test_acknowledged_put_survives_kill_9(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 7, b"precious", "IS it")
    put_ok(client, "r", 0, bytes(range(256)))
    restarted = _crash_and_restart(start_queue_server, server)
    client = restarted.connect()
    assert total(client) == (2, 2, 2, 0)
    job = get_job(client, "GET q")
    assert (job.priority, job.data, job.item) == (7, b"precious", "it")
    assert get_job(client, "GET r").data == bytes(range(256))


def test_running_jobs_are_ready_again_after_kill_9(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"first", "IS it")
    put_ok(client, "q", 0, b"second")
    get_job(client, "GET q")
    get_job(client, "GET q EXPIRE 1000")
    put_ok(client, "sync", 0, b"forces the GET records to disk too")
    restarted = _crash_and_restart(start_queue_server, server)
    client = restarted.connect()
    assert runlist(client) == []
    assert total(client, "q") == (1, 1, 2, 0)
    jobs = drain(client, "q")
    assert sorted((j.data, j.item) for j in jobs) == [(b"first", "it"), (b"second", None)]


def test_id_counter_survives_kill_9_and_new_ids_are_larger(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"x")
    seen = []
    for _ in range(10):
        job = get_job(client, "GET q")
        seen.append(job.id)
        client.send(b"LATER %d\r\n" % job.id)
        client.expect(b"200 OK\r\n")
    put_ok(client, "sync", 0, b"acknowledged after every GET above")
    restarted = _crash_and_restart(start_queue_server, server)
    client = restarted.connect()
    job = get_job(client, "GET q")
    assert job.id > max(seen), (job.id, seen)


def test_done_before_a_clean_restart_stays_done(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"done")
    put_ok(client, "q", 0, b"left")
    job = get_job(client, "GET q")
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK\r\n")
    client.send(b"SHUTDOWN\r\n")
    client.expect(b"221 Shutting Down\r\n")
    assert server.wait_exit() == 0
    client = start_queue_server(*ALWAYS, data_dir=server.data_dir).connect()
    assert [j.data for j in drain(client, "q")] == [b"left"]


def test_delayed_job_survives_kill_9_still_delayed(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"later", "DELAY 1000")
    restarted = _crash_and_restart(start_queue_server, server)
    client = restarted.connect()
    assert total(client, "q") == (1, 1, 1, 0)
    assert get(client, "GET q") is None


def test_garbage_appended_to_the_log_is_reported_and_the_valid_prefix_recovered(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"one")
    put_ok(client, "q", 0, b"two", "IS it")
    server.kill()
    damaged = _newest_file(server.data_dir)
    with damaged.open("ab") as log:
        log.write(b"\x00\xffGARBAGE PUT q 0 999\r\n\x13\x37" * 5)
    restarted = start_queue_server(*ALWAYS, data_dir=server.data_dir)
    client = restarted.connect()
    assert [(j.data, j.item) for j in drain(client, "q")] == [(b"one", None), (b"two", "it")]
    assert RECOVERY_WORDS.search(restarted.output_text()), (
        f"damaged {damaged.name} was not reported; server output:\n{restarted.output_text()}"
    )


def test_log_stays_writable_after_recovering_from_appended_garbage(start_queue_server):
    server = start_queue_server(*ALWAYS)
    put_ok(server.connect(), "q", 0, b"one")
    server.kill()
    with _newest_file(server.data_dir).open("ab") as log:
        log.write(b"\xde\xad\xbe\xef" * 16)
    second = start_queue_server(*ALWAYS, data_dir=server.data_dir)
    put_ok(second.connect(), "q", 0, b"after recovery")
    third = _crash_and_restart(start_queue_server, second)
    client = third.connect()
    assert [j.data for j in drain(client, "q")] == [b"one", b"after recovery"]


def test_truncated_log_tail_is_reported_and_the_valid_prefix_recovered(start_queue_server):
    server = start_queue_server(*ALWAYS)
    client = server.connect()
    put_ok(client, "q", 0, b"intact")
    big = b"B" * 4000
    put_ok(client, "q", 0, big)
    server.kill()
    damaged = _newest_file(server.data_dir)
    # The end of the data, not of the file: a log may be preallocated (zeros after it).
    size = len(damaged.read_bytes().rstrip(b"\0"))
    with damaged.open("r+b") as log:
        log.truncate(size - 1500)  # cuts into the middle of the 4000-byte job's record
    restarted = start_queue_server(*ALWAYS, data_dir=server.data_dir)
    client = restarted.connect()
    recovered = [j.data for j in drain(client, "q")]
    assert recovered[:1] == [b"intact"], recovered
    assert all(data in (b"intact", big) for data in recovered), "a damaged record produced a job"
    assert RECOVERY_WORDS.search(restarted.output_text()), (
        f"truncated {damaged.name} was not reported; server output:\n{restarted.output_text()}"
    )
    put_ok(client, "q", 0, b"after recovery")
    third = _crash_and_restart(start_queue_server, restarted)
    after = [j.data for j in drain(third.connect(), "q")]
    assert b"after recovery" in after, after


# Finished jobs kept are in every snapshot: 10 of them keep it small.
COMPACT_CONFIG = ("[queue_server]\nsnapshot_log_bytes = 4096\n[queues.q]\nkeep_done_max = 10\n"
                  "[queues.filler]\nkeep_done_max = 10\n")


def _data_dir_bytes(data_dir: Path) -> int:
    return sum(p.stat().st_size for p in data_dir.rglob("*") if p.is_file())


def _data_dir_listing(data_dir: Path) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_size) for p in data_dir.rglob("*") if p.is_file())


def test_snapshots_keep_the_data_dir_bounded_while_jobs_come_and_go(start_queue_server):
    server = start_queue_server("--fsync", "never", config=COMPACT_CONFIG)
    client = server.connect(timeout_s=30.0)
    rounds, batch = 40, 100
    for _ in range(rounds):  # about 1 MB of log records; the state stays nearly empty
        client.send(b"".join(b"PUT q 0 200\r\n" + b"%0200d" % n for n in range(batch)))
        client.expect(b"200 OK\r\n" * batch)
        client.send(b"GET q COUNT %d\r\n" % batch)
        ids = [job.id for job in read_batch(client)]
        assert len(ids) == batch
        client.send(b"DONE " + b" ".join(b"%d" % job_id for job_id in ids) + b"\r\n")
        client.expect(b"200 OK\r\n" * (batch - 1) + b"200 OK FINQ\r\n")
    for n in range(5):
        put_ok(client, "survivors", 0, b"survivor %d" % n)
    written = rounds * batch * 230

    def small_after_more_writes() -> bool:
        # Snapshots follow writes, so keep writing (and finishing) a little while waiting.
        put_ok(client, "filler", 0, b"f" * 1000)
        job = get_job(client, "GET filler")
        client.send(b"DONE %d\r\n" % job.id)
        client.expect(b"200 OK FINQ\r\n")
        return _data_dir_bytes(server.data_dir) < written // 10

    try:
        poll_until(small_after_more_writes, DEADLINE_S, interval_s=0.05,  # 10 s: little room for snapshot forks
                   what=f"data dir below a tenth of the {written} bytes of records written")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {_data_dir_listing(server.data_dir)}") from None
    server.terminate()
    assert server.wait_exit() == 0
    client = start_queue_server("--fsync", "never", config=COMPACT_CONFIG, data_dir=server.data_dir).connect()
    assert total(client) == (1, 1, 5, 0)
    assert [j.data for j in drain(client, "survivors")] == [b"survivor %d" % n for n in range(5)]


def test_kill_9_while_a_snapshot_is_being_written_keeps_every_acknowledged_job(start_queue_server):
    server = start_queue_server(*ALWAYS, config=COMPACT_CONFIG)
    client = server.connect(timeout_s=30.0)
    count = 150
    client.send(b"".join(b"PUT q 0 100\r\n" + b"%0100d" % n for n in range(count)))
    client.expect(b"200 OK\r\n" * count)  # the log passed snapshot_log_bytes many times over
    restarted = _crash_and_restart(start_queue_server, server)
    client = restarted.connect(timeout_s=30.0)
    assert total(client) == (1, 1, count, 0)
    assert [j.data for j in drain(client, "q")] == [b"%0100d" % n for n in range(count)]
