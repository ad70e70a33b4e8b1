"""The master's slot link refuses an oversized beacon (MAXMSGSIZE) and keeps hearing the other slots."""
from __future__ import annotations

import time
from pathlib import Path

import zmq
from polling import DEADLINE_S

from master.link import MasterLink
from slot.beacon import Beacon, SlotPhase
from slot.link import slot_identity

MAX_BEACON_BYTES = 8 * 1024


def beacon(slot_id: int, pid: int, *, exit_reason: str | None = None) -> bytes:
    # Built without validation: the model itself refuses an exit_reason this long.
    return Beacon.model_construct(slot_id=slot_id, pid=pid, seq=1, phase=SlotPhase.IDLE, queue="q",
                                  exit_reason=exit_reason).encode()


def test_an_oversized_beacon_is_refused_and_the_other_slots_are_still_heard() -> None:
    ipc_dir = Path("/tmp") / f"sm-link-{time.monotonic_ns()}"
    link = MasterLink(ipc_dir, max_beacon_bytes=MAX_BEACON_BYTES)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sockets = []
    try:
        for slot_id, pid in ((1, 101), (2, 102)):
            dealer = context.socket(zmq.DEALER)
            dealer.setsockopt(zmq.LINGER, 0)
            dealer.setsockopt(zmq.ROUTING_ID, slot_identity(slot_id, pid))
            dealer.connect(link.endpoint)
            sockets.append(dealer)
        rogue, honest = sockets
        rogue.send(beacon(1, 101, exit_reason="x" * (4 * MAX_BEACON_BYTES)))
        heard: list[Beacon] = []
        deadline = time.monotonic() + DEADLINE_S  # 5 s: too little room on a busy machine
        while time.monotonic() < deadline and not any(b.slot_id == 2 for b in heard):
            honest.send(beacon(2, 102))
            time.sleep(0.05)
            heard += link.receive()
        assert {b.slot_id for b in heard} == {2}
    finally:
        for dealer in sockets:
            dealer.close()
        context.term()
        link.close()
        ipc_dir.rmdir()
