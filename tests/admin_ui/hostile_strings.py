"""Hostile strings for the dashboard's XSS tests, and a manager history written with them in
every text column (as an old manager, a bug or a peer that got past the doors would leave it).

Each payload that runs sets `window.__xss` (or calls alert) to its own name, so a test can
say which one ran. Names without a `/` reach the queue page's route as well.
"""
from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import insert
from sqlalchemy.orm import Session

from manager.storage.db import (
    Event,
    HostSample,
    QueueOverride,
    QueueSample,
    ScheduleRow,
    SlotMapRow,
    make_engine,
)
from manager.storage.store import Store

PAYLOADS = (
    # Out of a double-quoted attribute into new attributes and an element.
    '"><img src=x onerror="window.__xss=\'img\'">',
    # Attributes that run on their own, for an unquoted or half-broken attribute.
    'x" tabindex=0 autofocus onfocus="window.__xss=\'focus\'" y="',
    # No quotes, no <, > or ': what Jinja's tojson leaves alone, for a JSON value in an
    # attribute (the events page's detail title on main f5016ee): it ran there on its own.
    " autofocus tabindex=1 onfocus=window.__xss=`focus` onmouseover=window.__xss=`hover` x=",
    # Out of a single-quoted attribute.
    "' onmouseover='window.__xss=1' x='",
    # Out of a script block (none on the pages, which is the point) and into a new one.
    "</script><script>window.__xss='script'</script>",
    "<svg onload=alert(1)>",
    # Template syntax must show as text, never be evaluated.
    "{{7*7}}{% raw %}${7*7}",
    # Unicode: an RTL override, a zero-width joiner, an emoji, a NUL-free oddity.
    "r\u00e9sum\u00e9\u202e<b>bold</b>\u200d\U0001f4a5",
)
# A payload as a "name": the first is used where one name per row is enough.
NAMES = PAYLOADS
# Shown literally (escaped) on the pages that carry it: the test looks for this text.
MARKER = '"><img src=x onerror='
SCHEDULE = "tick"


def fill(database_url: str, *, now: float | None = None) -> None:
    """The manager's tables (as a manager creates them) with every text column hostile."""
    Store.open(database_url).close()
    at = time.time() if now is None else now
    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            session.execute(insert(QueueSample), [_queue_sample(name, at) for name in (*NAMES, "photos")])
            session.execute(insert(SlotMapRow), [
                {"at_unix": at, "host": host, "queue": queue, "slots": 1}
                for host in NAMES for queue in (*NAMES, "photos")
            ])
            session.execute(insert(HostSample), [_host_sample(host, at, alive=i % 2 == 0)
                                                 for i, host in enumerate(NAMES)])
            session.execute(insert(Event), event_rows(at))
            session.execute(insert(QueueOverride), [
                {"queue": name, "paused": True, "min_slots": 1, "max_slots": 2, "updated_at_unix": at}
                for name in (*NAMES, "photos")
            ])
            # The config's schedule `tick` (names there are checked); its row's last job key is not.
            session.execute(insert(ScheduleRow), [{
                "name": SCHEDULE, "last_tick_unix": at, "last_job_key": PAYLOADS[0][:160],
                "last_fired_at_unix": at, "paused": True, "updated_at_unix": at}])
            session.commit()
    finally:
        engine.dispose()


def event_rows(at: float) -> list[dict[str, object]]:
    """Every kind of row the events page draws: plain, grouped runs, slots moved with a detail."""
    rows: list[dict[str, object]] = []
    for i, text in enumerate(PAYLOADS):
        common = {"queue": text, "host": text, "actor": text, "message": text}
        rows.append({**common, "at_unix": at - 100 + i, "kind": text, "detail": {"why": text, text: [text]}})
        rows.append({**common, "at_unix": at - 50 + i, "kind": "slots_moved", "detail": {
            "gained": 1, "lost": 0,
            "moves": [{"kind": "spawn", "host": text, "slot": f"{text}:1", "from": None, "to": text}]}})
        # Runs of failure events are grouped into one row with a count badge.
        for j in range(3):
            rows.append({**common, "at_unix": at - 20 + i + j / 10, "kind": "jobs_failed",
                         "detail": {"count": 2, "queue": text}})
    rows.append({"at_unix": at, "kind": "slots_moved", "queue": "photos", "host": None, "actor": "manager",
                 "message": "photos: +1 slots", "detail": {"moves": [{"host": "node01", "to": "photos"}]}})
    return rows


def _queue_sample(name: str, at: float) -> dict[str, object]:
    return {
        "at_unix": at, "queue": name, "priority": 1, "min_slots": 0, "max_slots": 4,
        "slots_current": 1, "slots_avg": 1.0, "slots_desired": 2, "load": 0.5, "waiting": 3,
        "running": 1, "delayed": 0, "jobs_done": 5, "jobs_per_s": 1.0, "mean_job_s": 0.1,
        "errors": 1, "paused": True, "batch_size": 10, "batch_size_source": name[:16],
    }


def _host_sample(host: str, at: float, *, alive: bool) -> dict[str, object]:
    return {
        "at_unix": at, "host": host, "alive": alive, "capacity": 4, "slots": 2,
        "mem_total_bytes": 2**33, "mem_available_bytes": 2**32, "master_pss_bytes": 2**27,
        "slots_pss_bytes": 2**28, "avg_slot_bytes": 2**26, "load_avg_1m": 0.5,
        "recycled_for_memory": 1, "killed_hung": 0,
    }


def database(root: Path) -> str:
    url = f"sqlite:///{root / 'slotmap.db'}"
    fill(url)
    return url
