"""ClientSource against a real queue server: keyed fetches, pipelined FAILs, a lease gone.
The tests share one server, each with queues and keys of its own."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from opentelemetry.sdk.trace import TracerProvider
from procs import poll_until

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError
from slot.loop import SourceUnavailable
from slot.outcomes import Failure
from slot.source import ClientSource
from slot.wake import Waker
from tests.queue_server.server_proc import ServerProc, running_queue_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    with running_queue_server(tmp_path_factory.mktemp("source"), "--fsync", "never") as started:
        yield started


def test_a_fetch_gives_keys_and_attempts_and_fails_go_in_one_pipelined_request(server: ServerProc) -> None:
    with QueueClient(server.address) as producer, QueueClient(server.address) as client:
        for n in range(3):
            producer.put_job("src", b"job %d" % n, key=f"src-{n}")
        source = ClientSource(client, Waker())
        jobs = source.fetch("src", count=3, lock_s=60.0)
        assert jobs is not None
        assert [(job.key, job.attempt) for job in jobs] == [("src-0", 1), ("src-1", 1), ("src-2", 1)]
        # The second job is DONE elsewhere first: its FAIL finds no running job (404), and the
        # replies after it are still read in step.
        producer.done(jobs[1].id)
        dead = source.fail([
            Failure(jobs[0].id, "boom", delay_s=30.0),
            Failure(jobs[1].id, "gone"),
            Failure(jobs[2].id, "hopeless", dead=True),
        ])
        assert dead == 1
        first, third = producer.job("src-0"), producer.job("src-2")
        assert first is not None and (first.state, first.error, first.attempts) == ("failed", "boom", 1)
        assert third is not None and (third.state, third.error) == ("dead", "hopeless")
        finished = producer.job("src-1")  # kept once finished (issue 26)
        assert finished is not None and finished.state == "done"
        client.ping()  # the connection is in step after the pipelined replies


def test_a_wake_ends_a_blocked_fetch_and_the_server_hands_the_dropped_waiter_nothing(
    server: ServerProc,
) -> None:
    with QueueClient(server.address) as producer, QueueClient(server.address) as client, \
            ThreadPoolExecutor(1) as pool:
        waker = Waker()
        source = ClientSource(client, waker)
        fetched = pool.submit(source.fetch, "w", count=1, lock_s=60.0)
        poll_until(lambda: client._conn is not None, what="GETB sent")
        waker.wake()
        assert fetched.result(timeout=5.0) is None
        assert client._conn is None  # dropped, so the server forgot the waiter
        producer.put("w", b"after the wake")
        # Not handed to the dropped waiter: it is ready for the next one.
        assert [job.data for job in producer.get("w")] == [b"after the wake"]
        # The wake was consumed: the next fetch blocks again until a job comes.
        fetched = pool.submit(source.fetch, "w", count=1, lock_s=60.0)
        producer.put("w", b"next")
        jobs = fetched.result(timeout=5.0)
        assert jobs is not None and [job.data for job in jobs] == [b"next"]


def test_a_reply_that_comes_with_the_wake_is_kept(server: ServerProc) -> None:
    """The wake fd is readable before GETB goes out and a job is ready: the server answers
    at once, the client sees the wake first, and still reads the reply (half-close)."""
    with QueueClient(server.address) as producer, QueueClient(server.address) as client:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, b"\0")
        for n in range(20):
            producer.put("r", b"job %d" % n)
            jobs = client.get("r", block=True, expire_s=60.0, wake_fd=read_fd)
            assert [job.data for job in jobs] == [b"job %d" % n]
            client.done(jobs[0].id)  # a new connection: the woken one is not reused
        assert producer.total("r").jobs == 0
        os.close(read_fd)
        os.close(write_fd)


def test_a_job_arriving_as_the_wake_comes_is_fetched_or_stays_ready(server: ServerProc) -> None:
    """The race the signal-raising waker lost: PUT and wake at the same moment, many times.
    Each job is either returned by the fetch or still ready, never running unheld."""
    with QueueClient(server.address) as producer, QueueClient(server.address) as client, \
            ThreadPoolExecutor(1) as pool:
        waker = Waker()
        source = ClientSource(client, waker)
        outcomes = {"fetched": 0, "woken": 0}
        for n in range(60):
            waker.drain()  # a wake left by a fetch that got its job first
            fetched = pool.submit(source.fetch, "race", count=1, lock_s=60.0)
            poll_until(lambda: client._conn is not None, what="GETB sent")
            producer.put("race", b"job %d" % n)
            waker.wake()
            jobs = fetched.result(timeout=5.0)
            if jobs:
                assert [job.data for job in jobs] == [b"job %d" % n]
                outcomes["fetched"] += 1
                source.done([jobs[0].id])
            else:
                outcomes["woken"] += 1
                left = producer.get("race")
                assert [job.data for job in left] == [b"job %d" % n]
                producer.done(left[0].id)
            total = producer.total("race")
            assert (total.jobs, total.running) == (0, 0), outcomes
        assert sum(outcomes.values()) == 60, outcomes


def test_jobs_given_back_go_to_the_head_of_the_queue_in_their_order_in_one_later(server: ServerProc) -> None:
    with QueueClient(server.address) as producer, QueueClient(server.address) as client:
        producer.put_many("gb", [b"job %d" % n for n in range(5)])
        source = ClientSource(client, Waker())
        jobs = source.fetch("gb", count=3, lock_s=60.0)
        assert jobs is not None and [job.data for job in jobs] == [b"job 0", b"job 1", b"job 2"]
        producer.put("gb", b"job 5")
        source.later([jobs[1].id, jobs[2].id], delay_s=None, front=True)
        again = producer.get("gb", count=6, keys=True)
        assert [job.data for job in again] == [b"job %d" % n for n in (1, 2, 3, 4, 5)]
        assert [job.attempt for job in again] == [1] * 5  # no attempt charged


class OlderServerClient(QueueClient):
    """The real client to a real server, refusing FRONT as a server older than it does (400)."""

    def later(self, *ids: int, delay_s: float | None = None, solo: bool = False,  # type: ignore[override]
              front: bool = False, until: float | None = None) -> list[bool]:
        if front:
            raise QueueServerError(400, "Bad Request")
        return super().later(*ids, delay_s=delay_s, solo=solo, until=until)


def test_a_server_that_refuses_front_gets_a_plain_later_so_the_jobs_are_not_charged(server: ServerProc) -> None:
    with QueueClient(server.address) as producer, OlderServerClient(server.address) as client:
        producer.put_many("gb_older", [b"job 0", b"job 1"])
        source = ClientSource(client, Waker())
        jobs = source.fetch("gb_older", count=1, lock_s=60.0)
        assert jobs is not None
        source.later([jobs[0].id], delay_s=None, front=True)
        # Taken back (not left to its lock), at the end of the queue as before FRONT.
        assert [job.data for job in producer.get("gb_older", count=2)] == [b"job 1", b"job 0"]


class NoTracesServerClient(QueueClient):
    """The real client to a real server, refusing TRACES as a server older than it does (400)."""

    def get(self, *args: object, traces: bool = False, **kwargs: object) -> list:  # type: ignore[override]
        if traces:
            raise QueueServerError(400, "Bad Request")
        return super().get(*args, **kwargs)  # type: ignore[arg-type]


def test_a_fetch_gives_the_trace_and_a_server_refusing_traces_keeps_keys(server: ServerProc) -> None:
    with QueueClient(server.address) as producer, QueueClient(server.address) as client, \
            NoTracesServerClient(server.address) as older:
        producer.put("tr", b"plain", key="plain")
        with TracerProvider().get_tracer("test").start_as_current_span("produce") as span:
            producer.put("tr", b"traced", key="traced")
            context = span.get_span_context()
        trace = f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"
        assert producer.job("traced").trace == trace  # type: ignore[union-attr]
        source = ClientSource(client, Waker())
        assert source.traces  # OpenTelemetry is installed with the test extra
        jobs = source.fetch("tr", count=2, lock_s=60.0)
        assert jobs is not None and [(job.key, job.trace) for job in jobs] == [
            ("plain", None), ("traced", trace)]
        assert producer.later(jobs[1].id) == [True]  # given back, uncharged
        old_source = ClientSource(older, Waker())
        with contextlib.suppress(SourceUnavailable):
            old_source.fetch("tr", count=1, lock_s=60.0)
        assert (old_source.traces, old_source.keys) == (False, True)  # traces off, keys kept
        jobs = old_source.fetch("tr", count=1, lock_s=60.0)
        assert jobs is not None and [(job.key, job.attempt, job.trace) for job in jobs] == [
            ("traced", 1, None)]
