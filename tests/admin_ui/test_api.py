"""The JSON API over a real SQLite database filled through the manager's models."""
from __future__ import annotations

from pathlib import Path

import admin_sample
import pytest
from admin_sample import NOW, QUEUES
from admin_testing import CLOCK, TEST_CLIENT_HOSTS, MakeClient, TestClient
from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.app import create_app
from admin_ui.settings import AdminSettings
from manager.storage.db import Base, Event, HostSample, QueueSample, SlotMapRow, make_engine
from manager.storage.store import Store

SPECS = {spec.name: spec for spec in QUEUES}


def test_queues_lists_every_reported_queue_with_its_newest_sample(client: TestClient) -> None:
    body = client.get("/api/queues").json()
    assert body["at_unix"] == NOW
    assert body["age_s"] == pytest.approx(CLOCK - NOW)
    rows = {row["queue"]: row for row in body["queues"]}
    assert set(rows) == set(SPECS)
    for name, spec in SPECS.items():
        row = rows[name]
        assert (row["priority"], row["min_slots"], row["max_slots"]) == (
            spec.priority, spec.min_slots, spec.max_slots)
        assert (row["slots_current"], row["slots_desired"]) == (spec.slots, spec.desired)
        assert row["load"] == pytest.approx(spec.load)
        assert (row["waiting"], row["running"], row["delayed"], row["errors"]) == (
            spec.waiting, spec.running, spec.delayed, spec.errors)
        assert row["jobs_per_s"] == pytest.approx(spec.jobs_per_s)
        assert row["mean_job_s"] == pytest.approx(spec.mean_job_s)
        assert row["paused"] is spec.paused


def test_queues_default_to_priority_biggest_first_then_name(client: TestClient) -> None:
    names = [row["queue"] for row in client.get("/api/queues").json()["queues"]]
    expected = sorted(SPECS, key=lambda name: (-SPECS[name].priority, name))
    assert names == expected


def test_sort_by_load_goes_biggest_first_and_order_asc_reverses_it(client: TestClient) -> None:
    desc = client.get("/api/queues", params={"sort": "load"}).json()
    assert desc["order"] == "desc"
    loads = [row["load"] for row in desc["queues"]]
    assert loads == sorted(loads, reverse=True)
    asc = client.get("/api/queues", params={"sort": "load", "order": "asc"}).json()
    assert [row["load"] for row in asc["queues"]] == sorted(loads)


def test_sort_by_name_goes_a_to_z_first(client: TestClient) -> None:
    names = [row["queue"] for row in client.get("/api/queues?sort=queue").json()["queues"]]
    assert names == sorted(SPECS)


def test_an_unknown_sort_column_is_refused(client: TestClient) -> None:
    assert client.get("/api/queues", params={"sort": "nonsense"}).status_code == 422


def test_trend_is_up_when_the_manager_wants_more_slots_and_down_when_fewer(client: TestClient) -> None:
    rows = {row["queue"]: row for row in client.get("/api/queues").json()["queues"]}
    assert rows["mail_send"]["trend"] == "up"  # 18 -> 24
    assert rows["photo_resize"]["trend"] == "down"  # 12 -> 9
    assert rows["push_notify"]["trend"] == "steady"


def test_totals_add_up_the_queue_rows(client: TestClient) -> None:
    body = client.get("/api/queues").json()
    totals = body["totals"]
    assert totals["slots_current"] == sum(spec.slots for spec in QUEUES)
    assert totals["waiting"] == sum(spec.waiting for spec in QUEUES)
    assert totals["jobs_per_s"] == pytest.approx(sum(spec.jobs_per_s for spec in QUEUES))


def test_a_configured_queue_without_samples_is_listed_as_unreported(client: TestClient) -> None:
    assert client.get("/api/queues").json()["unreported"] == [admin_sample.CONFIGURED_ONLY]


def test_a_queue_gone_from_the_manager_for_long_is_no_longer_listed(
    client: TestClient, engine: Engine,
) -> None:
    with Session(engine) as session:
        old = {**admin_sample.queue_rows(now=NOW, history_s=0)[0], "queue": "retired",
               "at_unix": NOW - 3000}
        session.execute(insert(QueueSample), [old])
        session.commit()
    assert "retired" not in {row["queue"] for row in client.get("/api/queues").json()["queues"]}


def test_queue_detail_names_the_hosts_of_the_current_slot_map_and_recent_events(
    client: TestClient,
) -> None:
    body = client.get("/api/queues/mail_send").json()
    assert body["row"]["slots_current"] == SPECS["mail_send"].slots
    assert sum(host["slots"] for host in body["hosts"]) == SPECS["mail_send"].slots
    assert admin_sample.LOST_HOST not in {host["host"] for host in body["hosts"]}
    assert body["config"]["max_slots"] == SPECS["mail_send"].max_slots
    assert [event["kind"] for event in body["events"]] == ["slots_moved"]


def test_a_configured_queue_without_samples_has_a_detail_without_numbers(client: TestClient) -> None:
    body = client.get(f"/api/queues/{admin_sample.CONFIGURED_ONLY}").json()
    assert body["row"] is None
    assert body["config"]["max_slots"] == 4


def test_an_unknown_queue_is_not_found_and_a_bad_name_is_refused(client: TestClient) -> None:
    assert client.get("/api/queues/no_such_queue").status_code == 404
    assert client.get("/api/queues/bad-name!").status_code == 422


def test_history_averages_the_samples_of_the_range_into_at_most_240_points(client: TestClient) -> None:
    body = client.get("/api/queues/mail_send/history", params={"range_s": 3600}).json()
    points = body["points"]
    assert body["until_unix"] == NOW
    assert body["bucket_s"] == 15.0
    assert 200 <= len(points) <= 241
    assert [p["at_unix"] for p in points] == sorted(p["at_unix"] for p in points)
    assert points[-1]["at_unix"] == NOW
    assert all(NOW - 3600 < p["at_unix"] <= NOW for p in points)
    assert all(p["min_slots"] == 2 and p["max_slots"] == 40 for p in points)


def test_a_short_history_range_keeps_every_planning_interval(client: TestClient) -> None:
    points = client.get("/api/queues/mail_send/history", params={"range_s": 300}).json()["points"]
    assert len(points) == 60
    assert points[-1]["slots_current"] == SPECS["mail_send"].slots


def test_slot_map_is_the_newest_plan_with_every_hosts_memory(client: TestClient, engine: Engine) -> None:
    with Session(engine) as session:  # an older plan that must not show
        session.add(SlotMapRow(at_unix=NOW - 60, host="node01", queue="likes_delete", slots=7))
        session.commit()
    body = client.get("/api/slotmap").json()
    assert body["at_unix"] == NOW
    assert body["total"] == sum(spec.slots for spec in QUEUES)
    assert "likes_delete" not in body["queues"]
    assert body["queue_totals"]["mail_send"] == SPECS["mail_send"].slots
    assert body["queues"][:2] == ["mail_send", "push_notify"]  # the queues page's order
    hosts = {host["host"]: host for host in body["hosts"]}
    assert set(hosts) == set(admin_sample.HOSTS)
    node02 = hosts["node02"]
    assert node02["alive"] and node02["reported"]
    assert node02["mem_total_bytes"] == 32 * admin_sample.GIB
    assert node02["avg_slot_bytes"] == 52 * admin_sample.MIB
    assert node02["mapped"] == sum(node02["by_queue"].values()) == node02["slots"]
    assert node02["recycled_for_memory"] == 3 and node02["killed_hung"] == 1
    assert node02["recycled_for_jobs"] == 11 and node02["recycled_for_age"] == 1
    assert node02["load_cap"] is None and hosts["node03"]["load_cap"].startswith("capped by load: 40 of 64")
    lost = hosts[admin_sample.LOST_HOST]
    assert not lost["alive"] and lost["mapped"] == 0


def test_a_host_in_the_slot_map_without_a_report_is_shown_unreported(
    client: TestClient, engine: Engine,
) -> None:
    with Session(engine) as session:
        session.add(SlotMapRow(at_unix=NOW, host="node99", queue="mail_send", slots=1))
        session.commit()
    hosts = {host["host"]: host for host in client.get("/api/slotmap").json()["hosts"]}
    assert hosts["node99"]["reported"] is False
    assert hosts["node99"]["by_queue"] == {"mail_send": 1}


def test_events_are_newest_first_and_filter_by_kind_queue_host_and_time(client: TestClient) -> None:
    every = client.get("/api/events").json()
    times = [event["at_unix"] for event in every["events"]]
    assert times == sorted(times, reverse=True)
    assert every["kinds"] == ["master_back", "master_lost", "queue_paused", "slots_moved"]
    lost = client.get("/api/events", params={"kind": "master_lost"}).json()["events"]
    assert {event["host"] for event in lost} == {"node04", admin_sample.LOST_HOST}
    on_node04 = client.get("/api/events", params={"host": "node04"}).json()["events"]
    assert [event["kind"] for event in on_node04] == ["master_back", "master_lost", "slots_moved"]
    queue = client.get("/api/events", params={"queue": "likes_delete"}).json()["events"]
    assert [event["kind"] for event in queue] == ["queue_paused"]
    window = client.get("/api/events", params={"since_unix": NOW - 2600, "until_unix": NOW - 2000}).json()
    assert [event["kind"] for event in window["events"]] == [
        "slots_moved", "master_back", "master_lost", "slots_moved"]


def test_events_page_back_with_before_id(client: TestClient) -> None:
    first = client.get("/api/events", params={"limit": 4}).json()
    assert len(first["events"]) == 4 and first["older_before_id"] is not None
    rest = client.get("/api/events", params={"limit": 100, "before_id": first["older_before_id"]}).json()
    assert rest["older_before_id"] is None
    ids = [event["id"] for event in first["events"] + rest["events"]]
    assert len(ids) == len(set(ids)) == len(admin_sample.event_rows(now=NOW))


def test_a_before_id_past_what_sql_holds_is_a_422_not_a_500(client: TestClient) -> None:
    for path in ("/api/events", "/events"):
        assert client.get(path, params={"before_id": 10**23}).status_code == 422
        assert client.get(path, params={"before_id": 0}).status_code == 422
        assert client.get(path, params={"before_id": 2**63 - 1}).status_code == 200


def test_a_database_without_the_managers_tables_answers_503_with_the_reason(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with TestClient(create_app(Store(engine), AdminSettings(allowed_hosts=TEST_CLIENT_HOSTS))) as client:
        response = client.get("/api/queues")
        assert response.status_code == 503
        assert "manager has not created" in response.json()["detail"]
        page = client.get("/queues")
        assert page.status_code == 503 and "no data yet" in page.text
    engine.dispose()


def test_empty_tables_give_empty_views(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    Base.metadata.create_all(engine)
    with TestClient(create_app(Store(engine), AdminSettings(allowed_hosts=TEST_CLIENT_HOSTS))) as client:
        assert client.get("/api/queues").json()["queues"] == []
        assert client.get("/api/slotmap").json()["hosts"] == []
        assert client.get("/api/events").json()["events"] == []
        assert client.get("/api/health").json()["latest_sample_unix"] is None
        for page in ("/queues", "/slotmap", "/events"):
            assert client.get(page).status_code == 200
    engine.dispose()


def test_openapi_describes_every_api_route(client: TestClient) -> None:
    paths = set(client.get("/openapi.json").json()["paths"])
    assert {"/api/queues", "/api/queues/{queue}", "/api/queues/{queue}/history", "/api/slotmap",
            "/api/events", "/api/queues/{queue}/pause", "/api/queues/{queue}/resume",
            "/api/queues/{queue}/limits", "/metrics", "/api/health"} <= paths
    assert not any(path.startswith("/queues") for path in paths)
    assert client.get("/docs").status_code == 200


def test_host_samples_older_than_the_newest_are_ignored(client: TestClient, engine: Engine) -> None:
    with Session(engine) as session:
        old = admin_sample.host_rows(now=NOW - 30, mapped=[])[0]
        session.execute(insert(HostSample), [{**old, "capacity": 999}])
        session.add(Event(at_unix=NOW, kind="probe", actor="manager", message="m", detail=None))
        session.commit()
    hosts = {host["host"]: host for host in client.get("/api/slotmap").json()["hosts"]}
    assert hosts["node01"]["capacity"] == 40


def test_health_reports_the_newest_sample_and_whether_actions_are_possible(
    make_client: MakeClient,
) -> None:
    assert make_client().get("/api/health").json() == {
        "ok": True, "database": make_client().get("/api/health").json()["database"],
        "latest_sample_unix": NOW, "read_only": True,
    }
    assert make_client(token="t").get("/api/health").json()["read_only"] is False
