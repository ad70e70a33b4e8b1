"""Recent cancels on the wire (PROTOCOL.md Part B "CANCELLED"): `CANCELLED <ring> <since>`
asks the primary which cancels it took after position `since` of its ring `ring` (`-`: none
known yet). The reply is one JSON block: the ring's id, its last position, and the cancels
after `since` that it still holds (all it holds when `ring` is not its own: a restart or a
failover started a new ring). Masters read it to stop the slots of cancelled jobs, the
manager to write one event per cancel (the reply's model: queue_server/client/cancels.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from queue_server.protocol.errors import bad_request
from queue_server.protocol.numbers import parse_uint

RING_RE: Final = re.compile(rb"[0-9a-f]{1,32}")
NO_RING: Final = "-"


@dataclass(frozen=True, slots=True)
class CancelledSince:
    """CANCELLED <ring> <since> (Part B, read right)."""

    ring: str
    since: int


def parse_cancelled(args: list[bytes]) -> CancelledSince:
    if len(args) != 2:
        raise bad_request("CANCELLED <ring> <since> expected")
    ring = args[0]
    if ring != NO_RING.encode() and RING_RE.fullmatch(ring) is None:
        raise bad_request("a ring id is - or 1..32 hex digits")
    return CancelledSince(ring.decode("ascii"), parse_uint(args[1], "since"))


def cancelled_request(ring: str, since: int) -> bytes:
    return b"CANCELLED %s %d\r\n" % (ring.encode("ascii"), since)
