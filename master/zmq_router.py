"""ZeroMQ ROUTER chores the links share: bounded inbound frames, draining two-part messages, sending to a peer that may be gone, polling a link that reconnects."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

import zmq

log = logging.getLogger(__name__)

T = TypeVar("T")

# One drain takes at most this many messages, so a peer that floods cannot keep the
# caller's loop (heartbeats, expiry) from running; ROUTER fair-queues the peers.
MAX_MESSAGES_PER_DRAIN = 1000


def limit_inbound(socket: zmq.Socket[bytes], *, max_message_bytes: int, queued_messages: int) -> None:
    """Bound what one peer can make this socket hold: a frame over `max_message_bytes`
    disconnects the peer before its body is read (ZeroMQ MAXMSGSIZE: 8 bytes of a
    1.5 GB frame are read, not 1.5 GB), and at most `queued_messages` wait per peer
    (RCVHWM), so one peer holds at most queued_messages x max_message_bytes here."""
    socket.setsockopt(zmq.MAXMSGSIZE, max_message_bytes)
    socket.setsockopt(zmq.RCVHWM, queued_messages)


def drain(
    socket: zmq.Socket[bytes],
    decode: Callable[[bytes], T],
    invalid: type[Exception],
    *,
    link: str,
    max_messages: int = MAX_MESSAGES_PER_DRAIN,
) -> list[tuple[bytes, T]]:
    """The (routing id, decoded frame) pairs waiting now (at most `max_messages`), never blocking.

    A message that is not [routing id, frame], or a frame `decode` refuses with
    `invalid`, is logged and dropped: one bad peer does not stop the others.
    """
    received: list[tuple[bytes, T]] = []
    for routing_id, frame in drain_frames(socket, link=link, max_messages=max_messages):
        try:
            received.append((routing_id, decode(frame.bytes)))
        except invalid as exc:
            log.warning("dropping a frame from %r on the %s: %s", routing_id, link, exc)
    return received


def drain_frames(
    socket: zmq.Socket[bytes], *, link: str, max_messages: int = MAX_MESSAGES_PER_DRAIN,
) -> list[tuple[bytes, zmq.Frame]]:
    """The (routing id, frame) pairs waiting now, undecoded: a frame keeps its properties
    (the CURVE User-Id). Messages that are not two parts are logged and dropped."""
    received: list[tuple[bytes, zmq.Frame]] = []
    for _ in range(max_messages):
        try:
            parts = socket.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            break
        if len(parts) != 2:
            log.warning("dropping a %d-part message on the %s", len(parts), link)
            continue
        received.append((parts[0].bytes, parts[1]))
    return received


def send_to(socket: zmq.Socket[bytes], routing_id: bytes, frame: bytes) -> bool:
    """Send without blocking; False when that peer is not connected (the caller decides what next)."""
    try:
        socket.send_multipart([routing_id, frame], zmq.NOBLOCK)
    except zmq.ZMQError as exc:
        if exc.errno in (zmq.EHOSTUNREACH, zmq.EAGAIN):
            return False
        raise
    return True


def rewatch(poller: zmq.Poller, watched: zmq.Socket[bytes] | None,
            socket: zmq.Socket[bytes] | None) -> zmq.Socket[bytes] | None:
    """Poll `socket` from now on instead of `watched` (a link reconnects on a new socket)."""
    if socket is watched:
        return watched
    if watched is not None:
        poller.unregister(watched)
    if socket is not None:
        poller.register(socket, zmq.POLLIN)
    return socket
