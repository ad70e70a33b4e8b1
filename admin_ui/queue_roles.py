"""The queue servers as the dashboard shows them (issue 17): which is primary, in which
epoch, under a lease or not, sync state, and each replica's lag; read with ROLE and
REPLICAS at each request (PROTOCOL.md Part B). /metrics gets the same as gauges."""
from __future__ import annotations

import json
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel

from admin_ui.settings import AdminSettings
from manager.failover.role_view import View
from manager.failover.server_link import ServerLink

SYNC_STATES = ("async", "sync", "waiting", "refusing", "asking", "alone")


class ReplicaLag(BaseModel):
    replica: str  # HOST:PORT as the replica gave it
    behind_bytes: int  # streamed to it, not confirmed yet
    silent_s: float  # since its last confirmation (-1: none yet)
    behind_records: int | None = None  # records written and not confirmed (None: not known)


class QueueServerRole(BaseModel):
    server: str
    reachable: bool
    role: str | None = None  # primary | replica
    epoch: int | None = None
    lease: str | None = None  # unmanaged | held | lapsed
    sync: str | None = None  # async | sync | waiting | refusing | asking | alone
    in_sync: list[str] = []
    # The confirmations it waits for before acknowledging as primary (ROLE, 0: async; None:
    # not said, an older server): servers that differ change the rule at each failover.
    min_sync_replicas: int | None = None
    replicas: list[ReplicaLag] = []
    # A replica's records it could not apply (each one a resync from a snapshot), from INFO.
    replication_errors: int | None = None
    last_replication_error: str | None = None


def read_roles(settings: AdminSettings) -> list[QueueServerRole]:
    return [read_role(address, settings.queue_token) for address in settings.queue_servers]


def read_role(address: str, token: str | None) -> QueueServerRole:
    link = ServerLink(address, token)
    try:
        view = View.parse(link.ask(b"ROLE", timeout_s=1.0))
        if view is None:
            return QueueServerRole(server=address, reachable=False)
        replicas = _replicas(link) if view.role == "primary" else []
        info = _info(link)
        errors = info.get("replication_errors")
        last = info.get("last_replication_error")
        return QueueServerRole(server=address, reachable=True, role=view.role, epoch=view.epoch,
                               lease=view.lease, sync=view.sync, in_sync=list(view.in_sync),
                               min_sync_replicas=view.min_sync,
                               replicas=replicas,
                               replication_errors=errors if isinstance(errors, int) else None,
                               last_replication_error=last[:500] if isinstance(last, str) else None)
    finally:
        link.close()


def _info(link: ServerLink) -> dict[str, object]:
    """INFO's JSON (the server, not its queues); {} from a server without it."""
    head = (link.ask(b"INFO", timeout_s=1.0) or b"").split()
    if len(head) != 3 or head[:2] != [b"200", b"OK"] or not head[2].isdigit():
        return {}
    block = link.read_block(int(head[2]), timeout_s=1.0)
    try:
        found = json.loads(block) if block is not None else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _replicas(link: ServerLink) -> list[ReplicaLag]:
    head = (link.ask(b"REPLICAS", timeout_s=1.0) or b"").split()
    if len(head) != 3 or head[:2] != [b"200", b"OK"] or not head[2].isdigit():
        return []
    found = []
    for _ in range(min(int(head[2]), 64)):
        words = (link.read_line(1.0) or b"").split()
        if len(words) in (3, 4) and words[1].isdigit():
            records = int(words[3]) if len(words) == 4 and words[3].isdigit() else None
            found.append(ReplicaLag(replica=words[0].decode("ascii", "replace"),
                                    behind_bytes=int(words[1]), silent_s=float(words[2]),
                                    behind_records=records))
    return found


class QueueRolesCollector(Collector):
    """Gauges per queue server: primary, epoch, lease held, sync state, replica lag."""

    def __init__(self, settings: AdminSettings) -> None:
        self.settings = settings

    def collect(self) -> Iterator[Metric]:
        yield from role_families(read_roles(self.settings))


def role_families(roles: list[QueueServerRole]) -> Iterator[Metric]:
    """Pure: the servers' roles -> metric families."""
    primary = GaugeMetricFamily("slotmap_queue_server_primary", "1 for the primary.", labels=["server"])
    epoch = GaugeMetricFamily("slotmap_queue_server_epoch", "The epoch (term) the server knows.",
                              labels=["server"])
    leased = GaugeMetricFamily("slotmap_queue_server_lease_held",
                               "1 while the server may acknowledge (its lease holds, or it is unmanaged).",
                               labels=["server"])
    sync = GaugeMetricFamily("slotmap_queue_server_sync_state", "1 for the server's sync state.",
                             labels=["server", "state"])
    min_sync = GaugeMetricFamily("slotmap_queue_server_min_sync_replicas",
                                 "Confirmations the server waits for before acknowledging as primary "
                                 "(0: async); servers that differ change the rule at each failover.",
                                 labels=["server"])
    lag = GaugeMetricFamily("slotmap_queue_replica_lag_bytes",
                            "Bytes streamed to a replica and not confirmed yet.", labels=["server", "replica"])
    lag_records = GaugeMetricFamily("slotmap_queue_replica_lag_records",
                                    "Records written by the primary and not confirmed by the replica yet.",
                                    labels=["server", "replica"])
    silent = GaugeMetricFamily("slotmap_queue_replica_silent_seconds",
                               "Seconds since the replica's last confirmation.", labels=["server", "replica"])
    apply_errors = CounterMetricFamily("slotmap_queue_replication_errors",
                                       "Records this replica could not apply (each a resync).", labels=["server"])
    for role in roles:
        if not role.reachable:
            continue
        primary.add_metric([role.server], 1.0 if role.role == "primary" else 0.0)
        epoch.add_metric([role.server], float(role.epoch or 0))
        leased.add_metric([role.server], 0.0 if role.lease == "lapsed" else 1.0)
        for state in SYNC_STATES:
            sync.add_metric([role.server, state], 1.0 if role.sync == state else 0.0)
        if role.min_sync_replicas is not None:
            min_sync.add_metric([role.server], float(role.min_sync_replicas))
        for replica in role.replicas:
            lag.add_metric([role.server, replica.replica], float(replica.behind_bytes))
            if replica.behind_records is not None:
                lag_records.add_metric([role.server, replica.replica], float(replica.behind_records))
            silent.add_metric([role.server, replica.replica], replica.silent_s)
        if role.replication_errors is not None:
            apply_errors.add_metric([role.server], float(role.replication_errors))
    yield from (primary, epoch, leased, sync, min_sync, lag, lag_records, silent, apply_errors)
