"""The manager reads STATS of its configured queues only (issue 16, point 11): a queue
server holding 20,000 other queues costs it two small replies, not a 5 MB STATS (with
50,000 queues that stalled the manager 2.8 s). Fails on f5016ee: the reader asked a whole
STATS (and the client had no `stats_of`)."""
from __future__ import annotations

from config.models import QueueConfig
from manager.planning.plan_inputs import NAMES_PER_REQUEST, QueueStatsReader
from queue_server.client import QueueClient

OTHERS = 20_000


def test_the_reader_asks_for_the_configured_queues_only(start_queue_server):
    server = start_queue_server("--fsync", "never")
    filler = server.connect(timeout_s=60.0)
    filler.send(b"".join(b"PUT other%d 0 1\r\nx" % index for index in range(OTHERS))
                + b"PUT photos 0 1\r\nx" * 3)
    filler.expect(b"200 OK\r\n" * (OTHERS + 3))
    configured = {"photos": QueueConfig(), "mail": QueueConfig(),
                  **{f"q{index}": QueueConfig() for index in range(NAMES_PER_REQUEST + 5)}}
    client = QueueClient(server.address, timeout_s=30.0)
    try:
        stats = QueueStatsReader(client).read(configured)
    finally:
        client.close()
    assert set(stats) == set(configured)
    assert stats["photos"].ready == 3 and stats["mail"].ready == 0 and stats["mail"].put == 0
