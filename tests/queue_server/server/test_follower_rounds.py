"""A replica's follow task survives a round that raises: logged, and the next round runs.

Before the audit branch the exception ended the task, which the server holds, so asyncio
never reported it: the replica followed nobody and nothing said so."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from polling import DEADLINE_S

from queue_server.server.follower import Follower
from queue_server.server.server import QueueServer
from queue_server.server.settings import ServerSettings
from tests.conftest import free_port


def test_a_follow_round_that_raises_is_logged_and_the_next_round_promotes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="slotmap.queue_server")
    promotions: list[str] = []

    async def scenario() -> None:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="never", server_id=2))
        server.open()
        promote = server.promote

        def promote_failing_once() -> None:
            # A bug in one promotion: no real primary or client can make promote() raise.
            promotions.append("tried")
            if len(promotions) == 1:
                raise RuntimeError("a bug while promoting")
            promote()

        server.promote = promote_failing_once  # type: ignore[method-assign]
        try:
            # Nobody listens there: each round finds the primary gone and promotes at once.
            primary = ("127.0.0.1", free_port())
            await asyncio.wait_for(Follower(server, primary, promote_after_s=0.0).run(), DEADLINE_S)
        finally:
            server.data_dir.close()
        assert not server.following

    asyncio.run(scenario())
    assert promotions == ["tried", "tried"]
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("following the primary 127.0.0.1:") and " failed (RuntimeError: a bug while promoting); tried again in " in m
               for m in messages), messages
    assert any(" works again after 1 failed turns" in m for m in messages), messages
