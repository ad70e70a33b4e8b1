"""The Schedules page and /api/schedules: next fire, the last job and its state from a real queue
server, and an admin's pause, resume and run now (each an event naming the door)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from admin_testing import CLOCK, MakeClient
from procs import server_proc
from sqlalchemy.engine import Engine

from admin_ui.schedule_file import ScheduleFile
from config.schedules import ScheduleConfig
from manager.schedules.state import ScheduleStates
from queue_server.client import QueueClient

TOKEN = "t0ken"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SCHEDULES = {
    "nightly": ScheduleConfig(cron="30 2 * * *", queue="reports"),
    "pulse": ScheduleConfig(every_s=10, queue="reports", data='{"kind": "pulse"}'),
}


@pytest.fixture
def queue_server(tmp_path: Path) -> Iterator[server_proc.ServerProc]:
    server = server_proc.start_queue_server(tmp_path, "--fsync", "never")
    yield server
    server.kill()


def test_the_api_lists_each_schedule_with_its_last_job_and_that_jobs_state(
    make_client: MakeClient, engine: Engine, queue_server: server_proc.ServerProc,
) -> None:
    states = ScheduleStates(engine)
    with QueueClient(queue_server.address) as producer:
        producer.put("reports", "x", key="nightly@2026-11-25T02:30:00Z")
    states.fired("nightly", tick_ms=1000, key="nightly@2026-11-25T02:30:00Z", now_unix=CLOCK)
    states.fired("pulse", tick_ms=1000, key="pulse@2026-11-25T02:30:10Z", now_unix=CLOCK)
    client = make_client(schedules=SCHEDULES, queue_servers=(queue_server.address,))
    rows = {row["name"]: row for row in client.get("/api/schedules").json()}
    assert rows["nightly"]["last_job_state"] == "ready"
    assert rows["pulse"]["last_job_state"] == "done"          # no job holds its key any more
    assert rows["pulse"]["rule"] == "every 10 s" and rows["pulse"]["next_fire_unix"] > CLOCK
    page = client.get("/schedules").text
    assert "nightly@2026-11-25T02:30:00Z" in page and "cron 30 2 * * * (UTC)" in page


def test_pause_resume_and_run_now_need_the_token_and_say_which_door(
    make_client: MakeClient, engine: Engine,
) -> None:
    client = make_client(token=TOKEN, schedules=SCHEDULES)
    assert client.post("/api/schedules/nightly/pause").status_code == 401
    assert client.post("/api/schedules/nightly/pause", headers=BEARER).status_code == 200
    assert client.get("/api/schedules", headers=BEARER).json()[0]["paused"] is True
    assert client.get("/api/schedules", headers=BEARER).json()[0]["next_fire_unix"] is None
    assert client.post("/api/schedules/nightly/run", headers=BEARER).status_code == 200
    assert ScheduleStates(engine).get("nightly").run_requested_at_unix == CLOCK
    assert client.post("/api/schedules/nightly/resume", headers=BEARER).status_code == 200
    assert client.post("/api/schedules/nosuch/run", headers=BEARER).status_code == 404
    events = client.get("/api/events", headers=BEARER).json()["events"]
    doors = [(e["kind"], e["detail"]["door"]) for e in events if e["kind"].startswith("schedule_")]
    assert sorted(doors) == [("schedule_paused", "api"), ("schedule_resumed", "api"),
                             ("schedule_run_requested", "api")]


def test_the_page_form_is_the_dashboard_door(make_client: MakeClient, engine: Engine) -> None:
    client = make_client(token=TOKEN, schedules=SCHEDULES)
    reply = client.post("/schedules/pulse/pause", headers=BEARER, follow_redirects=False)
    assert reply.status_code == 303
    assert ScheduleStates(engine).get("pulse").paused
    events = client.get("/api/events", headers=BEARER).json()["events"]
    assert [e["detail"]["door"] for e in events if e["kind"] == "schedule_paused"] == ["dashboard"]


def test_a_queue_server_away_shows_unknown_states_and_says_why_once(
    make_client: MakeClient, engine: Engine, queue_server: server_proc.ServerProc,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Before the audit branch: "unknown" on the page, and nothing anywhere saying why."""
    ScheduleStates(engine).fired("pulse", tick_ms=1000, key="pulse@2026-11-25T02:30:10Z", now_unix=CLOCK)
    client = make_client(schedules=SCHEDULES, queue_servers=(queue_server.address,))
    assert client.get("/api/schedules").status_code == 200  # read while it is there
    queue_server.kill()
    for _ in range(2):  # two page refreshes while it is away
        rows = {row["name"]: row for row in client.get("/api/schedules").json()}
        assert rows["pulse"]["last_job_state"] == "unknown"
    said = [r.getMessage() for r in caplog.records if "schedules' last jobs" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("reading the schedules' last jobs from the queue server failed (")
    assert 'their states show as "unknown" until it answers' in said[0]


def test_after_the_managers_reload_the_page_compares_it_with_the_file_as_it_is_now(
    make_client: MakeClient, engine: Engine, tmp_path: Path,
) -> None:
    """Before the audit_sched branch: the dashboard compared the manager with the file of its own
    start, so a schedule added and reloaded showed "not in the file" and its run now was a 404."""
    config = tmp_path / "cluster.toml"
    config.write_text('[schedules.pulse]\nevery_s = 10\nqueue = "reports"\n')
    pulse = {"pulse": ScheduleConfig(every_s=10, queue="reports")}
    client = make_client(token=TOKEN, schedules=pulse, schedule_file=ScheduleFile(config, pulse))
    config.write_text(config.read_text() + '\n[schedules.added]\nevery_s = 3.5\nqueue = "reports"\n')
    ScheduleStates(engine).set_running({**pulse, "added": ScheduleConfig(every_s=3.5, queue="reports")},
                                       now_unix=CLOCK)  # what the manager's reload does
    rows = {row["name"]: row for row in client.get("/api/schedules", headers=BEARER).json()}
    assert rows["added"]["manager_differs"] == "" and rows["pulse"]["manager_differs"] == ""
    assert client.post("/api/schedules/added/run", headers=BEARER).status_code == 200
    config.write_text("not = [toml")  # a broken file: the last good schedules stay
    rows = {row["name"]: row for row in client.get("/api/schedules", headers=BEARER).json()}
    assert rows["added"]["manager_differs"] == ""
