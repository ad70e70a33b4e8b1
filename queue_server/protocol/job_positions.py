"""JOBS positions (PROTOCOL.md Part B): where a row stands in its listing's order, so that
the next page resumes after it even when that job left the state meanwhile (paging by the
last key alone ended the listing then: 150 of 300 ready jobs taken after page 1 of 100, and
page 2 was empty while 150 were ready). Pure: no I/O.

Every row of a JOBS reply carries its `position`, and a client asks for the next page with
`AFTER <key of the last row> AT <its position>`. Clients pass it back as they got it; its form
is the server's, per state:

    ready            <run>:<priority>:<level>:<place>   place in that priority's line
    delayed, failed  <run>:<seq>:<until>                the delayed jobs' (time, sequence) order
    dead             <run>:<seq>:<died_at>              the order of death
    running          <lease id>
    done             <done_at>

`<run>` names the store that made it (a new one at every start, CLONE and resync): places and
sequences mean nothing to another, which places the page by the key and the time instead.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Final

from queue_server.protocol.errors import bad_request

# What a position may look like on the wire and in a dashboard's query (its form per state: parse_position).
POSITION_PATTERN: Final = r"^(?:[0-9a-f]{0,16}(?::[-+.0-9a-z]{1,32}){0,3}|[-+.0-9a-z]{1,32})$"
POSITION_RE: Final = re.compile(POSITION_PATTERN)
# Per state: does it carry a run, then the kind of each number after it.
_FORMS: Final = {"ready": (True, (int, int, int)), "delayed": (True, (int, float)),
                 "failed": (True, (int, float)), "dead": (True, (int, float)),
                 "running": (False, (int,)), "done": (False, (float,))}
_INT_DIGITS = 20  # a priority is signed 64-bit, places and sequences count far below


@dataclass(frozen=True, slots=True)
class ListPosition:
    """A parsed position: the store's run ("" where the order needs none) and its numbers."""

    run: str
    order: tuple[float, ...]


def parse_position(state: str, value: bytes) -> ListPosition:
    """The `AT` of a JOBS request in `state`; 400 when it is not a position of that state."""
    text = value.decode("ascii", "replace")
    has_run, kinds = _FORMS[state]
    parts = text.split(":")
    run = parts.pop(0) if has_run else ""
    if len(parts) != len(kinds) or POSITION_RE.fullmatch(text) is None:
        raise bad_request(f"AT must be a {state} job's position from a JOBS reply")
    order: list[float] = []
    for kind, part in zip(kinds, parts, strict=True):
        try:
            number = kind(part) if kind is float or len(part) <= _INT_DIGITS else None
        except ValueError:
            number = None
        if number is None or not math.isfinite(number):
            raise bad_request(f"AT must be a {state} job's position from a JOBS reply")
        order.append(number)
    return ListPosition(run, tuple(order))


def check_position(value: str) -> bytes:
    """A position a client sends back (the client side); ValueError when it cannot be one."""
    if POSITION_RE.fullmatch(value) is None:
        raise ValueError(f"not a JOBS position: {value!r}")
    return value.encode("ascii")
