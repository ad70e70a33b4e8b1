"""A real pulsar answering from a thread of the test process, and clients of it (fixtures
for the pulsar's tests and the slot's permit tests)."""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator, Mapping

import pytest

from config.models import RateLimitConfig
from slot.pulsar.client import PermitClient
from slot.pulsar.service import PulsarService

EXIT_DEADLINE_S = 10.0


def free_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


class Served:
    """A PulsarService answering from a thread of the test process."""

    def __init__(self, endpoint: str, limits: Mapping[str, RateLimitConfig]) -> None:
        self.service = PulsarService(endpoint, limits)
        self.endpoint = endpoint
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self.service.run_until, args=(self._stop.is_set,), kwargs={"tick_ms": 20},
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(EXIT_DEADLINE_S)
        assert not self._thread.is_alive(), "the pulsar thread did not stop"
        self.service.close()


@pytest.fixture
def serve() -> Iterator[Callable[[Mapping[str, RateLimitConfig]], Served]]:
    started: list[Served] = []

    def start(limits: Mapping[str, RateLimitConfig]) -> Served:
        started.append(Served(free_endpoint(), limits))
        return started[-1]

    yield start
    for served in started:
        served.close()


@pytest.fixture
def pulsar(
    serve: Callable[[Mapping[str, RateLimitConfig]], Served],
) -> Callable[[Mapping[str, RateLimitConfig]], str]:
    """Start a pulsar serving `limits`; returns its endpoint."""
    return lambda limits: serve(limits).endpoint


@pytest.fixture
def client() -> Iterator[Callable[..., PermitClient]]:
    """Connect a PermitClient (closed after the test)."""
    clients: list[PermitClient] = []

    def connect(endpoint: str, **options: float) -> PermitClient:
        clients.append(PermitClient(endpoint, **options))  # type: ignore[arg-type]
        return clients[-1]

    yield connect
    for one in clients:
        one.close()
