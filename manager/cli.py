"""`slotmap manager --config FILE`: wait to become the active manager, then plan the cluster."""
from __future__ import annotations

import argparse
import logging
import signal
import time
from types import FrameType
from typing import TYPE_CHECKING

from config.tokens import component_token

# Every `slotmap` command builds the whole parser: the heavy imports (SQLAlchemy, alembic,
# ZeroMQ) wait until the manager really runs.
if TYPE_CHECKING:
    from config.models import ClusterConfig
    from manager.failover.leader import Lease
    from manager.hosts.link import ManagerSocket
    from manager.reloading.config_reload import ConfigReloader
    from manager.schedules.firing import FiringThread
    from manager.service import Manager
    from manager.storage.store import Store

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
# The previous active manager's socket may linger a moment after its death.
BIND_DEADLINE_S = 10.0
BIND_RETRY_S = 0.2
# Stats requests must not hold the loop past a master's liveness.
QUEUE_SERVER_TIMEOUT_S = 2.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "manager", help="run the manager: collect stats, plan the slot map, send it to the masters"
    )
    parser.add_argument("--config", help="cluster config (TOML); embedded defaults when omitted")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument(
        "--standby", action="store_true",
        help="this manager is one of several for the cluster (one active, the others standing by): "
             "refuse a database they cannot share (in-memory SQLite), where each would be active",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--new-curve-secret", metavar="FILE",
        help="write a new shared CURVE secret (curve_secret_file on the manager, the pulsar and every "
             "master) and exit; an existing FILE is never overwritten",
    )
    keys.add_argument(
        "--new-host-key", metavar="NAME",
        help="write NAME.key (public) and NAME.key_secret into --keys-dir and exit: per-host keys, "
             "NAME being the host's name, the only host the key may speak for (docs/SECURITY.md)",
    )
    parser.add_argument("--keys-dir", default=".", help="where --new-host-key writes (default: here)")
    parser.set_defaults(func=run)


def write_curve_secret(path: str) -> int:
    """A fresh z85 CURVE secret key, readable by its owner only (ConfigError if the file exists)."""
    from config.curve import write_secret

    write_secret(path)
    print(f"wrote a CURVE secret to {path}; set curve_secret_file = \"{path}\" in the cluster config")
    return 0


def write_host_key(name: str, directory: str) -> int:
    from config.curve import write_host_key as write

    public, secret = write(directory, name)
    print(f"wrote {public} (public: put it in curve_authorized_keys_dir on the manager and pulsar, "
          f"or use it as curve_server_key_file) and {secret} (secret: curve_secret_file on {name} only)")
    return 0


class _StopFlag:
    """SIGTERM/SIGINT only set the flag; the loops look at it."""

    def __init__(self) -> None:
        self.manager: Manager | None = None
        self.stopping = False

    def handle_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True
        if self.manager is not None:
            self.manager.stopping = True


def run(args: argparse.Namespace) -> int:
    from config.curve import server_keys
    from config.load import load_config
    from config.preflight import check_bindable
    from manager.failover.leader import wait_for_lease
    from manager.reloading.config_reload import ConfigReloader

    if args.new_curve_secret:
        return write_curve_secret(args.new_curve_secret)
    if args.new_host_key:
        return write_host_key(args.new_host_key, args.keys_dir)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    config = load_config(args.config)
    # Everything that can be checked without the lock is checked before taking it: a
    # standby with a bad address or key would otherwise fail only once it becomes active.
    check_bindable(config.manager.listen, what="manager.listen")
    server_keys(config)
    component_token(config.queue_server)
    check_election(config.manager.database_url, standby=args.standby)
    flag = _StopFlag()
    signal.signal(signal.SIGTERM, flag.handle_stop)
    signal.signal(signal.SIGINT, flag.handle_stop)
    # SIGHUP's default ended the manager, and `slotmap run` with it the whole cluster: it
    # reloads the config now (manager/reloading/config_reload.py); the flag is looked at each turn.
    reloader = ConfigReloader(args.config)
    signal.signal(signal.SIGHUP, reloader.handle_sighup)
    url = config.manager.database_url
    lease = wait_for_lease(url, stopping=lambda: flag.stopping)
    if lease is None:
        log.info("stopped while standing by")
        return 0
    log.info("active manager: holding the %s", lease.description)
    try:
        return _run_active(config, flag, lease, reloader)
    finally:
        lease.release()


def _run_active(config: ClusterConfig, flag: _StopFlag, lease: Lease, reloader: ConfigReloader) -> int:
    from config.load import without_password
    from manager.planning.plan_inputs import QueueStatsReader
    from manager.service import Manager
    from manager.storage.store import Store
    from queue_server.client import QueueClient

    store = Store.open(config.manager.database_url)
    socket = _bind(config)
    if socket is None:
        store.close()
        return 1
    servers = config.queue_server.servers or config.queue_server.listen
    client = QueueClient(
        servers, token=component_token(config.queue_server, "producer"), timeout_s=QUEUE_SERVER_TIMEOUT_S,
        connect_timeout_s=1.0, reconnect_attempts=0,
    )
    manager = Manager(
        config, store=store, socket=socket, stats_reader=QueueStatsReader(client), lease=lease,
    )
    flag.manager = manager
    manager.stopping = flag.stopping
    if config.queue_server.managed_failover:
        _start_sentinel(config, store, manager)
    log.info("manager listening on %s for masters; queue server %s; database %s",
             socket.endpoint, servers, without_password(config.manager.database_url))
    schedules = start_schedules(config, store)

    def reload_schedules(reloaded: ClusterConfig) -> None:
        nonlocal schedules
        if schedules is None:
            schedules = start_schedules(reloaded, store)  # the file's first schedule
        else:
            schedules.firing.replace_rules(reloaded.schedules)
            log.info("schedules after the reload: %s",
                     ", ".join(sorted(n for n, r in reloaded.schedules.items() if r.enabled)) or "none")

    manager.reloader = reloader
    manager.on_reload = reload_schedules
    try:
        return manager.run()
    finally:
        if schedules is not None:
            schedules.stop()
        client.close()
        socket.close()
        store.close()


def start_schedules(config: ClusterConfig, store: Store) -> FiringThread | None:
    """The schedule thread with a queue client of its own (a client is not shared across threads)."""
    from manager.schedules.firing import Firing, FiringThread, Job
    from manager.schedules.state import ScheduleStates
    from queue_server.client import QueueClient

    if not any(rule.enabled for rule in config.schedules.values()):
        return None
    client = QueueClient(
        config.queue_server.servers or config.queue_server.listen, token=component_token(config.queue_server, "producer"),
        timeout_s=QUEUE_SERVER_TIMEOUT_S, connect_timeout_s=1.0, reconnect_attempts=0,
    )

    def put(job: Job) -> None:
        client.put(job.queue, job.data, priority=job.priority, key=job.key)

    thread = FiringThread(Firing(config.schedules, states=ScheduleStates(store.engine), put=put,
                                 note=store.add_event), on_stop=client.close)
    thread.start()
    log.info("firing %d schedules: %s", len(config.schedules), ", ".join(sorted(config.schedules)))
    return thread


def _start_sentinel(config: ClusterConfig, store: Store, manager: Manager) -> None:
    """The queue servers' failover (manager/failover/sentinel.py), in a thread of the active manager;
    its lock is checked every LOCK_CHECK_S meanwhile, so that a manager that lost it stops
    renewing leases within the sentinel's margin."""
    from manager.failover import sentinel

    qs = config.queue_server
    servers = qs.servers or [qs.listen]
    manager.lease_check_s = sentinel.LOCK_CHECK_S
    sentinel.start(sentinel.Sentinel(
        store.engine, servers, token=component_token(config.queue_server, "cluster"), lease_s=qs.lease_s,
        promote_after_s=qs.promote_after_s, sync_mode=qs.replicate == "sync",
        min_sync_replicas=qs.min_sync_replicas,
        note=lambda event: store.add_event(time.time(), event),
        stopping=lambda: manager.stopping))


def check_election(url: str, *, standby: bool) -> None:
    """ConfigError for a database no election can run on; an in-memory database has no
    lock to share, so a manager on one is alone by construction: refused with --standby,
    said loudly without it."""
    from config.errors import ConfigError
    from manager.storage.database_identity import identify

    try:
        database = identify(url)
    except ValueError as exc:
        raise ConfigError(f"manager.database_url: {exc}") from exc
    if database.shareable:
        return
    if standby:
        raise ConfigError(
            "--standby with an in-memory database: each manager would have a database of its own "
            "and be active at once; give manager.database_url a file (sqlite:///path) or PostgreSQL"
        )
    log.warning("in-memory database: this manager takes no lock, so it must be the cluster's only "
                "manager (no standby can take over, and a second one would be active too)")


def _bind(config: ClusterConfig) -> ManagerSocket | None:
    import zmq

    from config.curve import server_keys
    from manager.hosts.link import ManagerSocket

    curve = server_keys(config)
    deadline = time.monotonic() + BIND_DEADLINE_S
    while True:
        try:
            return ManagerSocket(
                config.manager.listen, curve=curve, authorized_keys_dir=config.curve_authorized_keys_dir,
                max_message_bytes=config.manager.max_message_bytes,
            )
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EADDRINUSE or time.monotonic() >= deadline:
                log.error("cannot listen on %s: %s", config.manager.listen, exc)
                return None
            time.sleep(BIND_RETRY_S)

