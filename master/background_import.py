"""A code reload's import, run on a thread beside the master's loop (master/reloading.py).

The import used to run in the loop itself: a module that took 8 s to import (a model fetched
at import) held the loop for 8 s, so the master sent no heartbeat; the manager took the host
for lost after heartbeat_liveness intervals (3 s by default) and re-planned its slots, and
the master, having read no frame meanwhile, dropped its manager link and reconnected
(tests/manager/test_reload_slow_import_managed.py: an 8.0 s gap between the master's
reports before, under 0.3 s with the import on a thread).

Why a thread in the master, not the import in each new slot (gunicorn without --preload):
the forks must share the new code's pages copy-on-write, so the master itself must hold the
code. Why not a child that imports and forks the slots (a zygote): the slots must be the
master's children (it reaps them, reads their lease pipes, settles their batches).

While the thread imports, the loop forks nothing (master/arbiter.py reconcile): the old app
modules are out of sys.modules, so a fork would see half of the new code, and a fork taken
while the thread holds a module's import lock leaves that lock held for ever in the child.
A module that installs a signal handler at import fails here (signal.signal() works only on
the main thread), which a master's own handlers are better without anyway.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")


class BackgroundImport(Generic[T]):
    """`work` run once on a daemon thread; the loop asks `done` each tick, then `outcome()`.
    A daemon thread: a master told to stop does not wait for an import that may never end."""

    def __init__(self, work: Callable[[], T], *, name: str = "code-import") -> None:
        self._work = work
        self._result: T | None = None
        self._error: BaseException | None = None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    def outcome(self) -> T:
        """The work's return value, or its exception raised again (call once `done`)."""
        if not self._finished.is_set():
            raise RuntimeError("the import is still running")
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def _run(self) -> None:
        try:
            self._result = self._work()
        # Handed to the loop, which decides (reimport() already turns the new code's errors,
        # sys.exit() included, into ImportRefused); nothing is lost by catching here.
        except BaseException as exc:
            self._error = exc
        finally:
            self._finished.set()
