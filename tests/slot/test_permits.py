"""The slot's before_batch hook against a real pulsar over ZeroMQ: a batch's permits in time,
late, or not at all."""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import pytest

from config.models import QueueConfig, RateLimitConfig
from slot.handler import Outcome, SlotJob
from slot.permits import RateLimitHook, limiters_of, rate_limit_hook
from slot.pulsar.client import UNREACHABLE_DELAY_S, PermitClient
from tests.slot.pulsar.served import free_endpoint


def jobs(queue: str, count: int) -> list[SlotJob]:
    return [SlotJob(queue, i, 0, b"x", None) for i in range(1, count + 1)]


def test_only_queues_with_a_rate_limit_get_a_limiter() -> None:
    queues = {"geo": QueueConfig(rate_limit=RateLimitConfig(permits=5)), "free": QueueConfig()}
    assert limiters_of(queues) == {"geo": "geo"}


def test_the_hook_leaves_a_queue_without_rate_limit_alone() -> None:
    # Nothing listens there: a request would time out after 20 s and postpone the batch. (A
    # 0.1 s timeout and bound measured the machine's load, not whether the hook asked; a 5 s
    # bound equal to the timeout left too little room for a busy machine.)
    hook = RateLimitHook(PermitClient(free_endpoint(), reply_timeout_s=20.0), {"geo": "geo"})
    batch = jobs("free", 5)
    started = time.monotonic()
    assert list(hook("free", batch)) == batch
    assert time.monotonic() - started < 10.0
    hook.client.close()


def test_the_hook_runs_a_batch_whose_permits_come_in_time(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    queues = {"geo": QueueConfig(rate_limit=RateLimitConfig(permits=50))}
    hook = rate_limit_hook(client(pulsar({"geo": RateLimitConfig(permits=50)})), queues,
                           max_wait_s=20.0)
    batch = jobs("geo", 10)
    started = time.monotonic()
    assert list(hook("geo", batch)) == batch
    # Five at once (the capacity at 50/s), the other five 0.1 s later; the upper bound rules
    # out waiting the hook's max wait, with seconds of room for a busy shared machine.
    assert 0.05 <= time.monotonic() - started < 10.0
    assert all(job.outcome is Outcome.DONE for job in batch)


def test_the_hook_postpones_the_jobs_whose_permits_come_too_late(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(client(pulsar({"geo": RateLimitConfig(permits=2, period_s=1.0)})),
                         {"geo": "geo"}, max_wait_s=0.2)
    batch = jobs("geo", 6)
    started = time.monotonic()
    runnable = [job.id for job in hook("geo", batch)]  # each permit is taken as the job is reached
    took_s = time.monotonic() - started
    assert runnable == [1]
    assert all(job.outcome is Outcome.LATER for job in batch[1:])
    # The next permit is due at 0.5 s; the job comes back the client's reservation lead
    # (its wait, 0.2 s) before it, so the permit is reserved on its turn. The delay counts
    # from the pulsar's answer: off by at most the call's own time (milliseconds, unless a
    # busy machine held this thread back; a fixed 0.05 s could not allow for that).
    assert all(job.delay_s == pytest.approx(0.5 - 0.2, abs=0.05 + took_s) for job in batch[1:]), \
        ([job.delay_s for job in batch[1:]], took_s)


def test_the_hook_postpones_the_batch_when_no_pulsar_answers(
    client: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(client(free_endpoint(), reply_timeout_s=0.1), {"geo": "geo"},
                         max_wait_s=0.2)
    batch = jobs("geo", 3)
    assert list(hook("geo", batch)) == []
    assert [(job.outcome, job.delay_s) for job in batch] == [(Outcome.LATER, UNREACHABLE_DELAY_S)] * 3


def test_the_hook_postpones_the_batch_of_a_limiter_the_pulsar_does_not_know(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    hook = RateLimitHook(client(pulsar({})), {"geo": "geo"}, max_wait_s=7.0)
    batch = jobs("geo", 2)
    assert list(hook("geo", batch)) == []
    assert [job.delay_s for job in batch] == [7.0, 7.0]


def test_the_hook_stops_waiting_when_the_slot_is_asked_to_stop(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    # The next permit 20 s away (within the hook's max wait): a hook that waited for it, or
    # ignored the stop, ends past the 10 s bound below (with permits 1 s apart, the bound had
    # to be 0.5 s, and 5 s with permits 10 s apart: too little room for a busy shared machine).
    endpoint = pulsar({"geo": RateLimitConfig(permits=1, period_s=20.0)})
    asked_at = time.monotonic() + 0.3
    hook = RateLimitHook(client(endpoint), {"geo": "geo"}, max_wait_s=30.0,
                         stopping=lambda: time.monotonic() >= asked_at)
    batch = jobs("geo", 5)
    runnable = hook("geo", batch)
    assert time.monotonic() - asked_at < 10.0
    assert [job.id for job in runnable] == [1]
    assert all(job.outcome is Outcome.LATER for job in batch[1:])


