"""latency.py buckets buffered observations in bulk: the counts and sums are those of
counting each one alone (`le` inclusive, past the last bound +Inf, a clock step back in
the first bucket), however the buffers are settled."""
from __future__ import annotations

import random

from queue_server.server.latency import BOUNDS, KINDS, SUMS, WIDTH, QueueLatency, settle_all


def _one_by_one(values: list[float]) -> list[int]:
    counts = [0] * WIDTH
    for value in values:
        counts[next((index for index, bound in enumerate(BOUNDS) if value <= bound), len(BOUNDS))] += 1
    return counts


def test_settling_in_bulk_counts_each_value_into_its_own_bucket() -> None:
    rng = random.Random(7)
    edges = [*BOUNDS, -0.5, 0.0, 3600.000001, 1e9]
    values = {kind: edges + [rng.uniform(-1, 4000) for _ in range(500)] + [rng.choice(BOUNDS) for _ in range(50)]
              for kind in KINDS}
    latency = QueueLatency()
    buffers = (latency.waits, latency.runs, latency.totals)
    for kind, buffer in zip(KINDS, buffers, strict=True):
        buffer.extend(values[kind][:300])
    latency.settle()
    assert not any(buffers)
    for kind, buffer in zip(KINDS, buffers, strict=True):
        buffer.extend(values[kind][300:])
    settle_all([latency])
    for index, kind in enumerate(KINDS):
        assert latency.cells[index * WIDTH:(index + 1) * WIDTH] == _one_by_one(values[kind]), kind
        assert abs(latency.cells[SUMS + index] - sum(values[kind])) < 1e-6


def test_the_reply_settles_first() -> None:
    class State:
        latency = QueueLatency()

    State.latency.waits.extend([0.0005, 2.0])
    from queue_server.server.latency import reply
    body = reply({"q": State()}, ["q"]).split(b"\r\n", 1)[1]
    assert b'"wait":[1,0,0,0,0,0,0,0,0,0,1,0' in body
    assert not State.latency.waits
