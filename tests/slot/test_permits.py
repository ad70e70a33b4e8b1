"""The permit client's frames and the before_batch hook, against a real pulsar over ZeroMQ."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping

import pytest

from config.models import QueueConfig, RateLimitConfig
from manager.pulsar_service import PulsarService
from slot.handler import Outcome, SlotJob
from slot.permits import (
    OK,
    SLOW_DOWN,
    UNREACHABLE_DELAY_S,
    AcquireRequest,
    Feedback,
    FeedbackKind,
    GrantReply,
    PermitClient,
    PermitFrameError,
    RateLimitHook,
    ReportRequest,
    Taken,
    decode_reply,
    decode_request,
    limiters_of,
    pause,
    rate_limit_hook,
)


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def pulsar() -> Iterator[Callable[[Mapping[str, RateLimitConfig]], str]]:
    """Start a pulsar in a thread of the test process; returns its endpoint."""
    running: list[tuple[PulsarService, threading.Event, threading.Thread]] = []

    def start(limits: Mapping[str, RateLimitConfig]) -> str:
        service = PulsarService(free_endpoint(), limits)
        stop = threading.Event()
        thread = threading.Thread(target=service.run_until, args=(stop.is_set,),
                                  kwargs={"tick_ms": 20}, daemon=True)
        thread.start()
        running.append((service, stop, thread))
        return service.endpoint

    yield start
    for service, stop, thread in running:
        stop.set()
        thread.join(10.0)
        service.close()


@pytest.fixture
def permits() -> Iterator[Callable[..., PermitClient]]:
    clients: list[PermitClient] = []

    def connect(endpoint: str, **options: float) -> PermitClient:
        clients.append(PermitClient(endpoint, **options))  # type: ignore[arg-type]
        return clients[-1]

    yield connect
    for one in clients:
        one.close()


def jobs(queue: str, count: int) -> list[SlotJob]:
    return [SlotJob(queue, i, 0, b"x", None) for i in range(1, count + 1)]


def test_requests_and_replies_round_trip_through_their_frames() -> None:
    request = ReportRequest(id=3, limiter="ga", outcome=FeedbackKind.PAUSE, pause_s=60)
    assert decode_request(request.encode()) == request
    assert request.feedback() == pause(60)
    reply = GrantReply(id=4, granted=2, retry_after_s=0.25)
    assert decode_reply(reply.encode()) == reply


@pytest.mark.parametrize("frame", [
    b"not json",
    b'{"op": "acquire", "id": 1, "limiter": "ga", "n": 0}',
    b'{"op": "acquire", "id": 1, "limiter": "bad name!"}',
    b'{"op": "report", "id": 1, "limiter": "ga", "outcome": "pause"}',
    b'{"op": "report", "id": 1, "limiter": "ga", "outcome": "ok", "pause_s": 5}',
    b'{"op": "launch", "id": 1}',
])
def test_a_bad_request_frame_is_one_named_error(frame: bytes) -> None:
    with pytest.raises(PermitFrameError, match="bad pulsar request frame"):
        decode_request(frame)


def test_feedback_is_ok_slow_down_or_a_pause_with_seconds() -> None:
    assert (OK.kind, SLOW_DOWN.kind, pause(2).pause_s) == (FeedbackKind.OK, FeedbackKind.SLOW_DOWN, 2.0)
    with pytest.raises(ValueError, match="only a pause has pause_s"):
        Feedback(FeedbackKind.OK, 1.0)


def test_only_queues_with_a_rate_limit_get_a_limiter() -> None:
    queues = {"geo": QueueConfig(rate_limit=RateLimitConfig(permits=5)), "free": QueueConfig()}
    assert limiters_of(queues) == {"geo": "geo"}


def test_take_returns_what_came_within_its_wait(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    client = permits(pulsar({"geo": RateLimitConfig(permits=10), "rare": RateLimitConfig(permits=1)}))
    # 10/s: four permits come within a second (at 0, 0.1, 0.2 and 0.3 s).
    assert client.take("geo", 4, wait_s=1.0) == Taken(4, 0.0)
    # 1/s: the first at once, the second a second later, past the half second of wait.
    taken = client.take("rare", 3, wait_s=0.5)
    assert taken.granted == 1
    assert 0.5 < taken.retry_after_s <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="permits per request"):
        client.take("geo", 0, wait_s=1)


def test_a_frame_sends_a_later_field_only_when_it_is_set() -> None:
    # A pulsar of the release before (extra fields forbidden) reads a request without one.
    assert b"reserve_s" not in AcquireRequest(id=1, limiter="geo").encode()
    assert b'"reserve_s":0.25' in AcquireRequest(id=1, limiter="geo", reserve_s=0.25).encode()
    assert b"start_after_s" not in GrantReply(id=1, granted=1, retry_after_s=0).encode()


def test_the_hook_leaves_a_queue_without_rate_limit_alone() -> None:
    # Nothing listens there: any request would time out.
    hook = RateLimitHook(PermitClient(free_endpoint(), reply_timeout_s=0.1), {"geo": "geo"})
    batch = jobs("free", 5)
    started = time.monotonic()
    assert list(hook("free", batch)) == batch
    assert time.monotonic() - started < 0.1
    hook.client.close()


def test_the_hook_runs_a_batch_whose_permits_come_in_time(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    queues = {"geo": QueueConfig(rate_limit=RateLimitConfig(permits=50))}
    hook = rate_limit_hook(permits(pulsar({"geo": RateLimitConfig(permits=50)})), queues,
                           max_wait_s=5.0)
    batch = jobs("geo", 10)
    started = time.monotonic()
    assert list(hook("geo", batch)) == batch
    # Five at once (the capacity at 50/s), the other five 0.1 s later.
    assert 0.05 <= time.monotonic() - started < 1.0
    assert all(job.outcome is Outcome.DONE for job in batch)


def test_the_hook_postpones_the_jobs_whose_permits_come_too_late(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(permits(pulsar({"geo": RateLimitConfig(permits=2, period_s=1.0)})),
                         {"geo": "geo"}, max_wait_s=0.2)
    batch = jobs("geo", 6)
    runnable = hook("geo", batch)
    assert [job.id for job in runnable] == [1]
    assert all(job.outcome is Outcome.LATER for job in batch[1:])
    # The next permit is due at 0.5 s; the job comes back the client's reservation lead
    # (its wait, 0.2 s) before it, so the permit is reserved on its turn.
    assert all(job.delay_s == pytest.approx(0.5 - 0.2, abs=0.05) for job in batch[1:])


def test_the_hook_postpones_the_batch_when_no_pulsar_answers(
    permits: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(permits(free_endpoint(), reply_timeout_s=0.1), {"geo": "geo"},
                         max_wait_s=0.2)
    batch = jobs("geo", 3)
    assert list(hook("geo", batch)) == []
    assert [(job.outcome, job.delay_s) for job in batch] == [(Outcome.LATER, UNREACHABLE_DELAY_S)] * 3


def test_the_hook_postpones_the_batch_of_a_limiter_the_pulsar_does_not_know(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(permits(pulsar({})), {"geo": "geo"}, max_wait_s=7.0)
    batch = jobs("geo", 2)
    assert list(hook("geo", batch)) == []
    assert [job.delay_s for job in batch] == [7.0, 7.0]


def test_the_hook_stops_waiting_when_the_slot_is_asked_to_stop(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    endpoint = pulsar({"geo": RateLimitConfig(permits=1, period_s=1.0)})
    asked_at = time.monotonic() + 0.3
    hook = RateLimitHook(permits(endpoint), {"geo": "geo"}, max_wait_s=30.0,
                         stopping=lambda: time.monotonic() >= asked_at)
    batch = jobs("geo", 5)
    runnable = hook("geo", batch)
    assert time.monotonic() - asked_at < 0.5
    assert [job.id for job in runnable] == [1]
    assert all(job.outcome is Outcome.LATER for job in batch[1:])


def test_a_client_made_before_a_fork_asks_from_the_child_on_its_own_socket(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], permits: Callable[..., PermitClient],
) -> None:
    import os

    client = permits(pulsar({"geo": RateLimitConfig(permits=100)}))
    client.acquire("geo")
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when its permit came
        code = 1
        try:
            client.acquire("geo", timeout_s=5.0)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    client.acquire("geo", timeout_s=5.0)

