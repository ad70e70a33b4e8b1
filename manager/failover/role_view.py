"""A queue server's ROLE reply as the sentinel and the dashboard read it (PROTOCOL.md
Part B), and telling a configured HOST:PORT from a replica's own address."""
from __future__ import annotations

import socket
from dataclasses import dataclass

MAX_EPOCH = 2**63 - 1  # a ROLE claiming more is not believed (the record's column is 64-bit)
# ROLE's <min-sync> is at most the config's 16; a longer number is not a server's word.
MAX_MIN_SYNC_DIGITS = 4


@dataclass(frozen=True, slots=True)
class View:
    """A server's ROLE reply: `200 OK <role> <sync> <links> <released> <epoch> <lease>
    <in-sync> <position> <min-sync>`. `min_sync` is None from a server that does not say
    it (a release before it was added): the manager's config stands in, said loudly
    (manager/failover/settings_check.py). Words after it are for later releases."""

    role: str
    sync: str
    epoch: int
    lease: str
    in_sync: tuple[str, ...]
    position: int
    min_sync: int | None = None

    @classmethod
    def parse(cls, line: bytes | None) -> View | None:
        words = (line or b"").decode("ascii", "replace").split()
        if (len(words) < 10 or words[:2] != ["200", "OK"] or not words[6].isdigit()
                or not words[9].isdigit() or len(words[6]) > 19 or int(words[6]) > MAX_EPOCH):
            return None
        in_sync = () if words[8] == "-" else tuple(words[8].split(","))
        said = words[10] if len(words) > 10 else ""
        min_sync = int(said) if said.isdigit() and len(said) <= MAX_MIN_SYNC_DIGITS else None
        return cls(words[2], words[3], int(words[6]), words[7], in_sync, int(words[9]), min_sync)


def same_server(a: str, b: str) -> bool:
    """HOST:PORT of the config against a replica's own IP:PORT (from its SNAPSHOT)."""
    if a == b:
        return True
    (host_a, _, port_a), (host_b, _, port_b) = a.rpartition(":"), b.rpartition(":")
    if port_a != port_b:
        return False
    try:
        return socket.gethostbyname(host_a) == socket.gethostbyname(host_b)
    except OSError:
        return False
