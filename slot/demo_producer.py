"""Keeps the demo queues busy: steady PUTs to demo_noop/resize/flaky and a call to demo_echo."""
from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from queue_server.client import QueueClient
from queue_server.protocol.client_errors import QueueServerError

log = logging.getLogger(__name__)

# Jobs per tick for each queue (a tick is 1/`ticks_per_s` of a second).
DEMO_MIX = {"demo_noop": 20, "demo_resize": 3, "demo_flaky": 2}


@dataclass(frozen=True, slots=True)
class ProducerSettings:
    servers: str | Sequence[str]
    token: str | None = None
    ticks_per_s: float = 10.0
    scale: float = 1.0
    duration_s: float | None = None


def produce(settings: ProducerSettings) -> int:
    """Run until interrupted (or `duration_s`); return the number of jobs put."""
    client = QueueClient(settings.servers, token=settings.token)
    put = 0
    tick_s = 1.0 / settings.ticks_per_s
    started = next_tick = time.monotonic()
    last_call = float("-inf")
    try:
        while settings.duration_s is None or time.monotonic() - started < settings.duration_s:
            try:
                put += _one_tick(client, settings.scale)
                if time.monotonic() - last_call >= 1.0:
                    last_call = time.monotonic()
                    _call_echo(client)
            except QueueServerError as exc:
                log.warning("queue server trouble (%s); trying again next tick", exc)
            next_tick += tick_s
            time.sleep(max(0.0, next_tick - time.monotonic()))
    finally:
        client.close()
    return put


def _one_tick(client: QueueClient, scale: float) -> int:
    put = 0
    for queue, per_tick in DEMO_MIX.items():
        count = max(1, round(per_tick * scale))
        datas = [
            json.dumps({"photo_id": random.randrange(10**6), "rounds": 200}) for _ in range(count)
        ]
        put += client.put_many(queue, datas)
    return put


def _call_echo(client: QueueClient) -> None:
    started = time.monotonic()
    answer = client.call("demo_echo", b"hello", output_queue="demo_echo_reply", expire_s=0,
                         then="done", timeout_s=5.0)
    log.info("demo_echo answered %r in %.1f ms", answer.data, (time.monotonic() - started) * 1000)
