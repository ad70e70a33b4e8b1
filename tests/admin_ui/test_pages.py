"""The server-rendered pages (no JavaScript): numbers, sort links, filters and friendly errors."""
from __future__ import annotations

import re

from admin_sample import QUEUES
from admin_testing import TestClient

from admin_ui.format import fmt


def rows_in_order(html: str) -> list[str]:
    return re.findall(r'<tr data-key="([a-z_]+)"', html)


def test_queues_page_shows_each_queues_numbers_formatted(client: TestClient) -> None:
    html = client.get("/queues").text
    for spec in QUEUES:
        row = re.search(rf'<tr data-key="{spec.name}".*?</tr>', html, re.S)
        assert row is not None, spec.name
        cells = dict(re.findall(r'data-field="(\w+)" data-fmt="\w+" data-value="[^"]*"[^>]*>([^<]*)<', row.group(0)))
        assert cells["load"] == fmt(spec.load, "pct")
        assert cells["waiting"] == fmt(spec.waiting, "int")
        assert cells["mean_job_s"] == fmt(spec.mean_job_s, "secs")
        assert cells["slots_avg"] == fmt(spec.slots * 0.94, "f1")
    assert 'data-trend="up">137%' in html and 'data-trend="down">46%' in html


def test_sort_links_sort_on_the_server_and_the_current_one_flips(client: TestClient) -> None:
    html = client.get("/queues?sort=waiting").text
    waiting = {spec.name: spec.waiting for spec in QUEUES}
    assert rows_in_order(html) == sorted(waiting, key=lambda name: (-waiting[name], name))
    assert 'href="?sort=waiting&amp;order=asc"' in html
    assert 'aria-sort="descending"' in html
    assert 'href="?sort=load&amp;order=desc"' in html
    assert rows_in_order(client.get("/queues?sort=queue&order=desc").text) == sorted(waiting, reverse=True)


def test_slot_map_page_shows_host_memory_and_the_lost_host(client: TestClient) -> None:
    html = client.get("/slotmap").text
    assert "32.0 GiB" in html and "52.0 MiB" in html
    assert re.search(r'<tr data-key="node06" data-sig="010000" class="lost">', html)
    # The Busy page links a running job's host here.
    assert '<th scope="row" id="host-node06">' in html


def test_slot_map_page_marks_a_host_capped_by_load(client: TestClient) -> None:
    html = client.get("/slotmap").text
    row = re.search(r'<tr data-key="node03" data-sig="111000">.*?</tr>', html, re.S)
    assert row is not None
    assert ('<span class="badge" title="capped by load: 40 of 64 slots (load 3.00 on 2 CPUs, '
            'limit 2)">capped by load</span>') in row.group(0)
    assert "capped by load" not in html.split('data-key="node02"')[1].split("</tr>")[0]


def test_slot_map_page_shows_each_hosts_code_version_and_marks_other_code_and_refused_reloads(
    client: TestClient,
) -> None:
    html = client.get("/slotmap").text
    rows = {m.group(1): m.group(0) for m in re.finditer(r'<tr data-key="(node0\d)".*?</tr>', html, re.S)}
    assert "<code>a1b2c3d4e5f6</code>" in rows["node01"] and "badge" not in rows["node01"]
    assert "<code>0f9e8d7c6b5a</code>" in rows["node02"] and ">other code</span>" in rows["node02"]
    assert ">reload refused</span>" in rows["node05"] and "SyntaxError" in rows["node05"]
    hosts = {h["host"]: h for h in client.get("/api/slotmap").json()["hosts"]}
    assert hosts["node02"]["code_version"] == "0f9e8d7c6b5a" and hosts["node02"]["other_code"]
    assert not hosts["node01"]["other_code"]


def test_events_page_filters_from_the_form_fields(client: TestClient) -> None:
    # node04 was lost at 11:18:20 UTC, node06 at 11:59:20.
    html = client.get("/events", params={"kind": "master_lost", "since": "2024-06-01T11:30"}).text
    assert re.findall(r'class="kind kind-(\w+)"', html) == ["master_lost"]
    assert 'href="/events?host=node06"' in html
    assert '<option selected>master_lost</option>' in html


def test_a_bad_time_in_the_events_filter_says_what_is_expected(client: TestClient) -> None:
    response = client.get("/events", params={"since": "yesterday"})
    assert response.status_code == 400 and "YYYY-MM-DDTHH:MM" in response.text


def test_an_unknown_queue_page_is_a_404_page(client: TestClient) -> None:
    response = client.get("/queues/nope")
    assert response.status_code == 404 and "no queue" in response.text


def test_the_root_redirects_to_the_queues(client: TestClient) -> None:
    assert client.get("/", follow_redirects=False).headers["location"] == "/queues"


def test_every_column_that_counts_something_says_what_in_its_title(client: TestClient) -> None:
    # The queue's name, a host's name and its state need no title; every count or figure does.
    plain = {"Queue", "Host", "State", "Total", "Code"}
    for path, table in (("/queues", "queues"), (f"/queues/{QUEUES[0].name}", "queue-stats"), ("/slotmap", "hosts")):
        page = client.get(path).text
        head = page[page.index(f'id="{table}"'):]
        head = head[:head.index("</thead>")]
        for attributes, name in re.findall(r"<th([^>]*)>(?:<a [^>]*>)?([^<]+)<", head):
            assert name in plain or 'title="' in attributes, (path, name)
