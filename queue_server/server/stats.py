"""STATS replies, and the big ones built a slice per loop turn so no request stops the loop.

A plain `STATS` lists every queue, byte for byte as before (json.dumps of the whole object
with separators ",", ":"): with 50,000 queues that was 12 MB built in one go (3.2 s on a
busy machine; PING waited as long). Now up to SYNC_QUEUES queues are answered at once; a
bigger STATS holds the asking connection's reading (its later requests wait behind it, as
they always did) and is built over several turns of the loop, TURN_S of work per turn, one
such STATS at a time (others wait their turn), while every other client is served between
the slices. Each queue's figures are read at one instant; the set is not one instant.

Opt-in forms (docs/PROTOCOL.md Part B): `STATS q1|q2|...` (at most MAX_NAMES queues, an
unknown one all zeros, like `STATS q`) and `STATS TOP <n>`: the n queues holding the most
jobs (ready + delayed + running) plus, when others exist, the entry "*": their counters
summed, `queues` how many they are, `oldest_ready_age_s` the oldest of theirs.
"""
from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import deque
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as quoted
from typing import Protocol

from queue_server.server.store import QueueState, Store
from queue_server.server.waiters import Waiter


class Asker(Protocol):
    """The connection a big STATS answers (connection.py's Connection), blocked meanwhile."""
    peer: object

    @property
    def closing(self) -> bool: ...

    def block(self, waiter: Waiter) -> None: ...

    def unblock(self) -> None: ...

    def write_parts(self, parts: list[bytes]) -> None: ...

    def abort(self) -> None: ...


log = logging.getLogger("slotmap.queue_server")

SYNC_QUEUES = 2000  # answered at once (a few ms); more are built a slice per turn
TURN_S = 0.01  # work per loop turn for a big STATS
CHECK_EVERY = 128  # queues between two looks at the clock
SORT_CHUNK = 10000  # names sorted per step (merged lazily afterwards)
OTHERS = "*"  # no queue name has it ([A-Za-z0-9_]{1,128})
# One queue's fields in the order json.dumps wrote them: the 7 counters, by_priority, the
# age, the 8 counters of failures. One % formatting (C) per queue, not a join per field;
# %r of a float is what json.dumps writes for it.
_FIELDS = ('"ready":%d,"delayed":%d,"running":%d,"put":%d,"done":%d,"later":%d,"expired":%d,'
           '"by_priority":{%s},"oldest_ready_age_s":%r,"failed":%d,"dead":%d,'
           '"failed_total":%d,"dead_total":%d,"dead_dropped":%d,"retried":%d,"deleted":%d,'
           '"ttl_expired":%d,"kept":%d')
_ENTRY = "%s:{" + _FIELDS + "}"
_EMPTY = "{" + _FIELDS % ((0,) * 7 + ("", 0.0) + (0,) * 9) + "}"


def _counts(state: QueueState) -> tuple[int, ...]:
    return (state.ready, state.delayed, state.running, state.put, state.done, state.later,
            state.expired, state.failed, len(state.dead), state.failed_total, state.dead_total,
            state.dead_dropped, state.retried, state.deleted, state.ttl_expired,
            state.kept_count)


def _age_s(state: QueueState, now: float) -> float:
    oldest = state.oldest_ready_at()
    return round(max(0.0, now - oldest), 6) if oldest is not None else 0.0


def _by_priority(waiting: dict[int, int]) -> str:
    if len(waiting) == 1:  # the usual queue: no sort, no join
        for priority, count in waiting.items():
            return f'"{priority}":{count}'
    return ",".join(f'"{priority}":{count}' for priority, count in sorted(waiting.items(), reverse=True))


def entry(name: str, state: QueueState | None, now: float, configured: frozenset[str] | None = None) -> str:
    """One queue's `"name":{...}`, exactly as json.dumps wrote it, with issue 15's keys after
    the others: `configured` when the server's config names queues (`configured` not None),
    `retried_by` / `deleted_by` once a RETRY / DELETE of the queue was carried out."""
    if state is None:
        text = quoted(name) + ":" + _EMPTY
        return text if configured is None else text[:-1] + _configured(name, configured) + "}"
    text = _ENTRY % (
        quoted(name), state.ready, state.delayed, state.running, state.put, state.done,
        state.later, state.expired, _by_priority(state.waiting_by_priority) if state.waiting_by_priority
        else "", _age_s(state, now) if state.ready else 0.0, state.failed, len(state.dead),
        state.failed_total, state.dead_total, state.dead_dropped, state.retried, state.deleted,
        state.ttl_expired, state.kept_count)
    if configured is None and state.retried_by is None and state.deleted_by is None:
        return text
    return text[:-1] + _configured(name, configured) + _doors(state) + "}"


def _configured(name: str, configured: frozenset[str] | None) -> str:
    if configured is None:
        return ""
    return ',"configured":true' if name in configured else ',"configured":false'


def _doors(state: QueueState) -> str:
    text = ""
    for key, counts in (("retried_by", state.retried_by), ("deleted_by", state.deleted_by)):
        if counts:
            inner = ",".join(f"{quoted(door)}:{n}" for door, n in sorted(counts.items()))
            text += f',"{key}":{{{inner}}}'
    return text


def configured_names(store: Store) -> frozenset[str] | None:
    """The queues the server's config names; None when it names none (it cannot say)."""
    return frozenset(store.policies) if store.policies else None


def _others(count: int, sums: list[int], age_s: float) -> str:
    """STATS TOP's "*" entry: the queues left out, their counters summed."""
    return f'"{OTHERS}":{{"queues":{count},' + _FIELDS % (*sums[:7], "", age_s, *sums[7:]) + "}"


def reply(parts: list[bytes]) -> list[bytes]:
    """`200 OK <len>` and the JSON object of the entries in `parts` (each one or more
    comma-separated entries), as pieces: flush() joins them once (a 25 MB reply copied
    once, not three times, so its last turn stays short)."""
    pieces = [b""]
    for part in parts:
        if part:
            pieces += (part, b",")
    if len(pieces) > 1:
        pieces.pop()
    pieces.append(b"}")
    pieces[0] = b"200 OK %d\r\n{" % (sum(map(len, pieces)) + 1)  # (+1: the "{")
    return pieces


def named(store: Store, names: list[str], now: float) -> list[bytes]:
    """STATS q, STATS q1|q2|...: the named queues, at once."""
    queues = store.queues
    configured = configured_names(store)
    return reply([",".join(entry(name, queues.get(name), now, configured) for name in names).encode()])


class _Build:
    """One big STATS in progress: a `step` per turn until it has its reply."""

    def __init__(self, conn: Asker, store: Store, top: int | None) -> None:
        self.conn = conn
        self.store = store
        self.top = top
        self.todo = list(store.queues)
        self.sorted: list[list[str]] = []
        self.merged: Iterator[str] | None = None
        self.parts: list[bytes] = []
        # TOP: the best (holding, name, counts, state) seen, a min-heap of at most `top`
        # (names are unique: no tie reaches the state), and the sums of every queue seen
        # (the top ones are taken off at the end).
        self.best: list[tuple[int, str, tuple[int, ...], QueueState]] = []
        self.sums = [0] * 16  # _counts per queue, summed for the "*" entry
        self.seen = 0
        self.others_age_s = 0.0  # the oldest ready job of the queues left out of the top

    def step(self, deadline: float) -> list[bytes] | None:
        """Work until `deadline` (perf_counter); the reply once complete."""
        if self.top is not None:
            return self._scan(deadline)
        while self.todo:  # first the names, sorted a chunk at a time
            self.sorted.append(sorted(self.todo[-SORT_CHUNK:]))
            del self.todo[-SORT_CHUNK:]
            if time.perf_counter() >= deadline:
                return None
        if self.merged is None:
            self.merged = heapq.merge(*self.sorted)
        names = self.merged
        queues, now, chunk = self.store.queues, time.time(), []
        configured = configured_names(self.store)
        for index, name in enumerate(names, 1):
            state = queues.get(name)
            if state is not None:  # (a queue forgotten meanwhile is gone)
                chunk.append(entry(name, state, now, configured))
            if index % CHECK_EVERY == 0 and time.perf_counter() >= deadline:
                self.parts.append(",".join(chunk).encode())
                return None
        self.parts.append(",".join(chunk).encode())
        return reply(self.parts)

    def _scan(self, deadline: float) -> list[bytes] | None:
        todo, queues, best, sums, top = self.todo, self.store.queues, self.best, self.sums, self.top
        assert top is not None
        now = time.time()
        while todo:
            rows = []
            for name in todo[-CHECK_EVERY:]:
                state = queues.get(name)
                if state is None:
                    continue
                counts = _counts(state)
                rows.append(counts)
                item = (counts[0] + counts[1] + counts[2], name, counts, state)
                if len(best) < top:
                    heapq.heappush(best, item)
                    continue
                if item[:2] > best[0][:2]:
                    item = heapq.heapreplace(best, item)
                if item[3].ready:  # left out: its oldest job may be the others' oldest
                    self.others_age_s = max(self.others_age_s, _age_s(item[3], now))
            for index, column in enumerate(zip(*rows, strict=True)):  # summed per column, in C
                sums[index] += sum(column)
            self.seen += len(rows)
            del todo[-CHECK_EVERY:]
            if time.perf_counter() >= deadline:
                return None
        return self._top_reply(now)

    def _top_reply(self, now: float) -> list[bytes]:
        queues, sums = self.store.queues, list(self.sums)
        chosen = sorted(self.best, key=lambda item: item[1])
        for _, _, counts, _ in chosen:
            for index, value in enumerate(counts):
                sums[index] -= value
        configured = configured_names(self.store)
        parts = [entry(name, queues.get(name), now, configured) for _, name, _, _ in chosen]
        others = self.seen - len(chosen)
        if others:
            parts.append(_others(others, sums, self.others_age_s))
        return reply([",".join(parts).encode()])


class StatsBuilds:
    """The big STATS in progress, oldest first; one advances per loop turn. The asking
    connection is blocked meanwhile (as in a GETB: its later requests wait, in order)."""

    def __init__(self) -> None:
        self.builds: deque[_Build] = deque()

    def start(self, conn: Asker, store: Store, top: int | None) -> None:
        conn.block(Waiter(conn, -1, active=False))  # in no wait list: OFFLINE skips it
        self.builds.append(_Build(conn, store, top))
        if len(self.builds) == 1:
            asyncio.get_running_loop().call_soon(self._step)

    def _step(self) -> None:
        build = self.builds[0]
        conn = build.conn
        done: list[bytes] | None = []
        try:
            if not conn.closing:
                done = build.step(time.perf_counter() + TURN_S)
                if done is not None:
                    conn.write_parts(done)
                    conn.unblock()
        except Exception:
            # A bug here must not leave this client, and every STATS queued behind it, waiting.
            log.exception("STATS for %s failed; the connection is cut", conn.peer)
            conn.abort()
            done = []
        finally:
            if done is not None:
                self.builds.popleft()
            if self.builds:
                asyncio.get_running_loop().call_soon(self._step)
