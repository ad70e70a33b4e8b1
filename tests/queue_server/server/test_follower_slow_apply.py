"""A replica whose snapshot takes longer to apply than the primary's liveness limit keeps its
link: the time it spent applying is its own, not the primary's silence.

Seen under load (test_managed_failover, two busy loops beside the suite): a restarted
replica applied a 3.6 MB snapshot in over 3 s, then closed the link at once ("the primary
sent nothing for 3.3 s"), resynced with a larger snapshot, and so on for the rest of the run."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.server.follower import Follower
from queue_server.server.liveness import SILENCE_LIMIT_S
from queue_server.server.server import QueueServer
from queue_server.server.settings import ServerSettings
from tests.conftest import StartServer


def test_a_snapshot_applied_slower_than_the_liveness_limit_keeps_the_link(
    tmp_path: Path, start_queue_server: StartServer, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="slotmap.queue_server")
    primary = start_queue_server()
    primary.connect().request(b"PUT slow_apply 0 1\r\nx")

    async def scenario() -> tuple[object, object]:
        replica = QueueServer(ServerSettings(data_dir=str(tmp_path / "replica"), fsync="never", server_id=2))
        replica.open()
        replace_state = replica.replace_state

        def slow_replace_state(blob: bytes) -> bool:
            # A disk or CPU too slow for the snapshot: the loop is held as a real apply holds it
            # (no real snapshot is slow enough on demand, whatever the load).
            time.sleep(SILENCE_LIMIT_S + 1.0)
            return replace_state(blob)

        replica.replace_state = slow_replace_state  # type: ignore[method-assign]
        follow = asyncio.create_task(Follower(replica, (primary.host, primary.port), promote_after_s=60.0).run())
        try:
            deadline = time.monotonic() + DEADLINE_S
            while replica.upstream is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            first_link = replica.upstream
            # Past two liveness limits: the primary's heartbeats keep a live link open.
            await asyncio.sleep(2 * SILENCE_LIMIT_S + 0.5)
            return first_link, replica.upstream
        finally:
            follow.cancel()
            await asyncio.gather(follow, return_exceptions=True)
            replica.data_dir.close()

    first_link, last_link = asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert first_link is not None, messages
    assert not any("sent nothing" in m for m in messages), messages
    assert last_link is first_link, messages
