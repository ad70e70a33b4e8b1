"""Who may send which command: the roles of docs/SECURITY.md "Roles", as pure data.

Each token names a role; each command needs one right; a role is a set of rights, and
optionally the queues (names or globs) it may touch. The admin token (`token_file`) has
every right; the cluster's commands (replication and failover) need the cluster's own
credential once one is configured (`cluster_token_file`), and the admin token alone
otherwise, so a setup with one token works as it always did. No token at all: every
connection is unlimited (the loopback default), as in sockPQd.

No I/O: the server asks `Grant.refusal(command)` per command (one dict lookup and a set
test; an unlimited connection has no Grant and asks nothing), and auth.py acts on it.
"""
from __future__ import annotations

import enum
import fnmatch
import hmac
from collections import Counter
from dataclasses import dataclass, field

from queue_server.protocol import cancels
from queue_server.protocol import commands as p
from queue_server.protocol import finished as fin
from queue_server.protocol import jobs as pj
from queue_server.protocol import sync_records as sr


class Role(enum.StrEnum):
    PRODUCER = "producer"
    WORKER = "worker"
    OPERATOR = "operator"
    CLUSTER = "cluster"
    ADMIN = "admin"


# The rights. A command needs exactly one of them.
PUT, WORK, READ, OPERATE, ADMIN, CLUSTER, CLONE, ANY = (
    "put", "work", "read", "operate", "admin", "cluster", "clone", "any")

ROLE_RIGHTS: dict[Role, frozenset[str]] = {
    Role.PRODUCER: frozenset((PUT, READ, ANY)),
    Role.WORKER: frozenset((PUT, WORK, READ, ANY)),
    Role.OPERATOR: frozenset((OPERATE, READ, ANY)),
    Role.CLUSTER: frozenset((CLUSTER, CLONE, READ, ANY)),
    Role.ADMIN: frozenset((PUT, WORK, READ, OPERATE, ADMIN, CLONE, ANY)),  # + CLUSTER: Grants
}

# Which roles a refusal names: the least ones holding the right (admin holds all but the
# cluster's own right, and is named only where nobody else may).
_NEEDS = {PUT: "the producer or worker role", WORK: "the worker role",
          READ: "the producer, worker or operator role", OPERATE: "the operator role",
          ADMIN: "the admin role", CLUSTER: "the cluster credential",
          CLONE: "the admin role or the cluster credential", ANY: "a token"}

_SYNC_RIGHTS = {kind: CLUSTER for kind in (
    sr.SyncPut, sr.SyncGet, sr.SyncDone, sr.SyncLater, sr.SyncWake, sr.SyncIds,
    pj.SyncFail, pj.SyncTouch, pj.SyncKeyed, pj.SyncDead, fin.SyncKept, fin.SyncPrune)}
TYPE_RIGHTS: dict[type, tuple[bytes, str]] = {
    p.Put: (b"PUT", PUT),
    p.Get: (b"GET", WORK), p.Done: (b"DONE", WORK), p.Later: (b"LATER", WORK),
    pj.Fail: (b"FAIL", WORK), pj.Touch: (b"TOUCH", WORK),
    pj.JobLookup: (b"JOB", READ), fin.ResultWait: (b"RESULT", READ),
    fin.DoneWithResult: (b"DONE", WORK),
    pj.JobsList: (b"JOBS", OPERATE), pj.Retry: (b"RETRY", OPERATE), pj.Delete: (b"DELETE", OPERATE),
    pj.Cancel: (b"CANCEL", OPERATE), cancels.CancelledSince: (b"CANCELLED", READ),
    pj.ClientName: (b"CLIENT", ANY), p.Auth: (b"AUTH", ANY),
    p.ReplAck: (b"REPLACK", CLUSTER), p.Authority: (b"LEASE", CLUSTER), p.Link: (b"SNAPSHOT", CLUSTER),
    p.Clone: (b"CLONE", CLONE),
    **{kind: (b"SYNC", right) for kind, right in _SYNC_RIGHTS.items()},
}
SIMPLE_RIGHTS: dict[bytes, str] = {
    b"TOTAL": READ, b"STATS": READ, b"RUNLIST": OPERATE,
    b"PING": ANY, b"ROLE": ANY, b"INFO": ANY, b"REPLICAS": ANY, b"QUIT": ANY,
    b"OFFLINE": ADMIN, b"ONLINE": ADMIN, b"SHUTDOWN": ADMIN,
}
_NAMES_QUEUES = frozenset((p.Put, p.Get, pj.JobsList, pj.Retry, pj.Delete, pj.Cancel,
                           fin.ResultWait))  # see named_queues
# Commands on lease ids or a key: their queue is the job's, which only the store knows
# (bounds.py asks it for a role bound to queues). Lease ids count up from 1, so "only a GET
# of an allowed queue handed them out" held only for a worker that did not guess.
NAMES_JOBS = frozenset((p.Done, p.Later, pj.Fail, pj.Touch, fin.DoneWithResult, pj.JobLookup))
MAX_CACHED_QUEUES = 4096  # per grant: queue names seen (hostile names must not grow it forever)


def command_word(command: p.Command) -> bytes:
    """The request's word for a refusal line (LEASE, PROMOTE and FOLLOW by their verb)."""
    if isinstance(command, (p.Simple, p.Link)):
        return command.name
    if isinstance(command, p.Authority):
        return command.verb
    return TYPE_RIGHTS[type(command)][0]


def right_of(command: p.Command) -> str:
    if isinstance(command, p.Simple):
        return SIMPLE_RIGHTS[command.name]
    if isinstance(command, p.Link) and command.peer is None:
        # Plain INTERCONNECT: the server's id, which every client asks of each server it
        # may use (queue_server/client/core.py); plain SNAPSHOT: the whole state, out.
        return ANY if command.name == b"INTERCONNECT" else CLONE
    return TYPE_RIGHTS[type(command)][1]


def named_queues(command: p.Command) -> tuple[str | None, ...]:
    """The queues a command touches, for a role bound to some queues; None in the tuple:
    every queue (a GET without names). Commands on ids or keys name none: bounds.py checks
    the queue of the job they name."""
    if isinstance(command, p.Put):
        return (command.queue,) if command.wait_queue is None else (command.queue, command.wait_queue)
    if isinstance(command, p.Get):
        return (None,) if command.queues is None else command.queues
    if isinstance(command, (pj.JobsList, pj.Retry, pj.Delete, pj.Cancel, fin.ResultWait)):
        return (command.queue,)
    if isinstance(command, p.Simple):
        return command.queues or ((command.queue,) if command.queue is not None else ())
    return ()


@dataclass(frozen=True)
class Grant:
    """What one token allows."""
    role: Role
    rights: frozenset[str]
    queues: tuple[str, ...] | None = None  # globs; None: every queue
    _seen: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)
    # Command types this grant runs without a question (their right is the grant's, and
    # they name no queue it would have to check): the server's one set test per command
    # (a worker's GET+DONE paid 3% more instructions when every command asked refusal()).
    free: frozenset[type] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        free = frozenset(
            kind for kind, (_, right) in TYPE_RIGHTS.items()
            if right in self.rights and kind is not p.Link
            and (self.queues is None or kind not in _NAMES_QUEUES | NAMES_JOBS))
        object.__setattr__(self, "free", free)

    @property
    def may_put_anywhere(self) -> bool:
        """The plain PUT's fast path (connection.py) asks nothing of this connection."""
        return PUT in self.rights and self.queues is None

    def refusal(self, command: p.Command) -> str | None:
        """Why this grant may not run `command` (the reply's text), or None."""
        right = right_of(command)
        if right not in self.rights:
            return f"{command_word(command).decode()} needs {_NEEDS[right]}"
        if self.queues is not None:
            for queue in named_queues(command):
                if queue is None:
                    return (f"{command_word(command).decode()} without queue names: the "
                            f"{self.role.value} role may touch only {', '.join(self.queues)}")
                if not self.may_touch(queue):
                    return f"queue {queue} is not among the {self.role.value} role's queues"
        return None

    def may_touch(self, queue: str) -> bool:
        """May this grant touch `queue` (bounds.py asks it for a job's queue)?"""
        known = self._seen.get(queue)
        if known is None:
            if len(self._seen) >= MAX_CACHED_QUEUES:
                self._seen.clear()
            known = self._seen[queue] = any(fnmatch.fnmatchcase(queue, glob) for glob in self.queues or ())
        return known


@dataclass(frozen=True)
class RoleToken:
    """One configured token (ServerSettings.role_tokens)."""
    role: Role
    token: str = field(repr=False)  # a repr may reach a log line
    queues: tuple[str, ...] | None = None


class Grants:
    """Every token the server accepts and what each allows; counts the refusals."""

    def __init__(self, admin_token: str | None, role_tokens: tuple[RoleToken, ...] = ()) -> None:
        self.cluster_configured = any(token.role is Role.CLUSTER for token in role_tokens)
        self._tokens: list[tuple[bytes, Grant | None]] = []
        if admin_token is not None:
            # The admin token is unlimited (no Grant to ask) unless the cluster has its own
            # credential: then it has every right but the cluster's.
            self._tokens.append((admin_token.encode(), Grant(Role.ADMIN, ROLE_RIGHTS[Role.ADMIN])
                                 if self.cluster_configured else None))
        for token in role_tokens:
            self._tokens.append((token.token.encode(), Grant(token.role, ROLE_RIGHTS[token.role],
                                                             token.queues)))
        self.refused: Counter[str] = Counter()  # right needed (or "queue") -> refusals

    @property
    def required(self) -> bool:
        """Any token configured: every connection starts with only AUTH."""
        return bool(self._tokens)

    @property
    def longest(self) -> int:
        return max((len(token) for token, _ in self._tokens), default=0)

    def match(self, offered: bytes) -> tuple[bool, Grant | None]:
        """(True, its Grant or None for unlimited) for a configured token, else (False, None).
        Every token is compared, in constant time each, whichever matches."""
        found: tuple[bool, Grant | None] = (False, None)
        for token, grant in self._tokens:
            if hmac.compare_digest(offered, token) and not found[0]:
                found = (True, grant)
        return found
