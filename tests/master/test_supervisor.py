"""A forked slot drops the master's sockets and keeps the master's objects out of its collections
(supervisor.spawn): real forks, sockets and /proc."""
from __future__ import annotations

import gc
import os
import signal
import socket
from collections.abc import Iterator

import pytest

from master.supervisor import open_sockets, spawn


def _inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:["):-1]))
    return inodes


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


def _connect(listener: socket.socket) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    return client, accepted


def test_a_slot_keeps_the_sockets_of_before_the_snapshot_and_drops_the_masters_later_ones(
    listener: socket.socket,
) -> None:
    handler_socket, handler_peer = _connect(listener)
    kept = open_sockets()
    master_socket, master_peer = _connect(listener)
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()

    def body() -> int:
        os.write(ready_w, b"x")
        os.read(release_r, 1)
        return 0

    pid = spawn(body, keep_sockets=kept)
    try:
        assert os.read(ready_r, 1) == b"x"
        held = _inodes(pid)
        assert os.fstat(handler_socket.fileno()).st_ino in held
        assert os.fstat(master_socket.fileno()).st_ino not in held
        # The symptom: the master closes its connection and its peer sees the close at once,
        # although the slot (forked while the connection was open) still runs.
        master_socket.close()
        master_peer.settimeout(5.0)
        assert master_peer.recv(1) == b""
    finally:
        os.write(release_w, b"x")
        _, status = os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, release_r, release_w):
            os.close(fd)
        for sock in (handler_socket, handler_peer, master_peer):
            sock.close()
    assert os.waitstatus_to_exitcode(status) == 0
    # Nothing of this child is left to reap. Not `reap() == []`: that waits on any child of
    # the test process, and an earlier test's dashboard stopped in the background is one.
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_dropped_sockets_number_stays_taken_in_the_slot(listener: socket.socket) -> None:
    master_socket, master_peer = _connect(listener)
    fd = master_socket.fileno()
    result_r, result_w = os.pipe()

    def body() -> int:
        # A new socket in the slot must not get the number the master's object still names.
        with socket.socket() as fresh:
            os.write(result_w, b"%d %d" % (fresh.fileno(), os.path.samestat(os.fstat(fd), os.stat(os.devnull))))
        return 0

    pid = spawn(body, keep_sockets=open_sockets() - {(fd, os.fstat(fd).st_ino)})
    try:
        fresh_fd, is_null = map(int, os.read(result_r, 64).split())
    finally:
        os.waitpid(pid, 0)
        for pipe_fd in (result_r, result_w):
            os.close(pipe_fd)
        master_socket.close()
        master_peer.close()
    assert fresh_fd != fd and is_null == 1


def test_a_slots_collections_leave_the_masters_objects_alone() -> None:
    # Made after the handlers' preload froze the GC, as the master's own state is.
    marker: list[object] = []
    result_r, result_w = os.pipe()

    def body() -> int:
        # A collection visits (writes to) every object gc.get_objects() lists: one of the
        # master's there would have its page copied into the slot.
        os.write(result_w, b"%d" % any(obj is marker for obj in gc.get_objects()))
        return 0

    pid = spawn(body)
    try:
        seen = os.read(result_r, 8)
    finally:
        os.waitpid(pid, 0)
        for fd in (result_r, result_w):
            os.close(fd)
    assert seen == b"0"
    assert any(obj is marker for obj in gc.get_objects())  # the master still collects its own


def test_a_stop_sent_before_the_slot_installs_its_handlers_is_not_lost() -> None:
    """A code reload asks a replacement slot forked a moment before to stop: the master's
    handlers came along with the fork, and used to swallow that SIGTERM, so the slot ran its
    whole batch on the old code. The child holds it until its Waker is in."""
    from master.signal_queue import SignalQueue
    from slot.process import forget_parent_signals
    from slot.wake import Waker

    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP)
    before = {signum: signal.getsignal(signum) for signum in handled}
    signals = SignalQueue()
    signals.install()  # the master's handlers, inherited by the fork
    go_read, go_write = os.pipe()

    def body() -> int:
        forget_parent_signals()
        os.read(go_read, 1)  # the slot's start-up: the stop comes meanwhile
        waker = Waker()
        waker.install()
        return 0 if waker.stop_requested else 7

    try:
        pid = spawn(body)
        os.kill(pid, signal.SIGTERM)
        os.write(go_write, b"x")
        _, status = os.waitpid(pid, 0)
    finally:
        signals.close()
        for signum, handler in before.items():
            signal.signal(signum, handler)
        os.close(go_read)
        os.close(go_write)
    assert os.waitstatus_to_exitcode(status) == 0, "the stop sent before Waker.install was lost"
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGTERM, signal.SIGINT}
