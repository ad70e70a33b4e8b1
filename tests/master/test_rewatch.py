"""The master's poller follows the manager link onto its new socket after a reconnect."""
from __future__ import annotations

import zmq

from master.zmq_router import rewatch


def test_a_frame_on_the_new_socket_wakes_the_poll_after_the_old_one_was_closed() -> None:
    context = zmq.Context()
    server = context.socket(zmq.ROUTER)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    poller = zmq.Poller()
    old = context.socket(zmq.DEALER)
    watched = rewatch(poller, None, old)
    assert rewatch(poller, watched, old) is old
    old.close(linger=0)  # the link reconnects: a new socket, the old one closed
    new = context.socket(zmq.DEALER)
    new.setsockopt(zmq.ROUTING_ID, b"master")
    new.connect(f"tcp://127.0.0.1:{port}")
    watched = rewatch(poller, watched, new)
    new.send(b"hello")
    assert server.recv_multipart() == [b"master", b"hello"]
    server.send_multipart([b"master", b"map"])
    # Polling a closed socket would raise (ENOTSOCK); the new one's frame ends the wait.
    assert dict(poller.poll(10_000)) == {new: zmq.POLLIN}
    assert rewatch(poller, watched, None) is None and poller.poll(0) == []
    for socket in (new, server):
        socket.close(linger=0)
    context.term()
