"""The queue servers' sentinel through a database outage: said once with its reason, its end
said too, and the thread goes on (before the audit branch: a warning every 0.25 s turn)."""
from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from polling import poll_until
from sqlalchemy import text

from manager.failover.sentinel import Sentinel
from manager.storage.store import NewEvent, Store
from tests.conftest import free_port


def test_a_database_outage_is_said_once_and_its_end_too(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="manager.failover.sentinel")
    store = Store.open(f"sqlite:///{tmp_path / 'slotmap.db'}")
    events: list[NewEvent] = []
    stop = threading.Event()
    # Nobody listens there: no primary to lease, which the database outage comes before.
    sentinel = Sentinel(store.engine, [f"127.0.0.1:{free_port()}"], token=None, lease_s=1.0,
                        promote_after_s=60.0, sync_mode=False, note=events.append, stopping=stop.is_set)
    with store.engine.begin() as connection:  # the authority's table gone: every turn fails, for real
        connection.execute(text("ALTER TABLE queue_authority RENAME TO queue_authority_away"))
    thread = threading.Thread(target=sentinel.run, daemon=True)
    thread.start()
    try:
        poll_until(lambda: sentinel.database.failures >= 3, what=lambda: f"turns failing\n{caplog.text}")
        with store.engine.begin() as connection:
            connection.execute(text("ALTER TABLE queue_authority_away RENAME TO queue_authority"))
        poll_until(lambda: sentinel.database.failures == 0, what=lambda: f"the outage over\n{caplog.text}")
        assert thread.is_alive()
    finally:
        stop.set()
        thread.join(10.0)
        store.close()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("sentinel: reaching the database")]
    assert len(said) == 2, said
    assert said[0].startswith("sentinel: reaching the database failed (OperationalError: ")
    assert "no such table: queue_authority" in said[0] and "no lease renewed" in said[0]
    assert said[1].startswith("sentinel: reaching the database works again after ")
