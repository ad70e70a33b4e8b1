"""The clients a limiter told to wait: one place per client, served in turn order, places that
lapse, a bounded line.

A client told to wait gets a turn, and later clients are placed after it. Before this line,
every unserved request moved the end of the line: one client flooding requests it never
followed up for 1 s made the limiter tell a legitimate client to come back after 733 s (5 s
of flood: 4,627 s). Now a client holds one place at a time (asking again while it waits gets
the same turn back), a place not claimed within `PLACE_GRACE_S` of its turn lapses, and a
line holds at most `max_places` clients (a flood of new identities is refused a place and
told to come back when the line has room).

Per peer (issue 25): the permit that accrues next belongs to the place with the earliest
turn (`first_waiting`): a client more than a quarter second from its own turn is told to
wait (limiter.py `_held_back`), not served with whatever has accrued. Before, a client that
asked without pause counted as "back at its turn" whenever its turn was within 1.25 s, and
took every permit as it accrued: a peer sending 58,500 requests a second left a new client
`granted 0` for good. A client holding a permit reserved for later (a `holding` place) is
told to wait for it rather than given another, so one peer holds one permit at a time. The
heaps drop entries of places taken or moved lazily and are rebuilt when those outnumber the
places, so a client re-asking in a loop holds one place's memory, not one per request.
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
# A place whose turn passed this long ago unclaimed holds back nobody (it keeps its place
# until PLACE_GRACE_S). None: a client comes back `reserve_s` (0.25 s) before its turn, so
# one not back by its turn is late, and its permit goes to whoever is there rather than being
# lost (the bucket holds one permit at 10/s).
HOLD_BACK_S = 0.0
# Clients waiting on one limiter. A cluster has a few thousand slots at most (seed 001:
# about 3,500 worker processes), so a legitimate line never comes near it.
MAX_PLACES = 10_000
# A place has at most two heap entries; beyond four per place (plus this) the heaps are
# rebuilt, so a rebuild (linear in the places) comes once per that many requests.
STALE_SLACK = 64


@dataclass(frozen=True, slots=True)
class Place:
    turn: float
    serial: int
    # The client holds a permit reserved for `turn` (it waits for nothing, it uses it then).
    holding: bool = False


class WaitingLine:
    """Who waits, and until when production is spoken for (`end`: the last turn given out)."""

    def __init__(self, *, max_places: int = MAX_PLACES, grace_s: float = PLACE_GRACE_S,
                 hold_back_s: float = HOLD_BACK_S) -> None:
        self.max_places = max_places
        self.grace_s = grace_s
        self.hold_back_s = hold_back_s
        self.end = -math.inf
        self._places: dict[Hashable, Place] = {}
        # (lapses_at, serial, client); an entry whose place was taken or replaced is skipped.
        self._lapses: list[tuple[float, int, Hashable]] = []
        # (turn, serial, client) of waiting places: the first is served first.
        self._turns: list[tuple[float, int, Hashable]] = []
        self._serial = 0
        self.lapsed_total = 0
        self.refused_total = 0

    def __len__(self) -> int:
        return len(self._places)

    def waiting(self) -> int:
        """Clients waiting for a turn (not those holding a permit reserved for later); linear,
        for the dashboard's view."""
        return sum(not place.holding for place in self._places.values())

    def held_entries(self) -> int:
        """Entries the line keeps (places and heap entries): bounded by a multiple of the places."""
        return len(self._places) + len(self._lapses) + len(self._turns)

    def drop_lapsed(self, now: float) -> int:
        """Give up the places of clients that did not come back in time; how many."""
        dropped = 0
        while self._lapses and self._lapses[0][0] <= now:
            _, serial, client = heapq.heappop(self._lapses)
            place = self._places.get(client)
            if place is not None and place.serial == serial:
                del self._places[client]
                dropped += not place.holding
        self.lapsed_total += dropped
        return dropped

    def place_of(self, client: Hashable) -> Place | None:
        return self._places.get(client)

    def first_waiting(self, now: float) -> tuple[float, int, Hashable] | None:
        """(turn, serial, client) of the place served next: the earliest turn not overdue by
        `hold_back_s` (a later one is not held back by a client that went quiet)."""
        while self._turns:
            turn, serial, client = self._turns[0]
            place = self._places.get(client)
            current = place is not None and place.serial == serial and not place.holding
            if current and turn + self.hold_back_s > now:
                return self._turns[0]
            heapq.heappop(self._turns)
        return None

    def waits_behind(self, client: Hashable, now: float) -> tuple[float, int, Hashable] | None:
        """The place before `client`'s that is served first, or None when `client` is next."""
        place = self._places.get(client)
        first = self.first_waiting(now)
        if place is None or first is None or first[2] == client:
            return None
        return first if (first[0], first[1]) < (place.turn, place.serial) else None

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
        if not self._add(client, Place(turn, self._serial + 1), lapses_at=turn + self.grace_s):
            self.refused_total += 1
            return False
        heapq.heappush(self._turns, (turn, self._serial, client))
        self.promise(turn)
        return True

    def hold(self, client: Hashable, turn: float) -> None:
        """`client` holds a permit reserved for `turn`: until then it is given no other. (With the
        line full, nothing is noted: the line's memory stays bounded.)"""
        self._add(client, Place(turn, self._serial + 1, holding=True), lapses_at=turn)

    def _add(self, client: Hashable, place: Place, *, lapses_at: float) -> bool:
        if client not in self._places and len(self._places) >= self.max_places:
            return False
        self._serial = place.serial
        self._places[client] = place
        heapq.heappush(self._lapses, (lapses_at, place.serial, client))
        if len(self._lapses) + len(self._turns) > 4 * len(self._places) + STALE_SLACK:
            self._rebuild()
        return True

    def _rebuild(self) -> None:
        """Drop the entries of places taken or moved (a client re-asking in a loop leaves one each)."""
        self._lapses = [
            (p.turn + (0.0 if p.holding else self.grace_s), p.serial, c) for c, p in self._places.items()
        ]
        self._turns = [(p.turn, p.serial, c) for c, p in self._places.items() if not p.holding]
        heapq.heapify(self._lapses)
        heapq.heapify(self._turns)
