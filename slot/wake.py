"""Interrupting a slot blocked in GETB, for a stop (SIGTERM/SIGINT) or a retarget (SIGUSR1).

The blocking client has no wake-up channel, but a signal does: the kernel breaks the
recv() with EINTR and the Python handler raises `Woken`, which the client answers by
dropping the connection. The server then drops the GETB waiter, so no job goes to it.
The handler raises only while the main thread is in `waiting()`; anywhere else (in a
handler, in DONE) the signal only leaves a flag, seen at the next step.
A signal landing in the instant between a reply's arrival and the end of the wait drops
that reply: its jobs stay locked until their lock time, then run elsewhere (delivery
stays at least once; only a stop or retarget racing a job's arrival can cause this).
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
WAKE_SIGNAL = signal.SIGUSR1


class Woken(BaseException):
    """Raised inside `waiting()` by a signal. A BaseException, like KeyboardInterrupt, so no
    `except Exception` on the way out (the client's, a handler's) can swallow it."""


class Waker:
    def __init__(self) -> None:
        self.stop_requested = False
        self._waiting = False
        # A wake-up that came while not waiting: the next wait returns at once.
        self._pending = False
        self._main_thread = threading.main_thread().ident

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._on_stop)
        signal.signal(WAKE_SIGNAL, self._on_wake)

    def wake(self) -> None:
        """From any thread: interrupt the main thread's wait (the signal goes to it alone)."""
        assert self._main_thread is not None
        signal.pthread_kill(self._main_thread, WAKE_SIGNAL)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The block in which a stop or wake raises Woken."""
        if self._pending:
            self._pending = False
            raise Woken()
        self._waiting = True
        try:
            yield
        finally:
            self._waiting = False

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True
        self._interrupt()

    def _on_wake(self, signum: int, frame: FrameType | None) -> None:
        self._interrupt()

    def _interrupt(self) -> None:
        if self._waiting:
            self._waiting = False
            raise Woken()
        self._pending = True


def block_slot_signals_in_this_thread() -> None:
    """Helper threads call this first, so the kernel delivers stop signals to the main thread
    (only there does EINTR break the blocking recv)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {*STOP_SIGNALS, WAKE_SIGNAL})
