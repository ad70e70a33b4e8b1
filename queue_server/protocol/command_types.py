"""The request commands a parsed line becomes (queue_server/protocol/commands.py parses them).

Plain slotted dataclasses: the server matches on their types per request, so they stay cheap
to build (not frozen: object.__setattr__ per field doubled GET's parse cost).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from queue_server.protocol import cancels
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol import sync_records as sr
from queue_server.protocol.errors import ProtocolError
from queue_server.protocol.keyed import Key


class GetMode(IntEnum):
    NOW = 0  # GET
    BLOCK = 1  # GETB
    UNTIL_IDLE = 2  # GETBE


@dataclass(slots=True)  # not frozen: object.__setattr__ per field doubled GET's parse cost
class Get:
    mode: GetMode
    queues: tuple[str, ...] | None
    expire_s: float | None
    then_done: bool | None
    count: int | None
    keys: bool = False  # KEYS: job headers carry KEY and ATTEMPT; the lease is managed
    traces: bool = False  # TRACES (with KEYS): a traced job's header adds TRACE <traceparent>


@dataclass(slots=True)
class Put:
    queue: str
    priority: int
    item: str | None
    new_item: bool
    wait_queue: str | None
    expire_s: float | None
    then_done: bool | None
    delay_s: float | None
    key: Key | None = None  # KEY <key>: the producer's key (unique job)
    keyed: bool = False  # KEY <key> or KEY *: the reply names the key
    ttl_s: float | None = None  # TTL <sec>: deleted if not handed out that long after ready
    trace: bytes | None = None  # TRACE <traceparent>: the producer's W3C trace context
    data: bytes = b""


@dataclass(slots=True)
class Done:
    ids: tuple[int, ...]


@dataclass(slots=True)
class Later:
    ids: tuple[int, ...]
    delay_s: float | None
    # Part B: hand the jobs out alone next time (a crashed batch's jobs given back uncharged).
    solo: bool = False
    # Back to the head of their priority, in this order (a crashed batch's jobs that never
    # started keep their place in line); never with a delay.
    front: bool = False


@dataclass(slots=True)
class Simple:
    """A command without arguments beyond an optional queue name (TOTAL, STATS, ...)."""

    name: bytes
    queue: str | None = None
    flag: bool = False
    # STATS's opt-in forms (Part B): `STATS q1|q2|...` and `STATS TOP <n>`.
    queues: tuple[str, ...] | None = None
    top: int | None = None
    latency: bool = False  # `STATS LATENCY q1|q2|...` (Part B): the queues' histograms


@dataclass(slots=True)
class Link:
    """SNAPSHOT / INTERCONNECT, with an optional replication peer."""

    name: bytes
    peer: tuple[int, str, int] | None


@dataclass(slots=True)
class ReplAck:
    """`REPLACK <bytes> [<records>]`: a replica confirms its stream up to there, and where
    that leaves it in the primary's history in records (PROTOCOL.md Part B)."""

    confirmed_bytes: int
    confirmed_records: int | None = None  # a replica before the record count sends none


@dataclass(slots=True)
class Authority:
    """From the manager (PROTOCOL.md Part B): `LEASE <epoch> <ms> <echo> [ALONE]`,
    `PROMOTE <epoch>`, `FOLLOW <host:port> <epoch>`."""

    verb: bytes
    epoch: int
    lease_ms: int = 0
    echo_ms: int = 0
    primary: tuple[str, int] | None = None
    alone: bool = False  # LEASE ... ALONE: the record says no replica is in sync


@dataclass(slots=True)
class Clone:
    data: bytes = b""


@dataclass(slots=True)
class Auth:
    token: bytes = field(repr=False)  # never in a log line or an error's text


Command = (
    Get | Put | Done | Later | Simple | Link | Clone | Auth | ReplAck | Authority
    | sr.SyncPut | sr.SyncGet | sr.SyncDone | sr.SyncLater | sr.SyncWake | sr.SyncIds
    | pj.Fail | pj.Touch | pj.JobLookup | pj.JobsList | pj.Retry | pj.Delete | pj.Cancel | cancels.CancelledSince | pj.ClientName
    | pj.SyncFail | pj.SyncTouch | pj.SyncKeyed | pj.SyncDead
    | fin.DoneWithResult | fin.ResultWait | fin.SyncKept | fin.SyncPrune
)


@dataclass(slots=True)
class Parsed:
    """A parsed line. `data_len` >= 0: that many data bytes follow and belong to it.

    `error` is set when the request is bad but its data block must still be consumed
    (PROTOCOL.md fine point 1); then `command` is None.
    """

    command: Command | None
    data_len: int = -1
    error: ProtocolError | None = None
