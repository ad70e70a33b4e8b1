"""The control commands: statistics, modes, AUTH, and the replication commands a
client sends (SNAPSHOT, INTERCONNECT, CLONE). The queue commands are in queue_commands.py."""
from __future__ import annotations

import asyncio
import json
import logging
import time

from queue_server.protocol import commands as p
from queue_server.server import auth, guard, latency, responses, snapshot, stats
from queue_server.server.errors import SnapshotError
from queue_server.server.faces import Conn, Server

log = logging.getLogger("slotmap.queue_server")

NOT_MANAGED = (b"403 Forbidden: this server is not configured for managed failover "
               b"(managed_failover = true, --managed)\r\n")


def execute(server: Server, conn: Conn, command: p.Command) -> None:
    """TOTAL, STATS, INFO, RUNLIST, PING, ROLE, REPLICAS, OFFLINE, ONLINE, QUIT, SHUTDOWN, AUTH,
    SNAPSHOT, INTERCONNECT, CLONE and REPLACK: everything but the queue commands and SYNC records."""
    if isinstance(command, p.Simple):
        _simple(server, conn, command)
    elif isinstance(command, p.Link):
        _link(server, conn, command)
    elif isinstance(command, p.Clone):
        _clone(server, conn, command)
    elif isinstance(command, p.ReplAck):
        if conn.is_replication_link:  # no reply: the link is a stream
            server.replica_acked(conn, command.confirmed_bytes, command.confirmed_records)
        else:  # a client's would count as a replica's heartbeat (ROLE's links)
            conn.write(responses.REPLACK_OFF_LINK)
    elif isinstance(command, p.Authority):
        conn.write_status(_authority(server, command))  # never held behind sync replies
    elif isinstance(command, p.Auth):
        auth.reauthenticate(conn, command)  # only an authenticated connection gets here
    else:
        raise AssertionError(f"unhandled command {command!r}")


def _simple(server: Server, conn: Conn, command: p.Simple) -> None:
    name = command.name
    store = server.store
    if name == b"TOTAL":
        conn.write(responses.total_reply(store.totals(command.queue)))
    elif name == b"STATS":
        _stats(server, conn, command)
    elif name == b"RUNLIST":
        conn.write(responses.runlist_reply(store, command.flag))
    elif name == b"PING":
        conn.write_status(responses.PONG)
    elif name == b"REPLICAS":
        conn.write_status(server.replicas.replicas_reply(time.monotonic()))
    elif name == b"ROLE":
        conn.write_status(server.replicas.role_reply(
            following=server.following, epoch=server.term.epoch,
            lease=server.term.lease_word(time.monotonic()), position=server.position()))
    elif name == b"INFO":  # ours (PROTOCOL.md Part B): the server, not its queues
        body = json.dumps({"server_id": server.settings.server_id, "following": server.following,
                           "offline": server.offline, **server.replication.as_json(),
                           "replicas": server.replicas.lags_json(time.monotonic()),
                           "refused": dict(server.grants.refused)}).encode()
        conn.write(b"200 OK %d\r\n" % len(body) + body)
    elif name == b"OFFLINE":
        server.offline = True
        server.refuse_waiters()
        conn.write(responses.SWITCHED_OFFLINE)
    elif name == b"ONLINE":
        server.offline = False
        conn.write(responses.SWITCHED_ONLINE)
    elif name == b"QUIT":
        conn.write(responses.GOODBYE)
        conn.quit()
    elif name == b"SHUTDOWN":
        conn.write(responses.SHUTTING_DOWN)
        conn.quit()
        asyncio.get_running_loop().call_soon(server.shutdown)


def _stats(server: Server, conn: Conn, command: p.Simple) -> None:
    """Named queues at once; every queue or the top ones at once when they are few, else
    built over several loop turns (stats.py)."""
    store = server.store
    if command.latency:  # STATS LATENCY q1|q2|... (Part B)
        conn.write(latency.reply(store.queues, list(command.queues or ())))
    elif command.queue is not None or command.queues is not None:
        names = [command.queue] if command.queue is not None else list(command.queues or ())
        conn.write_parts(stats.named(store, names, time.time()))
    elif len(store.queues) <= stats.SYNC_QUEUES and command.top is None:
        conn.write_parts(stats.named(store, sorted(store.queues), time.time()))
    else:
        server.stats_builds.start(conn, store, command.top)


def _link(server: Server, conn: Conn, command: p.Link) -> None:
    if command.name == b"SNAPSHOT":
        blob = snapshot.encode(server.store)
        conn.write_parts([b"200 OK %d\r\n" % len(blob), blob])
    else:
        conn.write(b"200 OK %d\r\n" % server.settings.server_id)
    if command.peer is not None:
        _start_link(conn, command)


def _start_link(conn: Conn, command: p.Link) -> None:
    """`SNAPSHOT|INTERCONNECT <n> <ip> <port>`: the connection becomes a replication link.
    The claimed ip is believed only when it is the connection's own (the port cannot be
    checked: it is where the peer listens); another is not trusted: the link is named by
    the address it comes from and never counts as a replica in sync, nor does a link that
    was sent no snapshot (INTERCONNECT). ROLE's in-sync list is what the manager promotes
    from (issue 25 point 6)."""
    assert command.peer is not None
    server_id, claimed, port = command.peer
    own = guard.peer_host(conn.peer)
    trusted = own is not None and guard.same_host(claimed, own)
    address = claimed if trusted or own is None else own
    conn.start_replication(b"%s:%d" % (address.encode("ascii", "replace"), port),
                           may_confirm=trusted and command.name == b"SNAPSHOT")
    if trusted:
        log.info("replication link to server %d at %s:%d%s", server_id, claimed, port,
                 "" if command.name == b"SNAPSHOT" else
                 " (INTERCONNECT: sent no snapshot, so never counted as a replica in sync)")
    else:
        log.warning("replication link from %s claims to be server %d at %s:%d: not its "
                    "address, so it is listed as %s:%d and never counts as a replica in sync",
                    own, server_id, claimed, port, address, port)


def _authority(server: Server, command: p.Authority) -> bytes:
    """LEASE, PROMOTE, FOLLOW: the manager's word (roles.py), heard only by a server
    configured for managed failover (one LEASE fenced a standalone server until restart)."""
    if not server.settings.managed:
        return NOT_MANAGED
    if command.verb == b"LEASE":
        return server.lease(command.epoch, command.lease_ms, command.echo_ms, command.alone)
    if command.verb == b"PROMOTE":
        return server.promote_by_manager(command.epoch)
    assert command.primary is not None
    return server.follow(command.primary, command.epoch)


def _clone(server: Server, conn: Conn, command: p.Clone) -> None:
    try:
        if not server.replace_state(command.data):
            return  # the server is stopping: no reply
    except SnapshotError as exc:
        log.warning("CLONE refused, state unchanged: %s", exc)
        conn.write(responses.INVALID_SNAPSHOT)
        return
    server.journal.cut_links("CLONE replaced the state")
    conn.write(responses.OK)
