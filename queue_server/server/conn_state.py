"""A client connection's life: its states and every allowed move (connection.py owns the state).

Whether an OPEN connection's requests are read just now (a blocked wait, replies held
over the output limit, a wrong AUTH's delay) is not a state of its life: connection.py
keeps those as `waiter` and `hold`, and reading resumes when they end.
"""
from __future__ import annotations

from enum import StrEnum, auto


class ConnState(StrEnum):
    # Requests are read and run.
    OPEN = auto()
    # QUIT, SHUTDOWN, or a web page's request: nothing more is read; closed once the
    # replies already written are sent.
    QUITTING = auto()
    # A fatal error (line too long, a job too large): its reply goes out, then EOF.
    FAILING = auto()
    # The fatal reply and EOF are sent: the peer's last bytes are drained, then closed
    # after GRACEFUL_CLOSE_S (conn_output.py).
    DRAINING = auto()
    # Closed, cut (abort), refused or gone: nothing more is read or sent.
    CLOSED = auto()


ALLOWED: dict[ConnState, frozenset[ConnState]] = {
    ConnState.OPEN: frozenset({ConnState.QUITTING, ConnState.FAILING, ConnState.CLOSED}),
    ConnState.QUITTING: frozenset({ConnState.CLOSED}),
    ConnState.FAILING: frozenset({ConnState.DRAINING, ConnState.CLOSED}),
    ConnState.DRAINING: frozenset({ConnState.CLOSED}),
    # A closed connection may be told again (abort, then connection_lost).
    ConnState.CLOSED: frozenset({ConnState.CLOSED}),
}


class TransitionError(Exception):
    def __init__(self, peer: object, current: ConnState, wanted: ConnState) -> None:
        super().__init__(f"connection {peer}: cannot move from {current} to {wanted}")


def check_move(peer: object, current: ConnState, wanted: ConnState) -> ConnState:
    """`wanted`, if the move from `current` is allowed; else TransitionError."""
    if wanted not in ALLOWED[current]:
        raise TransitionError(peer, current, wanted)
    return wanted
