"""An admin lifts a rate limiter's pause from the dashboard (API and page), with an event."""
from __future__ import annotations

from collections.abc import Iterator

import pytest
from admin_testing import MakeClient

from admin_ui.limiters import LimiterReader
from config.models import QueueConfig, RateLimitConfig
from slot.pulsar.client import PermitClient
from slot.pulsar.protocol import pause
from tests.slot.pulsar.served import Served, free_endpoint

TOKEN = "t0ken"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
RATED = {"mail_send": QueueConfig(rate_limit=RateLimitConfig(permits=10, period_s=1.0))}


@pytest.fixture
def served() -> Iterator[Served]:
    pulsar = Served(free_endpoint(), {"mail_send": RATED["mail_send"].rate_limit})  # type: ignore[dict-item]
    yield pulsar
    pulsar.close()


def test_the_api_lifts_a_limiters_pause_and_records_who(make_client: MakeClient, served: Served) -> None:
    reader = LimiterReader(served.endpoint)
    client = make_client(token=TOKEN, limiters=reader, queues=RATED)
    try:
        with PermitClient(served.endpoint) as permits:
            assert permits.report("mail_send", pause(120))
            assert client.post("/api/queues/mail_send/limiter/resume").status_code == 401
            page = client.get("/queues/mail_send", headers=BEARER).text
            assert 'id="limiter-resume"' in page
            reply = client.post("/api/queues/mail_send/limiter/resume", headers=BEARER)
            assert reply.status_code == 200, reply.text
            assert permits.states()["mail_send"].paused_for_s == 0
        events = client.get("/api/events", headers=BEARER).json()["events"]
        assert any(event["kind"] == "limiter_resumed" and event["queue"] == "mail_send" for event in events)
    finally:
        reader.close()


def test_a_queue_without_a_rate_limit_has_no_limiter_to_resume(make_client: MakeClient) -> None:
    client = make_client(token=TOKEN)
    assert client.post("/api/queues/mail_send/limiter/resume", headers=BEARER).status_code == 404
