"""JOBS search (PROTOCOL.md Part B, issue 26): key prefix, error type, time range and the scan
bound on a real server, through the client library and raw bytes; plain JOBS unchanged."""
from __future__ import annotations

import json
import socket
import time

import pytest

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError


def _client(server) -> QueueClient:  # type: ignore[no-untyped-def]
    return QueueClient(f"127.0.0.1:{server.port}")


def _die(client: QueueClient, queue: str, key: str, error: str) -> None:
    client.put_job(queue, key.encode(), key=key)
    [job] = client.get(queue, keys=True)
    assert job.key == key
    assert client.fail(job.id, f"Traceback (most recent call last):\n  ...\n{error}", dead=True).dead


def _raw(port: int, line: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line)
        head = b""
        while not head.endswith(b"\r\n"):
            head += sock.recv(1)
        if not head.startswith(b"200 OK "):
            return head
        length = int(head.split()[2])
        body = b""
        while len(body) < length:
            body += sock.recv(length - len(body))
        return body


@pytest.fixture
def server(start_queue_server):  # type: ignore[no-untyped-def]
    running = start_queue_server("--fsync", "never")
    with _client(running) as client:
        for index in range(6):
            _die(client, "photos", f"photo-{index}", "ValueError: bad photo" if index % 2 else "OSError: disk")
        _die(client, "photos", "thumb-1", "ValueError: bad thumb")
    return running


def test_search_by_key_prefix_and_error_type_finds_only_the_matches(server) -> None:  # type: ignore[no-untyped-def]
    with _client(server) as client:
        page = client.search_jobs("photos", "dead", prefix="photo-", error_type="ValueError")
        assert sorted(job.key for job in page.jobs) == ["photo-1", "photo-3", "photo-5"]
        assert page.after is None and page.scanned == 7
        other = client.search_jobs("photos", "dead", error_type="OSError")
        assert sorted(job.key for job in other.jobs) == ["photo-0", "photo-2", "photo-4"]
        assert client.search_jobs("photos", "dead", prefix="nothing").jobs == []
        assert client.search_jobs("nosuchqueue", "dead", prefix="p").jobs == []


def test_the_error_type_matches_whatever_its_case(server) -> None:  # type: ignore[no-untyped-def]
    with _client(server) as client:
        for typed in ("valueerror", "VALUEERROR", "valueError"):
            page = client.search_jobs("photos", "dead", error_type=typed)
            assert sorted(job.key for job in page.jobs) == ["photo-1", "photo-3", "photo-5", "thumb-1"], typed
        found = json.loads(_raw(server.port, b"JOBS photos dead ERROR oserror\r\n"))
        assert sorted(job["key"] for job in found["jobs"]) == ["photo-0", "photo-2", "photo-4"]
        assert client.search_jobs("photos", "dead", error_type="valueerr").jobs == []


def test_the_scan_bound_stops_early_and_after_goes_on_where_it_stopped(server) -> None:  # type: ignore[no-untyped-def]
    with _client(server) as client:
        seen: list[str] = []
        after = None
        calls = 0
        while True:
            page = client.search_jobs("photos", "dead", after=after, error_type="ValueError", scan=2)
            calls += 1
            assert page.scanned <= 2
            seen += [job.key for job in page.jobs]
            after = page.after
            if after is None:
                break
        assert calls == 4  # 7 jobs, 2 examined per call
        assert sorted(seen) == ["photo-1", "photo-3", "photo-5", "thumb-1"]
        first = client.search_jobs("photos", "dead", limit=1, prefix="photo-")
        assert len(first.jobs) == 1 and first.after == first.jobs[0].key


def test_a_time_range_looks_at_each_states_own_time(server) -> None:  # type: ignore[no-untyped-def]
    with _client(server) as client:
        now = time.time()
        assert len(client.search_jobs("photos", "dead", since=now - 60).jobs) == 7
        assert client.search_jobs("photos", "dead", since=now + 60).jobs == []
        assert client.search_jobs("photos", "dead", until=now - 60).jobs == []
        client.put_job("photos", b"x", key="run-1")
        [job] = client.get("photos", keys=True)
        running = client.search_jobs("photos", "running", since=now - 60, until=time.time() + 1)
        assert [entry.key for entry in running.jobs] == ["run-1"]
        assert running.jobs[0].started_at is not None
        client.done(job.id)


def test_a_plain_jobs_request_keeps_its_array_reply_and_bad_words_are_refused(server) -> None:  # type: ignore[no-untyped-def]
    plain = json.loads(_raw(server.port, b"JOBS photos dead LIMIT 2\r\n"))
    assert isinstance(plain, list) and len(plain) == 2
    found = json.loads(_raw(server.port, b"JOBS photos dead PREFIX thumb\r\n"))
    assert [job["key"] for job in found["jobs"]] == ["thumb-1"] and found["after"] is None
    assert _raw(server.port, b"JOBS photos ready SINCE 1\r\n").startswith(b"400 Bad Request: ready jobs")
    assert _raw(server.port, b"JOBS photos dead SCAN 0\r\n").startswith(b"400 Bad Request: SCAN")
    assert _raw(server.port, b"JOBS photos dead ERROR bad!type\r\n").startswith(b"400 Bad Request: ERROR")
    assert _raw(server.port, b"JOBS photos dead PREFIX a PREFIX b\r\n").startswith(b"400 Bad Request")
    with _client(server) as client, pytest.raises(ValueError):
        client.search_jobs("photos", "dead", prefix="has space")
    with _client(server) as client, pytest.raises(QueueServerError):
        client.search_jobs("photos", "ready", since=1.0)


def test_ready_jobs_page_in_hand_out_order_across_priorities_from_any_cursor(server) -> None:  # type: ignore[no-untyped-def]
    with _client(server) as client:
        for index in range(4):
            client.put_job("mixed", b"low", key=f"low-{index}", priority=0)
            client.put_job("mixed", b"high", key=f"high-{index}", priority=5)
        order = [job.key for job in client.jobs("mixed", "ready")]
        assert order == [*(f"high-{n}" for n in range(4)), *(f"low-{n}" for n in range(4))]
        seen: list[str] = []
        after = None
        while True:
            page = client.search_jobs("mixed", "ready", after=after, scan=3)
            seen += [job.key for job in page.jobs]
            if page.after is None:
                break
            after = page.after
        assert seen == order
        assert [job.key for job in client.jobs("mixed", "ready", after="high-3", limit=2)] == ["low-0", "low-1"]
        assert client.jobs("mixed", "ready", after="nosuchkey") == []
