"""Waking a slot blocked in GETB or in a retry pause, for a stop (SIGTERM/SIGINT), a retarget
or a memory limit.

A wake is a byte in a self-pipe that the blocking waits poll beside their socket; nothing
is ever raised into running code. The stop signals' handlers only set a flag, and the
kernel writes the pipe through `signal.set_wakeup_fd` from whatever thread gets the signal;
other threads (the beacon link) write it with `wake()`. A wake that comes while the slot is
not waiting stays in the pipe, so the next wait returns at once. The pipe is drained only
when a wait ended by it, after which the slot looks at its flags and inbox again: a wake
written later is seen by the next wait.
"""
from __future__ import annotations

import contextlib
import os
import select
import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_DRAIN_BYTES = 4096


class Waker:
    def __init__(self) -> None:
        self.stop_requested = False
        # Non-blocking both ends: a full pipe already means "woken", a wake never blocks.
        self.fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def install(self) -> None:
        """In the main thread: the stop signals set the flag and write the pipe."""
        signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_stop)
        # Blocked since the fork (master/supervisor.py spawn): a stop sent before now is
        # delivered here, to the handler above.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

    def wake(self) -> None:
        """From any thread: end the current or the next wait."""
        with contextlib.suppress(BlockingIOError):  # a full pipe already holds a wake-up
            os.write(self._write_fd, b"\0")

    def woken(self) -> bool:
        """True (and the wake consumed) when a wake is waiting in the pipe."""
        if not select.select([self.fd], [], [], 0)[0]:
            return False
        self.drain()
        return True

    def sleep(self, seconds: float) -> bool:
        """Pause up to `seconds`; True when a wake ended it early (the wake consumed)."""
        if not select.select([self.fd], [], [], max(0.0, seconds))[0]:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):  # the pipe is empty: drained
            while os.read(self.fd, _DRAIN_BYTES):
                pass

    def close(self) -> None:
        if signal.getsignal(signal.SIGTERM) == self._on_stop:
            signal.set_wakeup_fd(-1)
        os.close(self.fd)
        os.close(self._write_fd)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        # The wakeup fd already holds a byte for this signal (written by the C handler).
        self.stop_requested = True


def block_slot_signals_in_this_thread() -> None:
    """Helper threads call this first, so the stop signals' Python handlers run in the main
    thread promptly (the wakeup fd is written whichever thread the kernel picks)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, set(STOP_SIGNALS))
