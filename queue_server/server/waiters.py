"""Clients blocked in GETB / GETBE / PUT ... WAIT / RESULT, served first-come first-served; no I/O."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from queue_server.protocol.commands import Get, GetMode
from queue_server.protocol.finished import ResultWait
from queue_server.protocol.keyed import Key


@dataclass(eq=False, slots=True)
class Waiter:
    conn: Any  # the connection to answer; opaque here
    seq: int
    get: Get | None = None  # GETB / GETBE
    output: tuple[str, str] | None = None  # (output queue, item) of a PUT ... WAIT
    expire_s: float | None = None
    then_done: bool | None = None
    active: bool = True
    result: ResultWait | None = None  # RESULT <q> <key> TIMEOUT <s> (results.py)
    timer: Any = None  # its timeout's handle, cancelled when it is answered or leaves

    @property
    def until_idle(self) -> bool:
        return self.get is not None and self.get.mode is GetMode.UNTIL_IDLE


@dataclass
class Waiters:
    _by_queue: dict[str, dict[int, Waiter]] = field(default_factory=dict)
    _any_queue: dict[int, Waiter] = field(default_factory=dict)
    _outputs: dict[tuple[str, str], dict[int, Waiter]] = field(default_factory=dict)
    # RESULT waits by key: the store reads it as its `watched` (a key ending is told only
    # when someone waits on it), so it is one dict shared by both.
    results: dict[Key, dict[int, Waiter]] = field(default_factory=dict)
    _seq: Iterator[int] = field(default_factory=itertools.count)
    count: int = 0

    def add_get(self, conn: Any, get: Get) -> Waiter:
        waiter = Waiter(conn, next(self._seq), get=get, expire_s=get.expire_s, then_done=get.then_done)
        if get.queues is None:
            self._any_queue[waiter.seq] = waiter
        else:
            for name in dict.fromkeys(get.queues):
                self._by_queue.setdefault(name, {})[waiter.seq] = waiter
        self.count += 1
        return waiter

    def add_output(
        self, conn: Any, queue: str, item: str, expire_s: float | None, then_done: bool | None,
    ) -> Waiter:
        waiter = Waiter(conn, next(self._seq), output=(queue, item), expire_s=expire_s, then_done=then_done)
        self._outputs.setdefault((queue, item), {})[waiter.seq] = waiter
        self.count += 1
        return waiter

    def add_result(self, conn: Any, wait: ResultWait) -> Waiter:
        waiter = Waiter(conn, next(self._seq), result=wait)
        self.results.setdefault(wait.key, {})[waiter.seq] = waiter
        self.count += 1
        return waiter

    def remove(self, waiter: Waiter) -> None:
        if not waiter.active:
            return
        waiter.active = False
        self.count -= 1
        if waiter.result is not None:
            if waiter.timer is not None:
                waiter.timer.cancel()
            self._discard(self.results, waiter.result.key, waiter.seq)
        elif waiter.output is not None:
            self._discard(self._outputs, waiter.output, waiter.seq)
        elif waiter.get is not None and waiter.get.queues is not None:
            for name in dict.fromkeys(waiter.get.queues):
                self._discard(self._by_queue, name, waiter.seq)
        else:
            self._any_queue.pop(waiter.seq, None)

    @staticmethod
    def _discard(table: dict[Any, dict[int, Waiter]], key: Any, seq: int) -> None:
        group = table.get(key)
        if group is not None:
            group.pop(seq, None)
            if not group:
                del table[key]

    def first_for_queue(self, name: str) -> Waiter | None:
        """The longest-waiting GETB/GETBE client that would take a job of `name`."""
        named = self._by_queue.get(name)
        first_named = next(iter(named.values())) if named else None
        first_any = next(iter(self._any_queue.values())) if self._any_queue else None
        if first_named is None:
            return first_any
        if first_any is None or first_named.seq < first_any.seq:
            return first_named
        return first_any

    def waited_on(self, name: str) -> bool:
        """A GETB/GETBE client waits on `name` by name."""
        return name in self._by_queue

    def output_waiter(self, queue: str, item: str) -> Waiter | None:
        group = self._outputs.get((queue, item))
        return next(iter(group.values())) if group else None

    def until_idle_for(self, name: str) -> list[Waiter]:
        """GETBE clients whose wait may end when `name` has no running job any more."""
        named = self._by_queue.get(name, {})
        return [w for w in (*named.values(), *self._any_queue.values()) if w.until_idle]

    def all(self) -> list[Waiter]:
        seen: dict[int, Waiter] = {}
        for group in (*self._by_queue.values(), self._any_queue, *self._outputs.values(),
                      *self.results.values()):
            seen.update(group)
        return [seen[seq] for seq in sorted(seen)]
