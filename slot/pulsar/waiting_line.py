"""The clients a limiter told to wait: one place per client, places that lapse, a bounded line.

A client told to wait gets a turn, and later clients are placed after it. Before this line,
every unserved request moved the end of the line: one client flooding requests it never
followed up for 1 s made the limiter tell a legitimate client to come back after 733 s (5 s
of flood: 4,627 s). Now a client holds one place at a time (asking again while it waits gets
the same turn back), a place not claimed within `PLACE_GRACE_S` of its turn lapses, and a
line holds at most `max_places` clients (a flood of new identities is refused a place and
told to come back when the line has room).
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Hashable
from dataclasses import dataclass

# A client comes back at its turn; this late, its place is given up. Longer than a busy
# machine's scheduling delay (tens of ms) and a network hop, short enough that a client
# that went away does not hold a place for long.
PLACE_GRACE_S = 2.0
# Clients waiting on one limiter. A cluster has a few thousand slots at most (seed 001:
# about 3,500 worker processes), so a legitimate line never comes near it.
MAX_PLACES = 10_000


@dataclass(frozen=True, slots=True)
class Place:
    turn: float
    serial: int


class WaitingLine:
    """Who waits, and until when production is spoken for (`end`: the last turn given out)."""

    def __init__(self, *, max_places: int = MAX_PLACES, grace_s: float = PLACE_GRACE_S) -> None:
        self.max_places = max_places
        self.grace_s = grace_s
        self.end = -math.inf
        self._places: dict[Hashable, Place] = {}
        # (lapses_at, serial, client); an entry whose place was taken or replaced is skipped.
        self._lapses: list[tuple[float, int, Hashable]] = []
        self._serial = 0
        self.lapsed_total = 0
        self.refused_total = 0

    def __len__(self) -> int:
        return len(self._places)

    def drop_lapsed(self, now: float) -> int:
        """Give up the places of clients that did not come back in time; how many."""
        dropped = 0
        while self._lapses and self._lapses[0][0] <= now:
            _, serial, client = heapq.heappop(self._lapses)
            place = self._places.get(client)
            if place is not None and place.serial == serial:
                del self._places[client]
                dropped += 1
        self.lapsed_total += dropped
        return dropped

    def place_of(self, client: Hashable) -> Place | None:
        return self._places.get(client)

    def leave(self, client: Hashable) -> None:
        self._places.pop(client, None)

    def promise(self, turn: float) -> None:
        """Production up to `turn` is spoken for (a client that keeps no place was told it)."""
        self.end = max(self.end, turn)

    def forget_promises(self, now: float) -> None:
        """Turns given out so far no longer hold newcomers back (a pause they waited out is lifted)."""
        self.end = min(self.end, now)

    def join(self, client: Hashable, turn: float) -> bool:
        """Give `client` its one place, at `turn`; False (nothing promised) when the line is full."""
        if client not in self._places and len(self._places) >= self.max_places:
            self.refused_total += 1
            return False
        self._serial += 1
        self._places[client] = Place(turn, self._serial)
        heapq.heappush(self._lapses, (turn + self.grace_s, self._serial, client))
        self.promise(turn)
        return True
