"""The Queues API shows the slots running now, from the manager's live counts, not the last
plan's sample (issue 28): a burst between plans shows within the manager's half-second write,
with its age. Real queue server, manager, master, slots and dashboard."""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from admin_proc import AdminProc, cluster_admin_while
from admin_testing import poll_until
from procs import import_by_path
from sqlalchemy import select
from sqlalchemy.orm import Session

from manager.storage.db import QueueSample, make_engine
from queue_server.client import QueueClient

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLERS_DIR = REPO_ROOT / "tests" / "master" / "handlers"
TOKEN = "live-slots-token"
# One full plan at the start, the next far beyond the test: only the live counts can show
# the burst's slots.
PLAN_INTERVAL_S = 120.0
DEADLINE_S = 30.0
# The live rows are rewritten every 0.5 s (manager/hosts/live.py): older than this, they were not.
STALE_S = 10.0

procs = import_by_path("test_service_procs", REPO_ROOT / "tests" / "manager" / "test_service_procs.py")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Any]:
    started = procs.Cluster.create(
        tmp_path,
        {"plod": {"priority": 5, "min_slots": 1, "max_slots": 3},
         "demo_noop": {"priority": 0, "min_slots": 1, "max_slots": 4}},
        plan_interval_s=PLAN_INTERVAL_S, burst_check_s=0.25,
    )
    try:
        started.start_queue_server()
        yield started
    finally:
        started.close()


def sampled_slots(database_url: str, queue: str) -> list[int]:
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            return list(session.scalars(select(QueueSample.slots_current).where(QueueSample.queue == queue)))
    finally:
        engine.dispose()


def plod_row(admin: AdminProc) -> dict[str, Any] | None:
    body = admin.get("/api/queues", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    return next((row for row in body["queues"] if row["queue"] == "plod"), None)


def test_the_queues_api_shows_a_burst_s_slots_before_the_next_plan_and_says_how_old(cluster: Any) -> None:
    cluster.start_manager()
    master = cluster.start_master("h1", handler_modules=["sm_test_retarget"], python_path=[str(HANDLERS_DIR)])
    # The dashboard starts while the manager waits out its first plan's grace (2 s).
    with cluster_admin_while(lambda: procs.wait_running(master, cluster, {"plod": 1, "demo_noop": 1}),
                             cluster, token=TOKEN) as admin:
        poll_until(lambda: (row := plod_row(admin)) and row["slots_current"] == 1,
                   deadline_s=DEADLINE_S, what="plod at its one slot")
        with QueueClient(cluster.queue_server.address) as client:
            log = str(cluster.root / "plod.log")
            client.put_many("plod", [json.dumps({"log": log, "n": n, "sleep_s": 5.0}) for n in range(300)])
        procs.wait_running(master, cluster, {"plod": 3, "demo_noop": 1})
        grown = poll_until(lambda: (row := plod_row(admin)) and row["slots_current"] == 3 and row,
                           deadline_s=DEADLINE_S, what="the API showing plod's 3 slots")
        # The Queues page refreshes every half second and says how old its slot counts are.
        page = admin.get("/queues", headers={"Authorization": f"Bearer {TOKEN}"}).text
        assert 'data-refresh-ms="500"' in page and 'data-field="slots_age_s"' in page
    # No plan's sample said more than 1 (the burst plan writes none): the 3 came from the
    # masters' reports through the manager's live rows, with their age.
    assert max(sampled_slots(cluster.database_url, "plod")) == 1
    assert grown["slots_live"] is True
    assert 0 <= grown["slots_age_s"] < STALE_S
    assert grown["trend"] == "steady"  # all the map gives it runs
