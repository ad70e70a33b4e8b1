"""The epoch (term) and the lease a managed queue server serves under (docs/DESIGN.md
"Failover that loses nothing"): the manager, acting on the cluster database, is the one
authority on who is primary; a server never decides it alone.

`LEASE <epoch> <ms> <echo>`: the primary may acknowledge until `<echo> + <ms>`, where
`<echo>` is this server's own monotonic clock (ms) from its reply to the previous grant:
the lease runs from a moment *before* the manager decided, on this server's clock, so a
grant that waited in a frozen server's socket buffer grants nothing new. `<echo>` 0 (no
clock known yet) grants nothing: read as a time, it would lease a server booted less than
`<ms>` ago until `<ms>` after its boot, however long the grant waited. A server told of
a newer epoch (LEASE, PROMOTE, FOLLOW) never goes back to an older one. Pure logic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

OK = b"200 OK\r\n"


def stale_epoch(epoch: int) -> bytes:
    return b"409 Stale Epoch %d\r\n" % epoch


def clock_ms(now: float) -> int:
    return int(now * 1000)


@dataclass
class Term:
    managed: bool = False  # acknowledges only under a lease (--managed / managed_failover)
    epoch: int = 0
    lease_until: float = -math.inf  # monotonic seconds

    def acknowledging(self, now: float) -> bool:
        return not self.managed or now < self.lease_until

    def lease_word(self, now: float) -> bytes:
        if not self.managed:
            return b"unmanaged"
        return b"held" if now < self.lease_until else b"lapsed"

    def grant(self, epoch: int, lease_ms: int, echo_ms: int, now: float) -> bytes:
        """A LEASE: the reply (with this server's clock for the next grant's echo)."""
        if epoch < self.epoch:
            return stale_epoch(self.epoch)
        if echo_ms > clock_ms(now):
            return b"400 Bad Request: echo is not a time of this server\r\n"
        if epoch > self.epoch:
            self.lease_until = -math.inf
        self.epoch = epoch
        self.managed = True
        if echo_ms:  # echo 0: the manager has no clock of ours yet; it asks for one
            self.lease_until = max(self.lease_until, (echo_ms + lease_ms) / 1000)
        return b"200 OK %d\r\n" % clock_ms(now)

    def adopt(self, epoch: int) -> bool:
        """PROMOTE or FOLLOW in `epoch`: False for an older one. The lease (if any) of the
        epoch before ends now."""
        if epoch < self.epoch:
            return False
        if epoch > self.epoch:
            self.lease_until = -math.inf
        self.epoch = epoch
        self.managed = True
        return True
