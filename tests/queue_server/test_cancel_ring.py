"""The primary's ring of recent cancels (pure: queue_server/server/cancel_ring.py) and the
manager's events from it (pure: manager/events/cancel_events.py)."""
from __future__ import annotations

from manager.events.cancel_events import cancel_events
from queue_server.client.cancels import CancelPage
from queue_server.protocol.cancels import NO_RING
from queue_server.server.cancel_ring import CancelRing


def page(ring: CancelRing, name: str, since: int) -> CancelPage:
    return CancelPage.model_validate(ring.page(name, since))


def test_a_reader_gets_what_came_after_its_position_and_all_of_a_ring_it_did_not_know() -> None:
    ring = CancelRing(size=3)
    for n in range(1, 3):
        ring.add(lease=10 + n, queue="q", key=f"k{n}", door="cli", at=float(n))
    assert [c.seq for c in page(ring, NO_RING, 0).cancels] == [1, 2]
    assert [c.key for c in page(ring, ring.ring, 1).cancels] == ["k2"]
    assert page(ring, ring.ring, 2).cancels == ()
    assert [c.seq for c in page(ring, "0badc0de", 2).cancels] == [1, 2]  # a restarted server's
    assert [c.seq for c in page(ring, ring.ring, 7).cancels] == [1, 2]  # a position it never had


def test_a_reader_too_far_behind_is_told_how_many_it_missed() -> None:
    ring = CancelRing(size=3)
    for n in range(1, 7):
        ring.add(lease=n, queue="q", key=f"k{n}", door="cli", at=float(n))
    late = page(ring, ring.ring, 1)
    assert (late.last, late.missed, [c.seq for c in late.cancels]) == (6, 2, [4, 5, 6])  # 2 and 3 dropped
    assert page(ring, ring.ring, 4).missed == 0


def test_the_manager_writes_one_event_per_cancel_but_the_dashboards_own() -> None:
    ring = CancelRing()
    ring.add(lease=0, queue="q", key="waiting", door="cli", at=1.0)
    ring.add(lease=7, queue="q", key="running", door="nightly", at=2.0)
    ring.add(lease=8, queue="q", key="clicked", door="dashboard", at=3.0)
    events = cancel_events(page(ring, NO_RING, 0), since=0, known_ring=False)
    assert [(e.actor, (e.detail or {})["key"], (e.detail or {})["seq"]) for e in events] == [
        ("cli", "waiting", 1), ("nightly", "running", 2)]
    assert events[0].message == "q: job waiting removed (it was not running) with the CLI (slotmap cancel)"
    assert events[1].message == ("q: job running cancelled while running (its slot is stopped) by queue "
                                 "client 'nightly' (CANCEL request)")
    assert cancel_events(page(ring, ring.ring, 2), since=2, known_ring=True) == []
