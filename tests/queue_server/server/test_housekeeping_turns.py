"""A housekeeping step or the expiry timer failing again and again is logged once (then once a
minute) and tried again every round, and the other steps still run (before the audit branch: a
traceback every 0.5 s, every 1 s for the timer)."""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from queue_server.server.server import QueueServer
from queue_server.server.settings import ServerSettings


def test_a_failing_step_is_logged_once_and_the_next_rounds_run_every_step(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="slotmap.queue_server")
    ran: list[str] = []

    async def scenario() -> None:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="never"))
        server.open()
        tick = server.replication_tick

        def replication_tick() -> None:
            # A bug in one chore: nothing from outside makes the replication tick raise.
            ran.append("replication_tick")
            if ran.count("replication_tick") <= 3:
                raise RuntimeError("a bug in the chore")
            tick()

        def cut_unsent_output() -> None:
            ran.append("cut_unsent_output")

        server.replication_tick = replication_tick  # type: ignore[method-assign]
        server.housekeeping.cut_unsent_output = cut_unsent_output  # type: ignore[method-assign]
        try:
            for _ in range(4):  # four rounds, as the timer would run them
                server.housekeeping.run()
        finally:
            server.data_dir.close()

    asyncio.run(scenario())
    assert ran == ["replication_tick", "cut_unsent_output"] * 4
    said = [r for r in caplog.records if r.getMessage().startswith("housekeeping: ")]
    assert [r.getMessage() for r in said] == [
        "housekeeping: replication_tick failed (RuntimeError: a bug in the chore); tried again in 0.5 s",
        "housekeeping: replication_tick works again after 3 failed turns",
    ]
    assert said[0].exc_info is not None


def test_an_expiry_timer_that_raises_is_armed_again_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="slotmap.queue_server")
    armed: list[bool] = []

    async def scenario() -> None:
        server = QueueServer(ServerSettings(data_dir=str(tmp_path / "d"), fsync="never"))
        server.open()
        fire = server.fire_timers_if_due
        calls: list[int] = []

        def fire_timers_if_due(*, dead_ages: bool = False) -> None:
            # A bug in one firing: no client can make the expiry of deadlines raise.
            calls.append(1)
            if len(calls) <= 2:
                raise RuntimeError("a bug in the expiry")
            fire(dead_ages=dead_ages)

        server.fire_timers_if_due = fire_timers_if_due  # type: ignore[method-assign]
        try:
            for _ in range(3):  # as the loop would run it: armed again after each failure
                server._on_timer()
                armed.append(server._timer is not None)
                if server._timer is not None:
                    server._timer.cancel()
        finally:
            server.data_dir.close()

    asyncio.run(scenario())
    assert armed == [True, True, False]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("the expiry timer")]
    assert said == ["the expiry timer failed (RuntimeError: a bug in the expiry); fired again in 1 s",
                    "the expiry timer works again after 2 failed turns"]
