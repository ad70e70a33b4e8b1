"""Server-side SVG charts: round grid steps, one line per series, escaped labels, an empty state."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import admin_sample
import pytest
from admin_sample import NOW
from admin_testing import TestClient
from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from admin_ui.charts import QUEUE_CHARTS, Series, line_chart, y_axis
from admin_ui.format import LOAD_INFINITE
from manager.storage.db import QueueSample

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(("top", "whole", "expected"), [
    (50, False, (10, 5)), (4210, True, (1000, 5)), (0.5, False, (0.1, 5)), (2.64, False, (0.5, 6)),
    (0.2, True, (1.0, 1)), (0, False, (0.25, 4)),
])
def test_the_y_axis_steps_are_round_and_reach_the_top(top: float, whole: bool,
                                                      expected: tuple[float, int]) -> None:
    step, lines = y_axis(top, whole=whole)
    assert (step, lines) == pytest.approx(expected)
    assert step * lines >= top


def test_a_chart_draws_one_polyline_per_series_and_escapes_names() -> None:
    svg = line_chart(
        [Series("a<b", "#000", [(0, 1), (10, 3)]), Series("c", "#111", [(0, 2)], dashed=True)],
        title="q & r", y_format="int", t0=0, t1=10, y_lines=[("target", 2.0)],
    )
    root = ET.fromstring(svg)
    lines = root.findall(f"{SVG}polyline")
    assert [line.findtext(f"{SVG}title") for line in lines] == ["a<b", "c"]
    assert lines[1].get("stroke-dasharray") == "5 3"
    assert root.findtext(f"{SVG}title") == "q & r"
    labels = [text.text for text in root.findall(f"{SVG}text")]
    assert "0" in labels and "3" in labels


def test_a_chart_without_samples_says_so() -> None:
    svg = line_chart([Series("a", "#000", [])], title="t", y_format="f1", t0=0, t1=60)
    assert "no samples in this range" in svg
    ET.fromstring(svg)


def test_every_queue_chart_is_served_as_svg_over_the_samples(client: TestClient) -> None:
    for name in QUEUE_CHARTS:
        response = client.get(f"/queues/mail_send/charts/{name}.svg", params={"range": "15m"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("image/svg+xml")
        root = ET.fromstring(response.text)
        points = root.findall(f"{SVG}polyline")[0].get("points", "").split()
        assert len(points) == 180  # 15 minutes of 5 s plans
    assert client.get("/queues/mail_send/charts/nope.svg").status_code == 404
    assert client.get("/queues/mail_send/charts/slots.svg?range=2y").status_code == 422


def test_a_chart_range_ends_at_the_queues_newest_sample(client: TestClient) -> None:
    svg = client.get("/queues/mail_send/charts/load.svg", params={"range": "1h"}).text
    root = ET.fromstring(svg)
    x_labels = [t.text for t in root.findall(f"{SVG}text") if t.get("y") == str(200 - 6)]
    assert x_labels[-1] == "12:00" and NOW % 86400 == 12 * 3600


def test_an_infinite_load_is_drawn_at_the_cap_so_the_rest_stays_readable(
    client: TestClient, engine: Engine,
) -> None:
    with Session(engine) as session:
        row = {**admin_sample.queue_rows(now=NOW + 5, history_s=0)[0], "load": LOAD_INFINITE}
        session.execute(insert(QueueSample), [row])
        session.commit()
    root = ET.fromstring(client.get("/queues/mail_send/charts/load.svg?range=15m").text)
    y_labels = [t.text for t in root.findall(f"{SVG}text") if t.get("text-anchor") == "end" and
                str(t.text).endswith("%")]
    assert y_labels[-1] == "1000%"
