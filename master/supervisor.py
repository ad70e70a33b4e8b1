"""Processes: fork a slot, reap every exited child, signal a slot (the only place that does)."""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass

from slot.exit_codes import SlotExit
from slot.wake import STOP_SIGNALS

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reaped:
    pid: int
    # Exactly one of the two is set.
    code: int | None
    signal: int | None


# (fd, socket inode): a socket by its number and identity, so a number closed and reused
# for another socket is not taken for the one it named.
SocketId = tuple[int, int]
STDIO_FDS = (0, 1, 2)


def open_sockets() -> frozenset[SocketId]:
    """Every socket this process holds now (from /proc/self/fd)."""
    found: set[SocketId] = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            st = os.fstat(fd)
        except OSError:  # the listing's own descriptor, gone already
            continue
        if stat.S_ISSOCK(st.st_mode):
            found.add((fd, st.st_ino))
    return frozenset(found)


def drop_sockets(keep: Collection[SocketId]) -> int:
    """Release every socket of this process but stdio and `keep`; how many were released.

    A forked slot holds a copy of each socket the master had, and a socket stays open until
    its last holder closes it: when the master closed its connection to the manager to
    reconnect, its slots kept it open, so the manager saw no close, kept the host bound to
    the old connection and refused its reports on the new one as spoofs until the old one
    expired (a live master lost once). ZeroMQ hides its descriptors, and after a fork
    neither pyzmq (pid check) nor libzmq (issue 4131) closes the parent's: the child drops
    them itself, by kind. Sockets only, not every descriptor as loky's or billiard's
    close_fds: `keep` is what was open when the handlers were loaded (a log handler's
    socket, a handler module's own statsd socket) and slots keep it as before.

    Each socket is replaced by /dev/null rather than closed: its number stays taken, so
    nothing the slot opens gets a number that a master's object still names (a pyzmq
    socket, the lease keeper's client). Those are never used in a slot; a stray use would
    reach /dev/null, never the slot's own connection.
    """
    kept = set(keep)
    dropped = 0
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for fd, inode in open_sockets():
            if fd in STDIO_FDS or (fd, inode) in kept:
                continue
            os.dup2(null, fd, inheritable=False)
            dropped += 1
    finally:
        os.close(null)
    return dropped


def spawn(body: Callable[[], int], *, keep_sockets: Collection[SocketId] = ()) -> int:
    """Fork; the child drops the master's sockets but `keep_sockets` (drop_sockets), runs
    `body` and exits with its code, never returning into the master.

    The child starts with SIGTERM and SIGINT blocked, and `body` unblocks them once its own
    handlers are in (slot/wake.py Waker.install, reloading.try_setup): until then the
    master's handlers, inherited, would swallow a stop sent right after the fork (a code
    reload or a graceful stop just after a replacement slot was forked), and that slot
    would run a whole batch on the old code. A stop sent meanwhile stays pending."""
    masked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid:
        signal.pthread_sigmask(signal.SIG_SETMASK, masked)
        return pid
    code = int(SlotExit.CRASHED)
    # The master's objects (those made after the preload's freeze) stay out of the slot's
    # collections: a collection writes to every object it visits, which copies the page. The
    # master keeps collecting its own. Measured (bench/crash_cost.py, RESULTS.md 2026-11-26
    # 09:50): about 55 of a crashed slot's 1,200 copy-on-write faults.
    gc.freeze()
    try:
        drop_sockets(keep_sockets)
        code = int(body())
    except BaseException:  # the child's last line of defence; it must exit here
        log.critical("slot process crashed outside its loop; exiting", exc_info=True)
    finally:
        # os._exit, not sys.exit: the master's atexit hooks, ZeroMQ context and open files
        # came along with the fork and must not be finalised by the child.
        for stream in (sys.stdout, sys.stderr):
            # A closed or broken stream must not keep the child from exiting.
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)


def reap() -> list[Reaped]:
    """Every child that has exited since the last call (waitpid(-1, WNOHANG) until none)."""
    reaped: list[Reaped] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        if os.WIFSIGNALED(status):
            reaped.append(Reaped(pid, None, os.WTERMSIG(status)))
        elif os.WIFEXITED(status):
            reaped.append(Reaped(pid, os.WEXITSTATUS(status), None))


def send_signal(pid: int, signum: int) -> bool:
    """Signal `pid`; False when it is already gone (it is reaped on the next turn)."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return False
    return True
