"""The pulsar over real ZeroMQ: client processes sharing one limit, feedback, errors, restarts, the CLI."""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import pytest
import zmq

from config.models import RateLimitConfig
from slot.pulsar.client import PermitClient
from slot.pulsar.errors import PermitError, PermitTimeout
from slot.pulsar.limiter import Grant, Limiter
from slot.pulsar.protocol import (
    SLOW_DOWN,
    AcquireRequest,
    ErrorReply,
    GrantReply,
    StateRequest,
    decode_reply,
    pause,
)
from slot.pulsar.service import answer, build_limiters, limits_of
from tests.polling import DEADLINE_S
from tests.procs import REPO_ROOT
from tests.slot.pulsar.served import Served, free_endpoint

T = TypeVar("T")
EXIT_DEADLINE_S = 10.0
READY_DEADLINE_S = 15.0

CLIENT_SCRIPT = """
import json, sys, time
from slot.pulsar.client import PermitClient
endpoint, limiter, duration_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
client = PermitClient(endpoint)
print("ready", flush=True)
start_at = float(sys.stdin.readline())
# Wait for the common start (a child's wait, not a test's).
while time.monotonic() < start_at:
    time.sleep(start_at - time.monotonic())
stamps = []
while True:
    client.acquire(limiter, timeout_s=5.0)
    now = time.monotonic()
    if now >= start_at + duration_s:
        break
    stamps.append(now)
client.close()
print(json.dumps(stamps), flush=True)
"""


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(EXIT_DEADLINE_S)


def spawn(procs: list[subprocess.Popen[str]], args: list[str]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, *args], cwd=REPO_ROOT, text=True, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    procs.append(proc)
    return proc


def read_line(proc: subprocess.Popen[str], *, timeout_s: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else ""
    if not line:
        proc.kill()
        raise AssertionError(f"no line from pid {proc.pid} within {timeout_s} s: {proc.communicate()[1]}")
    return line.strip()


def count_in(stamps: list[float], start: float, end: float) -> int:
    return sum(1 for t in stamps if start <= t < end)


def acquire_for(client: PermitClient, limiter: str, duration_s: float) -> int:
    end = time.monotonic() + duration_s
    granted = 0
    while True:
        client.acquire(limiter, timeout_s=5.0)
        if time.monotonic() >= end:
            return granted
        granted += 1


def test_four_client_processes_share_one_limit_of_twenty_per_second(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], procs: list[subprocess.Popen[str]],
) -> None:
    served = serve({"api": RateLimitConfig(permits=20, period_s=1.0, margin=0)})
    duration_s = 3.0
    clients = [spawn(procs, ["-c", CLIENT_SCRIPT, served.endpoint, "api", str(duration_s)])
               for _ in range(4)]
    for proc in clients:
        assert read_line(proc, timeout_s=READY_DEADLINE_S) == "ready"
    start_at = time.monotonic() + 0.2
    for proc in clients:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at}\n")
        proc.stdin.flush()
    per_client = [json.loads(read_line(proc, timeout_s=duration_s + 10)) for proc in clients]
    stamps = sorted(t for one in per_client for t in one)
    # Capacity 2 (0.1 s of permits), and 2 for the jitter of stamps taken after each reply.
    assert 0.85 * 60 <= len(stamps) <= 60 + 2 + 2
    for i in range(len(stamps)):
        assert count_in(stamps, stamps[i], stamps[i] + 1.0) <= 20 + 2 + 2
    assert all(len(one) >= 6 for one in per_client), [len(one) for one in per_client]


def test_a_slow_down_report_halves_the_rate_every_client_gets(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=40, period_s=1.0, margin=0)})
    worker, reporter = client(served.endpoint), client(served.endpoint)
    before = acquire_for(worker, "api", 1.0)
    assert reporter.report("api", SLOW_DOWN)
    after = acquire_for(worker, "api", 1.0)
    assert 34 <= before <= 44
    assert 16 <= after <= 23
    state = reporter.states()["api"]
    assert (state.current_per_s, state.cuts) == (20.0, 1)


def test_a_pause_report_stops_every_permit_for_its_seconds(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=100, period_s=1.0, margin=0)})
    permits = client(served.endpoint)
    permits.acquire("api")
    started = time.monotonic()  # before the report: the pause runs from its arrival (0.597 s seen after it)
    assert permits.report("api", pause(0.6))
    permits.acquire("api", timeout_s=DEADLINE_S)
    # Not before the pause ends; the upper bound is the acquire's own timeout (a busy
    # shared machine can hold this thread back for seconds: 5 s was too close).
    assert 0.6 <= time.monotonic() - started < DEADLINE_S


def test_an_unknown_limiter_is_a_permit_error_naming_the_known_ones(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=1, margin=0), "mail": RateLimitConfig(permits=1, margin=0)})
    with pytest.raises(PermitError, match=r"no limiter 'nope' \(known: api, mail\)"):
        client(served.endpoint).acquire("nope")


def test_permits_that_come_after_the_timeout_are_not_waited_for(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=1, period_s=60.0, margin=0)})
    permits = client(served.endpoint)
    permits.acquire("api")
    started = time.monotonic()
    # The next permit is 60 s away, past the 20 s timeout: given up at once, not after 20 s.
    # The 10 s bound is far from both (a 0.5 s, then a 5 s bound equal to the timeout, left
    # too little room for a busy machine holding this thread back).
    with pytest.raises(PermitTimeout, match=r"0 of 1 permits of 'api' within 20.0 s \(the next permit comes in"):
        permits.acquire("api", timeout_s=20.0)
    assert time.monotonic() - started < 10.0


def test_acquire_gives_up_after_its_timeout_when_no_pulsar_answers(
    client: Callable[..., PermitClient],
) -> None:
    permits = client(free_endpoint(), reply_timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(PermitTimeout, match="the pulsar did not answer"):
        permits.acquire("api", timeout_s=0.5)
    # Upper bounds with room for a busy shared machine: what they rule out is a hang.
    assert 0.4 <= time.monotonic() - started < 5.0
    started = time.monotonic()
    assert permits.report("api", SLOW_DOWN) is False
    assert time.monotonic() - started < 5.0


def test_a_client_waiting_through_a_pulsar_restart_gets_its_permit(
    client: Callable[..., PermitClient],
) -> None:
    endpoint = free_endpoint()
    limits = {"api": RateLimitConfig(permits=50, margin=0)}
    first = Served(endpoint, limits)
    permits = client(endpoint, reply_timeout_s=0.3)
    try:
        permits.acquire("api")
    finally:
        first.close()
    result: list[BaseException | None] = []

    def acquire() -> None:
        try:
            permits.acquire("api", timeout_s=10.0)
            result.append(None)
        except BaseException as exc:
            result.append(exc)

    waiter = threading.Thread(target=acquire, daemon=True)
    waiter.start()
    # The client is asking a dead endpoint; then a new pulsar binds it.
    second = Served(endpoint, limits)
    try:
        waiter.join(10.0)
        assert result == [None]
    finally:
        second.close()


def test_a_bad_frame_gets_an_error_reply_and_the_service_goes_on(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=10, margin=0)})
    context = zmq.Context()
    raw = context.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    try:
        raw.connect(served.endpoint)
        raw.send(b'{"op": "acquire", "id": 1, "limiter": "api", "n": 0}')
        assert raw.poll(5000)
        reply = decode_reply(raw.recv())
        assert isinstance(reply, ErrorReply) and "bad pulsar request frame" in reply.message
    finally:
        raw.close()
        context.term()
    client(served.endpoint).acquire("api", timeout_s=5.0)


def test_state_lists_every_limiter_with_its_rates(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
) -> None:
    served = serve({"api": RateLimitConfig(permits=30, period_s=60.0, margin=0), "mail": RateLimitConfig(permits=5, margin=0)})
    permits = client(served.endpoint)
    permits.acquire("mail")
    states = permits.states()
    assert sorted(states) == ["api", "mail"]
    assert states["api"].configured_per_s == pytest.approx(0.5)
    assert states["mail"].granted_total == 1


def test_answers_come_from_the_limiters_without_a_socket() -> None:
    limiters = build_limiters({"api": RateLimitConfig(permits=10, margin=0)})
    first = answer(limiters, AcquireRequest(id=7, limiter="api", n=3), 0.0)
    assert isinstance(first, GrantReply)
    assert (first.id, first.granted, first.retry_after_s) == (7, 1, pytest.approx(0.1))
    state = answer(limiters, StateRequest(id=8), 0.0)
    assert state.op == "state" and state.id == 8


def test_limits_come_from_the_queues_with_a_rate_limit() -> None:
    from config.models import QueueConfig

    queues = {"a": QueueConfig(rate_limit=RateLimitConfig(permits=3, period_s=2, margin=0)), "b": QueueConfig()}
    assert limits_of(queues) == {"a": RateLimitConfig(permits=3, period_s=2, margin=0)}


def test_the_pulsar_command_serves_the_queues_limits_and_stops_on_sigterm(
    tmp_path: Path, procs: list[subprocess.Popen[str]], client: Callable[..., PermitClient],
) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text("[queues.geocode]\nrate_limit = { permits = 5, period_s = 1.0, margin = 0 }\n")
    endpoint = free_endpoint()
    proc = spawn(procs, ["-m", "slot.pulsar.cli", "--config", str(config), "--listen", endpoint])
    permits = client(endpoint, reply_timeout_s=0.5)
    permits.acquire("geocode", timeout_s=READY_DEADLINE_S)
    assert permits.states()["geocode"].configured_per_s == 5.0
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(EXIT_DEADLINE_S) == 0
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "pulsar listening on" in log and "geocode 5 per 1 s" in log and "pulsar stopped" in log


def test_the_pulsar_command_says_when_its_endpoint_is_taken(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], procs: list[subprocess.Popen[str]],
) -> None:
    served = serve({})
    proc = spawn(procs, ["-m", "slot.pulsar.cli", "--listen", served.endpoint])
    assert proc.wait(EXIT_DEADLINE_S) == 1
    assert proc.stderr is not None
    assert f"cannot listen on {served.endpoint}" in proc.stderr.read()


def test_a_limiters_margin_is_left_unused_by_default() -> None:
    # The default 2% keeps calls a millisecond off their turns under a strict window.
    limiters = build_limiters({"api": RateLimitConfig(permits=10), "exact": RateLimitConfig(permits=10, margin=0)})
    assert limiters["api"].configured_per_s == pytest.approx(9.8)
    assert limiters["exact"].configured_per_s == pytest.approx(10.0)


class _BrokenLimiter(Limiter):
    """A limiter with a bug: the fault no real request can cause (the frames are checked)."""

    def try_acquire(self, *args: object, **kwargs: object) -> Grant:
        raise ZeroDivisionError("a bug in the limiter")


def test_a_request_the_pulsar_fails_on_gets_an_error_reply_and_the_others_their_permits(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served], client: Callable[..., PermitClient],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before the audit branch the exception ended the pulsar's loop: no limiter answered again."""
    served = serve({"api": RateLimitConfig(permits=10, margin=0)})
    served.service.limiters["broken"] = _BrokenLimiter(10, 1.0)
    permits = client(served.endpoint)
    with pytest.raises(PermitError, match="the pulsar failed to answer this request"):
        permits.acquire("broken", timeout_s=5.0)
    permits.acquire("api", timeout_s=5.0)
    assert any(r.getMessage().startswith("answering a pulsar request failed") and r.exc_info
               for r in caplog.records)
