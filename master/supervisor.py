"""Processes: fork a slot, reap every exited child, signal a slot (the only place that does)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from slot.exit_codes import SlotExit

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Reaped:
    pid: int
    # Exactly one of the two is set.
    code: int | None
    signal: int | None


def spawn(body: Callable[[], int]) -> int:
    """Fork; the child runs `body` and exits with its code, never returning into the master."""
    pid = os.fork()
    if pid:
        return pid
    code = int(SlotExit.CRASHED)
    try:
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
