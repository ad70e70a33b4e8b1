"""SNAPSHOT and CLONE: a clone reproduces the state; invalid snapshots change nothing."""
from __future__ import annotations

import json
import re

import pytest

from tests.queue_server.util import barrier, drain, get, get_job, put_ok, read_job, runlist, total


def _snapshot(client) -> bytes:
    client.send(b"SNAPSHOT\r\n")
    head = client.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, head
    return client.exact(int(match[1]))


def _clone(client, data: bytes) -> bytes:
    client.send(b"CLONE %d\r\n" % len(data) + data)
    return client.line()


def _build_state(client) -> dict[str, object]:
    """Ready jobs in two queues and priorities with items, a delayed job, running jobs."""
    put_ok(client, "alpha", 1, b"a1", "IS item_a")
    put_ok(client, "alpha", 1, b"a2")
    put_ok(client, "alpha", 9, b"a9")
    put_ok(client, "beta", -3, bytes(range(256)), "IS item_b")
    put_ok(client, "beta", -3, b"b2", "IS item_b")
    put_ok(client, "beta", 0, b"sleeper", "DELAY 1000 IS item_c")
    put_ok(client, "gamma", 4, b"g-run-1", "IS item_g")
    put_ok(client, "gamma", 4, b"g-run-2")
    running_forever = get_job(client, "GET gamma")
    running_timed = get_job(client, "GET gamma EXPIRE 1000")
    return {"running": [running_forever, running_timed]}


def _runlist_view(client) -> dict[int, tuple[str, int, float | None, bytes | None]]:
    return {
        entry.id: (entry.queue, entry.priority, entry.expire_at, block)
        for entry, block in runlist(client, data=True)
    }


def test_snapshot_reply_is_200_ok_with_the_length_of_the_data(queue_server):
    client = queue_server.connect()
    put_ok(client, "q", 0, b"x")
    client.send(b"SNAPSHOT\r\nPING\r\n")
    head = client.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match and int(match[1]) > 0, head
    client.exact(int(match[1]))
    client.expect(b"200 PONG\r\n")


def test_clone_into_a_second_server_reproduces_the_state(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    state = _build_state(src)
    snapshot = _snapshot(src)
    put_ok(dst, "stale", 0, b"replaced by the clone")
    assert _clone(dst, snapshot) == b"200 OK"
    assert total(dst) == total(src)
    for queue in ("alpha", "beta", "gamma", "stale"):
        assert total(dst, queue) == total(src, queue), queue
    clone_runlist = _runlist_view(dst)
    source_runlist = _runlist_view(src)
    assert set(clone_runlist) == {job.id for job in state["running"]}
    for job_id, (queue, priority, expire_at, block) in source_runlist.items():
        c_queue, c_priority, c_expire_at, c_block = clone_runlist[job_id]
        assert (c_queue, c_priority, c_block) == (queue, priority, block)
        if expire_at is None:
            assert c_expire_at is None
        else:
            assert c_expire_at is not None and abs(c_expire_at - expire_at) < 0.01
    for queue in ("alpha", "beta"):
        from_clone = [(j.priority, j.data, j.item) for j in drain(dst, queue)]
        from_source = [(j.priority, j.data, j.item) for j in drain(src, queue)]
        assert from_clone == from_source, queue
    assert total(dst, "beta") == (1, 1, 1, 2)  # drained jobs run; the delayed one still waits
    assert get(dst, "GET beta") is None


def test_running_jobs_stay_running_under_their_ids_after_clone(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    state = _build_state(src)
    assert _clone(dst, _snapshot(src)) == b"200 OK"
    forever, timed = state["running"]
    dst.send(b"LATER %d\r\n" % timed.id)
    dst.expect(b"200 OK\r\n")
    dst.send(b"DONE %d\r\n" % forever.id)
    dst.expect(b"200 OK FINI\r\n")  # gamma still holds the job put back by LATER


def test_id_counter_is_restored_by_clone(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    put_ok(src, "q", 0, b"x")
    seen = []
    for _ in range(20):
        job = get_job(src, "GET q")
        seen.append(job.id)
        src.send(b"LATER %d\r\n" % job.id)
        src.expect(b"200 OK\r\n")
    assert _clone(dst, _snapshot(src)) == b"200 OK"
    job = get_job(dst, "GET q")
    assert job.id > max(seen), (job.id, seen)


def test_clone_of_items_keeps_fini_accounting(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    put_ok(src, "one", 0, b"1", "IS it")
    put_ok(src, "two", 0, b"2", "IS it")
    assert _clone(dst, _snapshot(src)) == b"200 OK"
    first = get_job(dst, "GET one")
    dst.send(b"DONE %d\r\n" % first.id)
    dst.expect(b"200 OK FINQ\r\n")
    second = get_job(dst, "GET two")
    dst.send(b"DONE %d\r\n" % second.id)
    dst.expect(b"200 OK FINQ FINI\r\n")


def _assert_unchanged(client, before_total, before_runlist) -> None:
    assert total(client) == before_total
    assert _runlist_view(client) == before_runlist


@pytest.mark.parametrize(
    "garbage",
    [b"garbage", b"", b"\x00" * 64, b"{}", b"[1, 2, 3]", b"SNAPSHOT\r\n"],
    ids=["text", "empty", "zeros", "empty-json-object", "json-list", "command"],
)
def test_clone_of_garbage_replies_500_invalid_snapshot_and_changes_nothing(queue_server, garbage):
    client = queue_server.connect()
    _build_state(client)
    before_total, before_runlist = total(client), _runlist_view(client)
    assert _clone(client, garbage) == b"500 Invalid Snapshot"
    _assert_unchanged(client, before_total, before_runlist)
    assert [j.data for j in drain(client, "alpha")] == [b"a9", b"a1", b"a2"]


def test_clone_of_a_truncated_snapshot_replies_500_and_changes_nothing(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    _build_state(src)
    snapshot = _snapshot(src)
    put_ok(dst, "mine", 0, b"untouched")
    for cut in (len(snapshot) // 2, len(snapshot) - 1):
        assert _clone(dst, snapshot[:cut]) == b"500 Invalid Snapshot", cut
    assert total(dst) == (1, 1, 1, 0)
    assert get_job(dst, "GET mine").data == b"untouched"


def _with_bumped_version(snapshot: bytes) -> bytes | None:
    """The snapshot with its format version changed: a JSON `version` key or a `MAGIC <n>` first line."""
    try:
        document = json.loads(snapshot)
    except ValueError:
        document = None
    if isinstance(document, dict) and "version" in document:
        document["version"] = 987654
        return json.dumps(document).encode()
    header = re.match(rb"([^\r\n ]+) ([0-9]+)(\r?\n)", snapshot)
    if header:
        return header[1] + b" 987654" + header[3] + snapshot[header.end():]
    return None


def test_clone_of_a_snapshot_with_an_unknown_version_replies_500(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    _build_state(src)
    bumped = _with_bumped_version(_snapshot(src))
    if bumped is None:
        pytest.skip("no recognisable version field in the snapshot")
    put_ok(dst, "mine", 0, b"untouched")
    assert _clone(dst, bumped) == b"500 Invalid Snapshot"
    assert total(dst) == (1, 1, 1, 0)


def test_snapshot_with_a_link_streams_later_changes_as_sync_commands(queue_server):
    link, client = queue_server.connect(), queue_server.connect()
    link.send(b"SNAPSHOT 2 127.0.0.1 1\r\n")
    head = link.line()
    match = re.fullmatch(rb"200 OK ([0-9]+)", head)
    assert match, head
    link.exact(int(match[1]))
    put_ok(client, "q", 3, b"abc", "IS it")
    link.expect(b"SYNC PUT q 3 3 IS it\r\nabc")
    job = get_job(client, "GET q")
    handed_out = link.line()  # with the time it was handed out (issue 26)
    assert re.fullmatch(rb"SYNC GET q %d 3 AT [0-9.]+" % job.id, handed_out), handed_out
    client.send(b"DONE %d\r\n" % job.id)
    client.expect(b"200 OK FINQ FINI\r\n")
    done = link.line()  # with the time it finished, so a replay keeps it as it was (issue 26)
    assert re.fullmatch(rb"SYNC DONE %d AT [0-9.]+" % job.id, done), done


def test_interconnect_replies_with_a_positive_server_id(queue_server):
    client = queue_server.connect()
    reply = client.request(b"INTERCONNECT")
    match = re.fullmatch(rb"200 OK ([0-9]+)", reply)
    assert match and int(match[1]) >= 1, reply


def test_clone_with_a_bad_length_is_a_bad_request(queue_server):
    client = queue_server.connect()
    client.send(b"CLONE abc\r\nPING\r\n")
    assert re.fullmatch(rb"400 Bad Request: \S.*", client.line())
    client.expect(b"200 PONG\r\n")


def test_snapshot_of_an_empty_server_clones_into_an_empty_server(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst = source.connect(), target.connect()
    put_ok(dst, "old", 0, b"x")
    assert _clone(dst, _snapshot(src)) == b"200 OK"
    assert total(dst) == (0, 0, 0, 0)


def test_clone_with_ready_jobs_wakes_a_blocked_getb_waiter(reused_queue_server):
    source, target = reused_queue_server(), reused_queue_server(instance=1)
    src, dst, waiter = source.connect(), target.connect(), target.connect()
    put_ok(src, "k", 0, b"from the snapshot")
    snapshot = _snapshot(src)
    waiter.send(b"GETB k\r\n")
    barrier(dst)
    assert waiter.pending() == b""
    assert _clone(dst, snapshot) == b"200 OK"
    job = read_job(waiter)
    assert job is not None and job.data == b"from the snapshot"


def test_interconnect_with_a_link_replies_its_id_and_streams_later_changes(queue_server):
    link, client = queue_server.connect(), queue_server.connect()
    reply = link.request(b"INTERCONNECT 2 127.0.0.1 1")
    assert re.fullmatch(rb"200 OK [0-9]+", reply), reply
    put_ok(client, "q", -1, b"xyz")
    link.expect(b"SYNC PUT q -1 3\r\nxyz")
