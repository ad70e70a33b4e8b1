"""The slot's beacon link builds its ZeroMQ socket only when the first beacon is due (a slot
crashed by its first jobs never pays for it), and still says goodbye if closed before then."""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from polling import poll_until

from master.link import MasterLink
from slot.beacon import Beacon, SlotPhase
from slot.link import BeaconLink

# Sized for a loaded machine: the link's thread may wait for a core.
DEADLINE_S = 10.0


def beacon(exit_reason: str | None = None) -> Beacon:
    return Beacon.model_construct(slot_id=1, pid=os.getpid(), seq=1, phase=SlotPhase.IDLE, queue="q",
                                  exit_reason=exit_reason)


@pytest.fixture
def master_link() -> Iterator[MasterLink]:
    ipc_dir = Path("/tmp") / f"sm-beacon-link-{time.monotonic_ns()}"
    link = MasterLink(ipc_dir)
    try:
        yield link
    finally:
        link.close()
        ipc_dir.rmdir()


def first_beacon(link: MasterLink) -> tuple[Beacon, float]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        heard = link.receive()
        if heard:
            return heard[0], time.monotonic()
        time.sleep(0.01)
    raise AssertionError(f"no beacon within {DEADLINE_S} s")


def start_link(master_link: MasterLink, first_beacon_after_s: float) -> BeaconLink:
    link = BeaconLink(endpoint=master_link.endpoint, slot_id=1, interval_s=0.05, snapshot=beacon,
                      on_assignment=lambda assignment: None, on_orphaned=lambda: None,
                      first_beacon_after_s=first_beacon_after_s)
    link.start()
    return link


def test_the_first_beacon_goes_out_when_it_is_due_not_at_the_start(master_link: MasterLink) -> None:
    started = time.monotonic()
    link = start_link(master_link, first_beacon_after_s=0.3)
    try:
        heard, at = first_beacon(master_link)
    finally:
        link.close()
    assert heard.exit_reason is None and at - started >= 0.3


def test_a_link_closed_before_its_first_beacon_still_sends_the_final_one(master_link: MasterLink) -> None:
    link = start_link(master_link, first_beacon_after_s=600.0)
    link.close(beacon(exit_reason="stopped"), timeout_s=DEADLINE_S)
    heard, _ = first_beacon(master_link)
    assert heard.exit_reason == "stopped"


def test_a_beacon_that_fails_is_logged_and_the_next_one_goes_out(
    master_link: MasterLink, caplog: pytest.LogCaptureFixture,
) -> None:
    """Before the audit branch one failing snapshot (say, smaps unreadable while the
    handler holds every descriptor) ended the thread: no beacon again, the slot killed as hung."""
    made: list[int] = []

    def snapshot() -> Beacon:
        made.append(len(made) + 1)
        if len(made) == 2:
            raise OSError(24, "Too many open files")
        return Beacon.model_construct(slot_id=1, pid=os.getpid(), seq=len(made), phase=SlotPhase.IDLE,
                                      queue="q", exit_reason=None)

    link = BeaconLink(endpoint=master_link.endpoint, slot_id=1, interval_s=0.05, snapshot=snapshot,
                      on_assignment=lambda assignment: None, on_orphaned=lambda: None)
    link.start()
    seen: list[int] = []
    try:
        def heard_after_the_failure() -> bool:
            seen.extend(b.seq for b in master_link.receive())
            return any(seq > 2 for seq in seen)
        poll_until(heard_after_the_failure, timeout_s=DEADLINE_S, what=lambda: f"beacons after the failed one: {seen}")
    finally:
        link.close()
    assert 1 in seen and 2 not in seen
    failed = [r for r in caplog.records if r.getMessage().startswith("a beacon turn failed")]
    assert len(failed) == 1 and "Too many open files" in str(failed[0].exc_info[1])  # type: ignore[index]
