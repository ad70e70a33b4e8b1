"""Per-queue latency histograms and failures by error type, counted by the queue server.

The server sees every job become ready, be handed out and be done, so it counts, per
queue: wait (ready -> handed out), run (handed out -> DONE) and ready-to-done (the job's
last becoming ready -> DONE; for a job neither delayed nor failed, PUT -> DONE). Each is
fixed buckets from 1 ms to 1 h. A hand-out or DONE only appends its seconds to its
queue's raw buffer (a list of floats, one append per observation: bucketing each one
inline cost 5,200 instructions per job of a slot's GET COUNT 10 + DONE, 12% of it,
bench/RESULTS.md); `settle` buckets a buffer at once (one C sort, then one bisect per
bound, whatever the count). Buffers are settled before every read (`reply`) and by the
housekeeping tick (every 0.5 s), so what one queue holds unsettled is bounded by what it
can do in half a second (32 bytes per observation), and a read never sees stale counts.
FAILs are counted by error type: the first MAX_ERROR_TYPES types a queue saw keep a count
each, later ones count as OTHER_TYPE (a counter never moves between series, so Prometheus
sees true counters). All are counters since the server started (or since the queue was
forgotten after draining): they survive nothing, Prometheus handles the reset. Only live
commands count (a replay or a replica's SYNC records do not: their times are not live).
Read with `STATS LATENCY q1|q2|...` (docs/PROTOCOL.md Part B).
"""
from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

# Upper bounds (seconds, inclusive as Prometheus's `le`); one more bucket past the last (+Inf).
BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
          60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
WIDTH = len(BOUNDS) + 1
KINDS = ("wait", "run", "ready_to_done")
WAIT, RUN, TOTAL = (index * WIDTH for index in range(len(KINDS)))
SUMS = len(KINDS) * WIDTH  # the three sums follow the counts in the same list
WAIT_SUM, RUN_SUM, TOTAL_SUM = SUMS, SUMS + 1, SUMS + 2
MAX_ERROR_TYPES = 10
OTHER_TYPE = "other"
_TYPE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]{0,99})(?::|$)")
# The master's charge of a job whose slot died (master/lifecycle.py): "slot 3 (pid 1234) exit 7",
# "... killed by SIGKILL: the master killed it, ...".
_SLOT_DIED = re.compile(r"slot \d+ \(pid \d+\) ")
SLOT_CRASHED_TYPE = "SlotCrashed"


class QueueLatency:
    """One queue's counts: `cells` holds the 3 x WIDTH bucket counts then the 3 sums;
    `waits`, `runs` and `totals` the seconds observed since the last `settle`."""

    __slots__ = ("cells", "errors", "runs", "totals", "waits")

    def __init__(self) -> None:
        self.cells: list[float] = [0] * SUMS + [0.0] * len(KINDS)
        self.errors: dict[str, int] = {}
        # Plain lists: array("d").append parses its argument with a format string, and
        # cost 3 times as many instructions per observation.
        self.waits: list[float] = []
        self.runs: list[float] = []
        self.totals: list[float] = []

    def settle(self) -> None:
        """Count the buffered observations into the buckets and sums; the buffers empty."""
        cells = self.cells
        for index, buffer in enumerate((self.waits, self.runs, self.totals)):
            if not buffer:
                continue
            buffer.sort()
            offset = index * WIDTH
            below = 0  # values at or under the previous bound (bucket `le` is inclusive)
            for bucket, bound in enumerate(BOUNDS):
                upto = bisect_right(buffer, bound, below)
                cells[offset + bucket] += upto - below
                below = upto
            cells[offset + len(BOUNDS)] += len(buffer) - below
            cells[SUMS + index] += sum(buffer)
            buffer.clear()

    def count_error(self, text: str) -> None:
        kind = error_type(text)
        errors = self.errors
        if kind not in errors and len(errors) >= MAX_ERROR_TYPES:
            kind = OTHER_TYPE
        errors[kind] = errors.get(kind, 0) + 1

    def as_json(self) -> dict[str, Any]:
        cells = self.cells
        body: dict[str, Any] = {}
        for index, kind in enumerate(KINDS):
            body[kind] = cells[index * WIDTH:(index + 1) * WIDTH]
            body[kind + "_sum_s"] = round(cells[SUMS + index], 6)
        body["error_types"] = dict(sorted(self.errors.items()))
        return body


def new_latency(state: Any) -> QueueLatency:
    """A queue's counts, made at its first live hand-out or DONE (store_core.py appends to
    its buffers inline: `latency.waits.append(seconds)`)."""
    latency = state.latency = QueueLatency()
    return latency


def settle_all(latencies: Iterable[QueueLatency]) -> None:
    """The housekeeping tick's: settle every queue that observed something since."""
    for latency in latencies:
        latency.settle()


def error_type(text: str) -> str:
    """A FAIL's error type: the last line's `Name:` of a Python traceback (`ValueError: bad
    photo`, `requests.Timeout`), the server's own lock expiry as `LockExpired`, a CANCEL of a
    running job (cancel.py: "cancelled by <door>") as `Cancelled`, the death of the slot that
    ran it (an OOM kill, a segfault, os._exit, a hang) as `SlotCrashed`, else `other`."""
    if text.startswith("lock expired after "):
        return "LockExpired"
    if _SLOT_DIED.match(text):
        # Else counted as `other`, with the overflow of types: the Failures page and a
        # "failures by type" panel could not tell crashed slots from anything else.
        return SLOT_CRASHED_TYPE
    if text.startswith("cancelled by "):
        # Else a cancel counted as `other`, among the failures a "by type" panel shows as errors.
        return "Cancelled"
    lines = text.strip().splitlines()
    match = _TYPE.match(lines[-1].strip()) if lines else None
    return match.group(1) if match else OTHER_TYPE


def reply(queues: dict[str, Any], names: list[str]) -> bytes:
    """`200 OK <len>` CRLF `{"bounds_s": [...], "queues": {name: {...}}}`: the named queues
    that have counts (a queue never handed out, or unknown, is left out)."""
    found = {}
    for name in names:
        state = queues.get(name)
        latency = state.latency if state is not None else None
        if latency is not None:
            latency.settle()
            found[name] = latency.as_json()
    body = json.dumps({"bounds_s": BOUNDS, "queues": found}, separators=(",", ":")).encode()
    return b"200 OK %d\r\n" % len(body) + body
