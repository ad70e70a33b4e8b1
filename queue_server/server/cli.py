"""`slotmap queue-server`: run the queue server from flags and an optional config file."""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import socket
import sys

from config.endpoints import parse_host_port
from config.errors import ConfigError
from config.load import load_config
from config.models import QueueServerConfig
from config.tokens import TOKEN_ENV, TOKEN_FILE_ENV, read_token_file, resolve_token
from queue_server.protocol.retry import queue_policy
from queue_server.server.errors import DataCorrupt, DataDirLocked
from queue_server.server.grants import Role, RoleToken
from queue_server.server.join import join
from queue_server.server.listen import ListenError, bind_listeners, fit_open_files
from queue_server.server.replication import SyncSettings
from queue_server.server.server import QueueServer
from queue_server.server.settings import ServerSettings


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("queue-server", help="run the queue server (sockPQd protocol)")
    parser.add_argument("--listen", metavar="HOST:PORT", help="default 127.0.0.1:7400")
    parser.add_argument("--data-dir", metavar="DIR", help="default ./var/queue")
    parser.add_argument("--fsync", choices=("always", "everysec", "never"), help="default always")
    parser.add_argument("-d", dest="expire_done", action="store_true",
                        help="expired jobs are deleted (THEN DONE) instead of requeued")
    parser.add_argument("--config", metavar="FILE", help="cluster config (TOML, [queue_server])")
    parser.add_argument("--token", help="require AUTH <token> before any other command; prefer "
                        f"--token-file or ${TOKEN_ENV} (a command line is visible in ps)")
    parser.add_argument("--token-file", metavar="FILE",
                        help=f"the token is the first line of FILE (also ${TOKEN_FILE_ENV})")
    parser.add_argument("--server-id", type=int, default=1, help="this server's id (INTERCONNECT)")
    parser.add_argument("--replica-of", metavar="HOST:PORT",
                        help="follow this primary: offline for queue commands until promoted")
    parser.add_argument("--promote-after", metavar="S", type=float,
                        help="a replica serves as primary after S seconds without it (5)")
    parser.add_argument("--join", metavar="HOST:PORT,...",
                        help="the cluster's servers: if any answers, start as a replica of the "
                             "lowest id, with the highest id + 1")
    parser.add_argument("--replicate", choices=("async", "sync"),
                        help="sync: acknowledge a change only once min_sync_replicas replicas "
                             "confirmed it (default async)")
    parser.add_argument("--sync-timeout", metavar="S", type=float,
                        help="sync mode: refuse (or fall back) after S seconds without a "
                             "confirmation (2)")
    parser.add_argument("--sync-fallback", choices=("refuse", "async"),
                        help="sync mode, no confirmation in time: refuse writes or go on alone")
    parser.add_argument("--managed", action="store_true",
                        help="the manager decides the primary (managed_failover): acknowledge "
                             "nothing without its lease, never promote alone")
    parser.add_argument("--repair", action="store_true",
                        help="repair a data directory the server refuses to start on (damage "
                             "in a log or snapshot): the bad bytes are kept aside, what is "
                             "dropped is reported; then exit (start the server as usual)")
    parser.add_argument("--log-level", default="INFO")
    parser.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> ServerSettings:
    cluster = load_config(args.config)
    config = cluster.queue_server
    # A queue's lock time from [queues.<name>] is its default lock on the server too;
    # [queue_server].lock_timeouts_s can still set or override it per queue.
    lock_timeouts_s = {name: queue.lock_timeout_s for name, queue in cluster.queues.items()}
    lock_timeouts_s.update(config.lock_timeouts_s)
    policies = {name: queue_policy(queue) for name, queue in cluster.queues.items()}
    host, port = parse_host_port(args.listen or config.listen)
    replica_of = args.replica_of or config.replica_of
    peers = args.join.split(",") if args.join else config.join
    admin_token = resolve_token(flag=args.token, flag_file=args.token_file,
                                config_token=config.token, config_file=config.token_file)
    return ServerSettings(
        host=host,
        port=port,
        data_dir=args.data_dir or config.data_dir,
        fsync=args.fsync or config.fsync,
        expire_done_default=args.expire_done or config.expire_action == "done",
        token=admin_token,
        role_tokens=role_tokens(config, admin_token),
        max_job_bytes=config.max_job_bytes,
        snapshot_log_bytes=config.snapshot_log_bytes,
        lock_timeouts_s=tuple(sorted(lock_timeouts_s.items())),
        policies=tuple(sorted(policies.items())),
        keep_done_total=config.keep_done_total_max,
        server_id=args.server_id,
        replica_of=parse_host_port(replica_of) if replica_of else None,
        promote_after_s=args.promote_after or config.promote_after_s,
        replica_backlog_bytes=config.replica_backlog_bytes,
        join=tuple(parse_host_port(peer.strip()) for peer in peers if peer.strip()),
        max_clients=config.max_clients,
        idle_timeout_s=config.idle_timeout_s,
        output_soft_limit_bytes=config.output_soft_limit_bytes,
        output_hard_limit_bytes=config.output_hard_limit_bytes,
        managed=args.managed or config.managed_failover,
        sync=SyncSettings(
            replicate=args.replicate or config.replicate,
            min_sync_replicas=config.min_sync_replicas,
            sync_timeout_s=args.sync_timeout or config.sync_timeout_s,
            sync_fallback=args.sync_fallback or config.sync_fallback,
        ),
        max_input_bytes=config.max_input_bytes,
        max_output_bytes=config.max_output_bytes,
        auth_timeout_s=config.auth_timeout_s,
        max_unauthenticated_clients=config.max_unauthenticated_clients,
        unauthenticated_input_bytes=config.unauthenticated_input_bytes,
        forget_drained_queues_s=config.forget_drained_queues_s,
    )


def role_tokens(config: QueueServerConfig, admin_token: str | None) -> tuple[RoleToken, ...]:
    """The roles' tokens from their files (docs/SECURITY.md "Roles"). ValueError for an
    unreadable or open file, or one token given to two roles (it would be both)."""
    files = ((Role.PRODUCER, config.producer_token_file, config.producer_queues),
             (Role.WORKER, config.worker_token_file, config.worker_queues),
             (Role.OPERATOR, config.operator_token_file, config.operator_queues),
             (Role.CLUSTER, config.cluster_token_file, None))
    tokens = tuple(RoleToken(role, read_token_file(path), None if queues is None else tuple(queues))
                   for role, path, queues in files if path is not None)
    seen = [token.token for token in tokens] + ([admin_token] if admin_token else [])
    if len(set(seen)) != len(seen):
        raise ValueError("queue_server: two roles have the same token; give each its own")
    return tokens


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        settings = settings_from(args)
    except (ValueError, ConfigError) as exc:  # a bad address, token, token file or config
        print(f"slotmap queue-server: {exc}", file=sys.stderr)
        return 2
    if args.repair:
        return _repair(settings)
    # Bound before the data directory is touched: a bad or taken address changes nothing.
    try:
        listeners = bind_listeners(settings.host, settings.port)
    except ListenError as exc:
        print(f"slotmap queue-server: {exc}", file=sys.stderr)
        return 1
    settings = dataclasses.replace(settings, max_clients=fit_open_files(settings.max_clients))
    try:
        return _open_and_serve(settings, listeners)
    finally:
        for sock in listeners:
            sock.close()


def _open_and_serve(settings: ServerSettings, listeners: list[socket.socket]) -> int:
    if settings.join and settings.replica_of is None:
        settings = join(settings)
    server = QueueServer(settings)
    try:
        server.open()
    except DataDirLocked as exc:
        print(f"slotmap queue-server: {exc}", file=sys.stderr)
        return 1
    except DataCorrupt as exc:
        print(f"slotmap queue-server: the data directory {settings.data_dir} is damaged; not "
              f"starting. {exc}", file=sys.stderr)
        return 3
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    try:
        runner(server.serve(listeners))
    except OSError as exc:  # serving failed after the start (the listeners were bound before)
        print(f"slotmap queue-server: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if server.log_error is not None:
        print(f"slotmap queue-server: stopped because the log failed: {server.log_error}; "
              "unacknowledged requests were cut off, restart to recover", file=sys.stderr)
        return 2
    return 0


def _repair(settings: ServerSettings) -> int:
    """`--repair`: recover with repairs (recovery.py), write the result as a fresh snapshot,
    report, and exit without serving: a flag left in a unit file must not make every later
    start drop damage silently."""
    server = QueueServer(settings)
    try:
        report = server.open(repair=True)
    except (DataDirLocked, DataCorrupt) as exc:
        print(f"slotmap queue-server: cannot repair {settings.data_dir}: {exc}", file=sys.stderr)
        return 1
    finally:
        server.data_dir.close()
    for line in [*report.repairs, *report.problems] or ["nothing to repair"]:
        print(f"repair: {line}")
    print(f"repair: {settings.data_dir} now holds {server.store.totals().jobs} waiting jobs "
          f"({report.records} records replayed); start the server as usual")
    return 0
