"""The blocking permit client against a real pulsar over ZeroMQ: what a wait brings, forks."""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pytest

from config.models import RateLimitConfig
from slot.pulsar.client import PermitClient, Taken


def test_take_returns_what_came_within_its_wait(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    permits = client(pulsar({"geo": RateLimitConfig(permits=10, margin=0), "rare": RateLimitConfig(permits=1, margin=0)}))
    # 10/s: four permits come within a second (at 0, 0.1, 0.2 and 0.3 s).
    assert permits.take("geo", 4, wait_s=1.0) == Taken(4, 0.0)
    # 1/s: the first at once, the second a second later, past the half second of wait.
    taken = permits.take("rare", 3, wait_s=0.5)
    assert taken.granted == 1
    assert 0.5 < taken.retry_after_s <= 1.0 + 1e-6
    with pytest.raises(ValueError, match="permits per request"):
        permits.take("geo", 0, wait_s=1)


def test_a_client_made_before_a_fork_asks_from_the_child_on_its_own_socket(
    pulsar: Callable[[Mapping[str, RateLimitConfig]], str], client: Callable[..., PermitClient],
) -> None:
    permits = client(pulsar({"geo": RateLimitConfig(permits=100, margin=0)}))
    permits.acquire("geo")
    pid = os.fork()
    if pid == 0:  # the child: exit code 0 when its permit came
        code = 1
        try:
            permits.acquire("geo", timeout_s=5.0)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    permits.acquire("geo", timeout_s=5.0)
