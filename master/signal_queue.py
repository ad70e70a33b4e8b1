"""The master's signals: handlers only enqueue, and wake the loop through a self-pipe (`signal.set_wakeup_fd`); the loop takes them."""
from __future__ import annotations

import os
import signal
from types import FrameType

HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP)


class SignalQueue:
    def __init__(self) -> None:
        self._signals: list[int] = []
        self.wake_fd = -1
        self._wake_write = -1

    def install(self) -> int:
        """Handle HANDLED_SIGNALS from now on; the fd to poll beside the loop's sockets."""
        self.wake_fd, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        for signum in HANDLED_SIGNALS:
            signal.signal(signum, self._enqueue)
        return self.wake_fd

    def close(self) -> None:
        signal.set_wakeup_fd(-1)
        os.close(self.wake_fd)
        os.close(self._wake_write)

    def take(self) -> list[int]:
        """The signals since the last call, and the pipe emptied."""
        try:
            while os.read(self.wake_fd, 512):
                continue
        except BlockingIOError:  # the pipe is empty: every wake-up byte read
            pass
        taken, self._signals = self._signals, []
        return taken

    def _enqueue(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)
