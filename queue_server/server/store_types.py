"""The store's values: a waiting job's tuple, a running Job, a queue's QueueState, and the
small results of DONE and TOTAL (no I/O)."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import count
from typing import Final

from queue_server.protocol.keyed import DeadJob, Errors, JobMeta, Key, Meta
from queue_server.server.latency import QueueLatency

# A waiting job is a tuple of atomic values, `(data, item, ready_at, key, meta)`: the
# garbage collector stops tracking such tuples, so a million queued jobs cost it nothing.
# `key` is an int N for the server's key `_N` (28 bytes, not a 57-byte str), or the
# producer's str; `meta` is the attempt count (a small int, shared) or a JobMeta once the
# job has failed. A job becomes a `Job` object only while it runs.
Entry = tuple[bytes, "str | None", float, Key, Meta]
# A delayed job: (until, sequence, queue name, priority, data, item, key, meta), atomic as
# well. It is live while the key index points at this very tuple: RETRY and DELETE take a
# delayed job out by pointing the index elsewhere, and the heap drops it when it comes up.
Delayed = tuple[float, int, str, int, bytes, "str | None", Key, Meta]
# A TTL job's mark, `[deadline, priority, ready entry or None while delayed]`, in its own
# index by key (plain jobs carry nothing for TTL). Live while that index holds this very list.
TtlMark = list
# A finished job kept (kept.py): `(key, queue, priority, data, item, attempts, errors, trace,
# ready_at, started_at, done_at, ran_by, result)`, atomic values only, so the garbage collector
# stops tracking it (a million kept Job objects made a full collection take 1.2 s). `errors`:
# its error history (() for none); `started_at` 0.0: unknown; `result`: bytes kept, or the
# length of one too large to keep, or None.
Kept = tuple[Key, str, int, bytes, "str | None", int, Errors, "bytes | None", float, float, float,
             "str | None", "bytes | int | None"]
K_ERRORS: Final = 6
K_DONE_AT: Final = 10
# A Job is made by `new_object(Job)` and one assignment per field in store_core.py
# `_hand_out`, not by Job(...): CPython 3.11 runs a class's __init__ through a C slot,
# outside the interpreter's inlined calls (-820 instructions per GET + DONE, bench/RESULTS.md).
new_object = object.__new__


class Level(deque[Entry]):
    """A queue's ready jobs of one priority, in hand-out order, knowing where it stands in
    the history of its line: `head` is the position of its first entry, so `head + index`
    names a ready job's place for good, and a JOBS page resumes after a job that left
    meanwhile (job_positions.py). It is kept as `tail`, the place after the last entry
    (every append adds one, a pop from the end takes one), so a hand-out from the front, the
    hotter path, counts nothing (a `head` counted there cost GET + DONE 510 instructions,
    0.3%). `gen` tells this level from one made anew at the same priority after it emptied.
    Nothing is ever removed from the middle (DELETE and TTL mark the entry in the queue's
    `gone` instead), so no position moves."""

    __slots__ = ("gen", "tail")
    gen: int
    tail: int

    @property
    def head(self) -> int:
        return self.tail - len(self)


# Level generations and dead jobs' order of death: one count per process, so a JOBS position
# read from one Store never matches another's by chance (with the store's `run` token).
LEVEL_GENS = count(1)
DEATHS = count(1)


class Job:
    """A running job under the id it was handed out with (made in store_core.py `_hand_out`).

    `attempts`: hand-outs so far, this one included; `history`: its earlier failures and
    trace, kept while it runs again; `lock_s`: the lock length it was handed out with
    (TOUCH); `managed`: handed out with KEYS (an expired lock is a failed attempt).
    `ready_at` / `taken_at`: when it last became ready and was handed out (latency.py; a
    replayed or replicated hand-out has its record's AT; taken_at 0: by a record older
    than issue 26). `by`: ` BY <CLIENT NAME>` as its SYNC GET record carries it (the taking
    connection's bytes, shared, not copied), b"" for an unnamed connection or a record
    from before the name was kept (running_by in job_views.py).
    """

    __slots__ = ("attempts", "by", "data", "expire_at", "history", "id", "item", "key", "lock_s",
                 "managed", "priority", "queue", "ready_at", "taken_at", "then_done")
    # Declared for the type checker (no __init__ assigns them; slots take no class values).
    queue: QueueState
    priority: int
    data: bytes
    item: str | None
    id: int
    key: Key
    attempts: int
    history: JobMeta | None
    expire_at: float | None
    lock_s: float | None
    managed: bool
    then_done: bool
    ready_at: float
    taken_at: float
    by: bytes

    @property
    def running_by(self) -> str | None:
        """The CLIENT NAME of the connection it was handed to, None when unnamed."""
        return self.by[4:].decode("ascii") if self.by else None

    def meta_back(self, attempts: int) -> Meta:
        """Its meta when it waits again with `attempts` made (solo and retry-wait cleared)."""
        history = self.history
        if history is None:
            return attempts
        return JobMeta(attempts, history.errors, trace=history.trace)


class QueueState:
    __slots__ = (
        "dead",
        "dead_dropped",
        "dead_total",
        "delayed",
        "deleted",
        "deleted_by",
        "done",
        "expired",
        "failed",
        "failed_total",
        "gone",
        "heap",
        "in_heap",
        "keep_max",
        "kept",
        "kept_stale",
        "latency",
        "later",
        "levels",
        "lock_timeout_s",
        "name",
        "put",
        "ready",
        "retried",
        "retried_by",
        "running",
        "ttl_expired",
        "waiting_by_priority",
    )

    def __init__(self, name: str, lock_timeout_s: float | None, keep_max: int = 0) -> None:
        self.name = name
        self.levels: dict[int, Level] = {}
        self.heap: list[int] = []  # negated priorities; may hold stale entries
        self.in_heap: set[int] = set()
        self.ready = 0
        self.delayed = 0
        self.running = 0
        self.waiting_by_priority: dict[int, int] = {}
        self.put = 0
        self.done = 0
        self.later = 0
        self.expired = 0
        self.lock_timeout_s = lock_timeout_s
        self.failed = 0  # delayed jobs waiting for a retry after a failure (also in `delayed`)
        self.dead: dict[Key, DeadJob] = {}  # oldest first; not counted by TOTAL
        self.failed_total = 0
        self.dead_total = 0
        self.dead_dropped = 0
        self.retried = 0
        self.deleted = 0
        self.ttl_expired = 0
        # RETRY and DELETE per door (the name a client gave with CLIENT NAME); None until one.
        self.retried_by: dict[str, int] | None = None
        self.deleted_by: dict[str, int] | None = None
        # id() of ready entries whose job's TTL ran out or that were deleted while other jobs
        # stood before it in its level: deleting from a deque's middle is O(n) and would move
        # the positions of the jobs behind (Level), so they are skipped when popped.
        self.gone: set[int] = set()
        self.latency: QueueLatency | None = None  # made at the first live hand-out (latency.py)
        # Finished jobs kept, oldest first (kept.py): a deque, as the oldest goes at every DONE
        # past keep_max; a job whose key finished again later is stale here (the store's
        # `kept` index points at the newer one). None until the first (an empty deque is
        # 0.6 KiB, and a server may hold 100,000 queues).
        self.kept: deque[Kept] | None = None
        self.keep_max = keep_max
        # How many of `kept` are stale: keep_max and STATS count the others only, else a key
        # finished again and again pushed other finished jobs out before keep_max (kept.py).
        self.kept_stale = 0

    def take_out_ready(self, priority: int, entry: Entry) -> None:
        """A ready job leaves its level out of turn (its TTL ran out, DELETE): O(1) when it
        stands first (with the skipped ones around it), else it is marked gone and skipped
        when reached, so no job behind it changes position (Level)."""
        level = self.levels[priority]
        gone = self.gone
        while gone and id(level[0]) in gone:  # skipped ones before it go first
            gone.discard(id(level.popleft()))
        if level[0] is not entry:
            gone.add(id(entry))
            return
        level.popleft()
        while level and gone and id(level[0]) in gone:
            gone.discard(id(level.popleft()))
        if not level:
            del self.levels[priority]

    @property
    def kept_count(self) -> int:
        """The finished jobs this queue keeps (stale entries of a key finished again left out)."""
        return len(self.kept) - self.kept_stale if self.kept else 0

    @property
    def holds_jobs(self) -> bool:
        return self.ready + self.delayed + self.running > 0

    def oldest_ready_at(self) -> float | None:
        if not self.ready:
            return None
        heads = [level[0][2] for level in self.levels.values() if level]
        return min(heads) if heads else None


# Distinct doors counted per queue and verb: a client names itself as it likes, so past
# this many the rest are counted as OTHER_DOOR (STATS stays small).
MAX_DOORS = 16
OTHER_DOOR = "other"
UNNAMED_DOOR = "client"  # a connection that sent no CLIENT NAME


def count_door(counts: dict[str, int] | None, door: str, n: int) -> dict[str, int]:
    """`counts` with `n` more for `door` (made when None)."""
    counts = {} if counts is None else counts
    if door not in counts and len(counts) >= MAX_DOORS:
        door = OTHER_DOOR
    counts[door] = counts.get(door, 0) + n
    return counts


@dataclass(frozen=True, slots=True)
class DoneResult:
    found: bool
    queue_finished: bool = False
    item_finished: bool = False


NOT_FOUND = DoneResult(False)
_DONE = {(finq, fini): DoneResult(True, finq, fini) for finq in (False, True) for fini in (False, True)}
_DONE_HOLDING = _DONE[False, False]  # done, its queue holds jobs still, no item finished


@dataclass(frozen=True, slots=True)
class Totals:
    queues: int
    priorities: int
    jobs: int
    running: int
