"""The dashboard over a database filled by a real manager run (queue server, manager, master, slots).

Uses the manager tests' process helpers (tests/manager/test_service_procs.py); every process
is killed with its group at the end.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from admin_proc import AdminProc, cluster_admin_while
from admin_testing import poll_until
from procs import import_by_path, slotmap_command
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from manager.storage.db import QueueSample, make_engine
from queue_server.client import QueueClient

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKEN = "manager-run-token"
QUEUES = {
    "demo_noop": {"min_slots": 2, "max_slots": 2, "priority": 2},
    "demo_resize": {"min_slots": 1, "max_slots": 1, "priority": 1},
    "demo_echo": {"max_slots": 0},
    "demo_flaky": {"max_slots": 0},
}
DEADLINE_S = 20.0


# The manager tests' helpers, under the name they import them by.
procs = import_by_path("test_service_procs", REPO_ROOT / "tests" / "manager" / "test_service_procs.py")


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, AdminProc]]:
    """The cluster and its dashboard, started while the manager waits out its first plan's grace."""
    cluster = procs.Cluster.create(tmp_path_factory.mktemp("manager_run"), QUEUES)
    try:
        cluster.start_queue_server()
        cluster.start_manager()
        master = cluster.start_master("alpha")
        with cluster_admin_while(lambda: procs.wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1}),
                                 cluster, token=TOKEN) as admin:
            yield cluster, admin
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def cluster(started: tuple[Any, AdminProc]) -> Any:
    return started[0]


@pytest.fixture(scope="module")
def admin(started: tuple[Any, AdminProc]) -> AdminProc:
    return started[1]


def master_of(cluster: Any) -> Any:
    return next(proc for proc in cluster.procs if proc.name == "master-alpha")


def newest_samples(database_url: str) -> dict[str, QueueSample]:
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            newest = session.scalar(select(func.max(QueueSample.at_unix)))
            rows = session.scalars(select(QueueSample).where(QueueSample.at_unix == newest))
            return {row.queue: row for row in rows}
    finally:
        engine.dispose()


def test_the_dashboard_shows_the_slot_map_hosts_and_events_a_real_manager_stored(
    cluster: Any, admin: AdminProc,
) -> None:
    slot_map = poll_until(
        lambda: (body := admin.get("/api/slotmap").json())["total"] == 3 and body,
        deadline_s=DEADLINE_S, what="the manager's slot map of 3 slots")
    [alpha] = slot_map["hosts"]
    assert alpha["host"] == "alpha" and alpha["alive"] and alpha["reported"]
    assert alpha["by_queue"] == master_of(cluster).running() == {"demo_noop": 2, "demo_resize": 1}
    assert alpha["capacity"] >= 3 and alpha["avg_slot_bytes"] > 0 and alpha["master_pss_bytes"] > 0
    assert alpha["mem_available_bytes"] > 0
    queues = {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}
    assert set(queues) == set(QUEUES)
    assert [row["queue"] for row in admin.get("/api/queues").json()["queues"]][:2] == [
        "demo_noop", "demo_resize"]
    kinds = {event["kind"] for event in admin.get("/api/events").json()["events"]}
    assert {"manager_active", "master_joined"} <= kinds
    joined = admin.get("/api/events", params={"kind": "master_joined"}).json()["events"]
    assert [event["host"] for event in joined] == ["alpha"]


def test_queue_rows_are_the_managers_newest_samples(cluster: Any, admin: AdminProc) -> None:
    def same() -> bool:
        stored = newest_samples(cluster.database_url)
        shown = {row["queue"]: row for row in admin.get("/api/queues").json()["queues"]}
        return bool(stored) and all(
            (row["at_unix"], row["slots_current"], row["slots_desired"], row["load"], row["waiting"])
            == (stored[name].at_unix, stored[name].slots_current, stored[name].slots_desired,
                stored[name].load, stored[name].waiting)
            for name, row in shown.items()
        )

    # The manager writes every 0.5 s: compare at a moment between two plans.
    poll_until(same, deadline_s=DEADLINE_S, what="API rows equal to the newest stored samples")


def test_jobs_done_by_real_slots_reach_the_metrics_counters_and_histograms(cluster: Any, admin: AdminProc) -> None:
    """Issue 26: one done counter (the queue server's), and the run-time histogram of jobs
    that real slots ran, per queue."""
    def value(name: str) -> float:
        text = admin.get("/metrics").text
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and sample.labels == {"queue": "demo_noop"}:
                    return sample.value
        return 0.0

    before = value("slotmap_jobs_done_total")
    runs_before = value("slotmap_queue_run_seconds_count")
    with QueueClient(cluster.queue_server.address) as client:
        client.put_many("demo_noop", [b"x"] * 40)
    poll_until(lambda: value("slotmap_jobs_done_total") >= before + 40, deadline_s=DEADLINE_S,
               what="40 demo_noop jobs in the counter")
    assert value("slotmap_queue_run_seconds_count") >= runs_before + 40
    assert value("slotmap_queue_ready_to_done_seconds_count") >= runs_before + 40
    assert "slotmap_queue_jobs_done_total" not in admin.get("/metrics").text  # the one counter


def test_a_pause_from_the_dashboard_is_applied_by_the_manager_and_resume_brings_the_slot_back(
    cluster: Any, admin: AdminProc,
) -> None:
    master = master_of(cluster)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.post(admin.url + "/api/queues/demo_resize/pause", headers=headers).status_code == 200
    procs.wait_running(master, cluster, {"demo_noop": 2})
    row = poll_until(
        lambda: (r := admin.get("/api/queues/demo_resize").json()["row"])["paused"] and r["slots_current"] == 0
        and r, deadline_s=DEADLINE_S, what="demo_resize shown paused with no slots")
    assert row["trend"] in ("steady", "down")
    applied = poll_until(
        lambda: admin.get("/api/events", params={"kind": "override_applied", "queue": "demo_resize"}).json()["events"],
        deadline_s=DEADLINE_S, what="the manager's override_applied event")
    assert "paused" in applied[0]["message"]
    assert admin.get("/api/events", params={"kind": "pause_requested"}).json()["events"][0]["actor"] == "admin"
    assert httpx.post(admin.url + "/api/queues/demo_resize/resume", headers=headers).status_code == 200
    procs.wait_running(master, cluster, {"demo_noop": 2, "demo_resize": 1})
    poll_until(lambda: not admin.get("/api/queues/demo_resize").json()["row"]["paused"],
               deadline_s=DEADLINE_S, what="demo_resize shown running again")


def test_failed_and_dead_jobs_become_grouped_events_and_show_in_the_dashboard(
    cluster: Any, admin: AdminProc,
) -> None:
    with QueueClient(cluster.queue_server.address) as client:
        for n in range(3):  # demo_echo has no slots: nobody else takes these
            client.put_job("demo_echo", f"echo {n}".encode(), key=f"echo-{n}")
        for job in client.get("demo_echo", count=3, keys=True):
            if job.key == "echo-0":
                client.fail(job.id, "ValueError: no echo today", dead=True)
            else:
                client.fail(job.id, "ValueError: no echo today", delay_s=3600)

    def failures() -> dict[str, int]:
        events = admin.get("/api/events", params={"queue": "demo_echo", "group": "true"}).json()["events"]
        counts: dict[str, int] = {}
        for event in events:
            if event["kind"] in ("jobs_failed", "jobs_dead"):
                counts[event["kind"]] = counts.get(event["kind"], 0) + event["count"]
        return counts

    auth = {"Authorization": f"Bearer {TOKEN}"}  # job data needs the token
    poll_until(lambda: failures() == {"jobs_failed": 3, "jobs_dead": 1}, deadline_s=DEADLINE_S,
               what="the manager's jobs_failed (3) and jobs_dead (1) events")
    dead = admin.get("/api/queues/demo_echo/jobs", params={"state": "dead"}, headers=auth).json()
    assert [job["key"] for job in dead["jobs"]] == ["echo-0"]
    assert sorted(job["key"] for job in admin.get("/api/queues/demo_echo/jobs", headers=auth).json()["jobs"]) == [
        "echo-1", "echo-2"]
    page = admin.get("/events", params={"queue": "demo_echo"}).text
    assert 'href="/queues/demo_echo/jobs?state=dead"' in page and "jobs_dead" in page


def test_each_cancel_is_one_event_naming_its_door_the_clis_written_by_the_manager(
    cluster: Any, admin: AdminProc,
) -> None:
    with QueueClient(cluster.queue_server.address) as client:
        for key in ("cancel-cli", "cancel-api"):  # demo_echo has no slots: they wait
            client.put_job("demo_echo", b"echo", key=key)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    cli = subprocess.run([*slotmap_command(), "cancel", "demo_echo", "cancel-cli",
                          "--server", cluster.queue_server.address],
                         capture_output=True, text=True, timeout=30, env=env, check=False)
    assert (cli.returncode, cli.stdout) == (0, "cancel-cli: removed\n"), cli.stderr
    api = httpx.post(admin.url + "/api/queues/demo_echo/jobs/cancel-api/cancel",
                     headers={"Authorization": f"Bearer {TOKEN}"})
    assert api.json()["results"] == {"cancel-api": "removed"}

    def cancels() -> list[tuple[str, str, str]]:
        events = admin.get("/api/events", params={"kind": "job_cancelled"}).json()["events"]
        return sorted((e["detail"]["key"], e["detail"]["door"], e["actor"]) for e in events)

    poll_until(lambda: len(cancels()) >= 2, deadline_s=DEADLINE_S, what="the cancels' events")
    # A later plan reads the ring again: no second event for either (the API's is its own).
    seen_at = time.time()
    poll_until(lambda: max(row.at_unix for row in newest_samples(cluster.database_url).values()) > seen_at,
               deadline_s=DEADLINE_S, what="a later plan")
    assert cancels() == [("cancel-api", "api", "admin"), ("cancel-cli", "cli", "cli")]
