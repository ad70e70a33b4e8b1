"""ZeroMQ ROUTER chores both links share: draining two-part messages, sending to a peer that may be gone."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import zmq

log = logging.getLogger(__name__)

T = TypeVar("T")


def drain(
    socket: zmq.Socket[bytes],
    decode: Callable[[bytes], T],
    invalid: type[Exception],
    *,
    link: str,
) -> list[tuple[bytes, T]]:
    """Every (routing id, decoded frame) waiting now, never blocking.

    A message that is not [routing id, frame], or a frame `decode` refuses with
    `invalid`, is logged and dropped: one bad peer does not stop the others.
    """
    received: list[tuple[bytes, T]] = []
    while True:
        try:
            parts = socket.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return received
        if len(parts) != 2:
            log.warning("dropping a %d-part message on the %s", len(parts), link)
            continue
        try:
            received.append((parts[0], decode(parts[1])))
        except invalid as exc:
            log.warning("dropping a frame from %r on the %s: %s", parts[0], link, exc)


def send_to(socket: zmq.Socket[bytes], routing_id: bytes, frame: bytes) -> bool:
    """Send without blocking; False when that peer is not connected (the caller decides what next)."""
    try:
        socket.send_multipart([routing_id, frame], zmq.NOBLOCK)
    except zmq.ZMQError as exc:
        if exc.errno in (zmq.EHOSTUNREACH, zmq.EAGAIN):
            return False
        raise
    return True
