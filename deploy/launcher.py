"""`slotmap run [--config FILE]`: the whole chain on one box as child processes (what `make run` starts).

Queue server, manager, one master (taking its map from the manager), the dashboard when
`slotmap admin` exists, and the demo producer. Each child's output goes to var/log/ beside
the config file (config/paths.py RunFiles; the current folder's for the embedded demo).
Ctrl-C or SIGTERM stops them in reverse order (SIGTERM, wait, SIGKILL); when one child
dies on its own, the launcher says which and stops the rest, except a queue server with
replicas beside it (--replicas): the manager fails over, and it is started again. The cluster is "up" only
once the master's first report lists no handler module that failed to import.
Secrets (the queue server token) reach children through their environment or the
config file, never their command line, which `ps` shows to every user.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, TextIO

from config.errors import ConfigError
from deploy.children import STOP_DEADLINE_S, Child, ChildSpec

if TYPE_CHECKING:
    from config.models import ClusterConfig
    from config.paths import RunFiles

DEFAULT_CONFIG = Path(__file__).resolve().with_name("default_cluster.toml")
# config/tokens.py reads the queue server token from here.
QUEUE_TOKEN_ENV = "SLOTMAP_QUEUE_TOKEN"
READY_DEADLINE_S = 20.0
POLL_S = 0.5
STATUS_EVERY_S = 10.0
# With replicas, a queue server that dies after this long is started again (it comes back
# as a replica of the new primary); one that dies sooner is a crash loop: everything stops.
RESTART_MIN_UPTIME_S = 2.0
# The children a SIGHUP to `slotmap run` reaches, in this order, and what each then does.
RELOADS = {
    "pulsar": "it re-reads the queues' rate limits",
    "manager": "it re-reads the config (queues, schedules; docs/CONFIG.md, Reloading)",
    "master": "it reloads its handler code (docs/GUIDE.md, Deploying new handler code)",
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run", help="run the whole demo cluster here: queue server, manager, master, dashboard, producer"
    )
    parser.add_argument("--config", help=f"cluster config (TOML); default ${{SLOTMAP_CONFIG}}, else "
                        f"the embedded {DEFAULT_CONFIG.name}; logs, tokens and the master's report go to var/ "
                        "beside it (the current folder's for the embedded one)")
    parser.add_argument("--no-producer", action="store_true", help="do not start the demo producer")
    parser.add_argument("--producer-scale", type=float, default=1.0, help="multiply the demo job rate")
    parser.add_argument("--replicas", type=int, default=0, choices=range(0, 3), metavar="N",
                        help="N queue-server replicas (0-2) beside the primary, in sync mode with "
                             "the manager's failover (deploy/replicas.py)")
    parser.set_defaults(func=run)


def child_specs(
    config: ClusterConfig, config_path: Path, files: RunFiles, *, with_admin: bool,
    with_producer: bool, producer_scale: float = 1.0, queue_token: str | None = None, replicas: int = 0,
) -> list[ChildSpec]:
    """The children in start order (pure). `queue_token` is the queue server's token as
    resolved from the environment, a token file or the config (config/tokens.py)."""
    from config.load import without_password
    from deploy.replicas import replica_args

    servers = ",".join(config.queue_server.servers) or config.queue_server.listen
    cfg = ("--config", str(config_path))
    specs = [
        ChildSpec("queue-server", ("queue-server", *cfg),
                  f"{config.queue_server.listen} (data in {config.queue_server.data_dir})"),
        *(ChildSpec(f"queue-replica-{i}", args, f"{args[4]} (replica, data in {args[6]})")
          for i, args in enumerate(replica_args(config, config_path, replicas), start=1)),
        ChildSpec("pulsar", ("pulsar", *cfg), f"{config.pulsar.listen} (cluster rate limits)"),
        ChildSpec("manager", ("manager", *cfg),
                  f"{config.manager.listen} for masters (history in {without_password(config.manager.database_url)})"),
        ChildSpec("master", ("master", *cfg, "--report-file", str(files.master_report),
                             "--manager", config.manager.listen),
                  f"slots on ipc:// under {config.master.ipc_dir}",
                  stop_deadline_s=max(config.master.stop_deadline_s, config.master.stop_timeout_s)
                  + STOP_DEADLINE_S),
    ]
    if with_admin:
        specs.append(ChildSpec("admin", ("admin", *cfg), f"http://{config.admin.listen}/"))
    if with_producer:
        token = ((QUEUE_TOKEN_ENV, queue_token),) if queue_token is not None else ()
        specs.append(ChildSpec(
            "demo-producer",
            ("demo-producer", "--servers", servers, "--scale", str(producer_scale)),
            f"putting demo jobs into {servers}",
            env=token,
        ))
    return specs


def admin_available() -> bool:
    """The dashboard is another engineer's package: run it only when `slotmap admin` exists."""
    try:
        return importlib.util.find_spec("admin_ui.cli") is not None
    except ModuleNotFoundError:
        return False


class Launcher:
    def __init__(self, specs: Sequence[ChildSpec], config: ClusterConfig, files: RunFiles, *,
                 out: TextIO, queue_token: str | None = None) -> None:
        self.specs = list(specs)
        self.config = config
        self.files = files
        self.queue_token = queue_token
        self.out = out
        self.children: list[Child] = []
        self.stopping = False
        self.failed: Child | None = None
        self.up = False  # every child started: from then on a queue server may fail over
        # SIGHUP (`systemctl reload`): config and code reloaded (RELOADS); nothing stops.
        self.reload_asked = False
        # Writes again the file the children run on from the user's (run() sets it).
        self.rederive: Callable[[], object] | None = None
        self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def handle_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            self.reload_asked = True
        elif signum != signal.SIGCHLD:
            self.stopping = True

    def run(self) -> int:
        signal.set_wakeup_fd(self._wake_write, warn_on_full_buffer=False)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP):
            signal.signal(signum, self.handle_signal)
        try:
            if self.start_all():
                self.up = True
                self.print_where()
                self.watch()
        finally:
            self.stop_all()
            signal.set_wakeup_fd(-1)
            os.close(self._wake_read)
            os.close(self._wake_write)
        if self.failed is not None:
            return 1
        print("slotmap run: every part stopped", file=self.out, flush=True)
        return 0

    def start_all(self) -> bool:
        self.files.log_dir.mkdir(parents=True, exist_ok=True)
        self.files.run_dir.mkdir(parents=True, exist_ok=True)
        # A report left by an earlier run must not pass for this master's.
        self.files.master_report.unlink(missing_ok=True)
        for spec in self.specs:
            if self.stopping:
                return False
            child = Child(spec, self.files.log_dir)
            self.children.append(child)
            print(f"slotmap run: started {spec.name} (pid {child.pid}), log {child.log_path}",
                  file=self.out, flush=True)
            if spec.name == "queue-server" and not self.wait_accepting(child):
                return False
            if spec.name == "master" and not self.wait_handlers_loaded(child):
                return False
        return True

    def wait_handlers_loaded(self, child: Child) -> bool:
        """The master's first report: every handler module imported, or the start failed."""
        from master.report import HostReport, ReportError

        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline and not self.stopping:
            if self.check_children():
                return False
            try:
                report = HostReport.decode(self.files.master_report.read_bytes())
            except (FileNotFoundError, ReportError):
                self.wait(0.05)
                continue
            if report.handler_failures:
                failures = "; ".join(f"{source}: {why}" for source, why in report.handler_failures.items())
                self.fail(child, f"could not import its handlers ({failures}); their queues would get "
                                 "no slots")
                return False
            return True
        if not self.stopping:
            self.fail(child, f"wrote no report within {READY_DEADLINE_S:.0f} s")
        return False

    def wait_accepting(self, child: Child) -> bool:
        """The others need the queue server: wait until its port accepts connections."""
        host, _, port = self.config.queue_server.listen.rpartition(":")
        deadline = time.monotonic() + READY_DEADLINE_S
        while time.monotonic() < deadline and not self.stopping:
            if self.check_children():
                return False
            # Refused or timed out: not accepting yet; the deadline's failure says so.
            with contextlib.suppress(OSError), socket.create_connection((host.strip("[]"), int(port)), 0.2):
                return True
            self.wait(0.05)
        if not self.stopping:
            self.fail(child, f"did not accept connections on {self.config.queue_server.listen} "
                             f"within {READY_DEADLINE_S:.0f} s")
        return False

    def print_where(self) -> None:
        lines = [f"  {c.spec.name:<14} {c.spec.where}" for c in self.children]
        print("slotmap run: the cluster is up (Ctrl-C stops it)\n" + "\n".join(lines),
              file=self.out, flush=True)

    def watch(self) -> None:
        status_at = time.monotonic() + STATUS_EVERY_S
        while not self.stopping:
            self.wait(POLL_S)
            if self.check_children():
                return
            if self.reload_asked:
                self.reload_children()
            if time.monotonic() >= status_at:
                status_at = time.monotonic() + STATUS_EVERY_S
                self.print_status()

    def reload_children(self) -> None:
        """SIGHUP (`systemctl reload`): each child that reloads re-reads the one config file.
        The queue servers are not told: their settings are bound at start (docs/CONFIG.md)."""
        self.reload_asked = False
        if self.rederive is not None:
            try:
                self.rederive()
            except ConfigError as exc:
                print(f"slotmap run: SIGHUP: the config is refused, nothing reloaded: {exc}",
                      file=sys.stderr, flush=True)
                return
        for child in self.children:
            what = RELOADS.get(child.spec.name)
            if what is not None and child.exit_code() is None:
                child.process.send_signal(signal.SIGHUP)
                print(f"slotmap run: SIGHUP to the {child.spec.name} (pid {child.pid}): {what}",
                      file=self.out, flush=True)

    def wait(self, timeout_s: float) -> None:
        """Sleep until a signal arrives (a child's death included) or timeout_s passes."""
        with contextlib.suppress(InterruptedError):  # a signal: what this wait is for
            select.select([self._wake_read], [], [], timeout_s)
        with contextlib.suppress(BlockingIOError):  # the pipe is empty: drained
            while os.read(self._wake_read, 512):
                continue

    def check_children(self) -> bool:
        """True when a child has died (the launcher then stops the rest), unless it was a
        queue server with replicas beside it: then it is started again (restart_queue_server)."""
        for index, child in enumerate(self.children):
            code = child.exit_code()
            if code is None:
                continue
            if self.may_restart(child):
                self.children[index] = self.restart_queue_server(child, code)
                continue
            self.fail(child, f"exited with {_describe_exit(code)}")
            return True
        return False

    def may_restart(self, child: Child) -> bool:
        qs = self.config.queue_server
        return (self.up and qs.managed_failover and len(qs.servers) > 1
                and child.spec.name.startswith(("queue-server", "queue-replica-"))
                and time.monotonic() - child.started_at >= RESTART_MIN_UPTIME_S)

    def restart_queue_server(self, child: Child, code: int) -> Child:
        """The manager promotes a replica that was in sync if the dead one was the
        primary; the dead one, started again on its port with its data and no
        --replica-of, acknowledges nothing without the manager's lease and is told to
        follow the primary (dropping what no replica confirmed): in sync mode the new
        primary needs it to acknowledge anything, with one replica."""
        from deploy.replicas import restart_args

        child.stop()  # reaped; whatever it left in its session goes too
        spec = replace(child.spec, args=restart_args(child.spec.args))
        again = Child(spec, self.files.log_dir)
        print(f"slotmap run: {child.spec.name} (pid {child.pid}) exited with {_describe_exit(code)}; "
              f"the manager fails over to a replica in sync, and it is started again as pid "
              f"{again.pid} to follow the primary", file=self.out, flush=True)
        return again

    def fail(self, child: Child, why: str) -> None:
        self.failed = child
        print(f"slotmap run: {child.spec.name} (pid {child.pid}) {why}; stopping the others\n"
              f"  last lines of {child.log_path}:\n{child.log_tail()}", file=sys.stderr, flush=True)

    def print_status(self) -> None:
        from queue_server.client import QueueClient
        from queue_server.protocol.client_errors import QueueServerError

        servers = self.config.queue_server.servers or self.config.queue_server.listen
        try:
            with QueueClient(servers, token=self.queue_token, timeout_s=2.0,
                             reconnect_attempts=0) as client:
                stats = client.stats()
        except QueueServerError as exc:
            print(f"slotmap run: queue server stats unavailable: {exc}", file=self.out, flush=True)
            return
        parts = [f"{name} {s.done} done / {s.ready} waiting" for name, s in sorted(stats.items())]
        print("slotmap run: " + ("; ".join(parts) or "no jobs yet"), file=self.out, flush=True)

    def stop_all(self) -> None:
        running = [c for c in self.children if c.exit_code() is None]
        if running:
            print("slotmap run: stopping " + ", ".join(c.spec.name for c in reversed(running)),
                  file=self.out, flush=True)
        # Producers and consumers first, the queue server last: slots finish their batches.
        for child in reversed(self.children):
            child.stop()


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):  # a number no signal name has: said as a code
            return f"signal {signal.Signals(-code).name}"
    return f"code {code}"


def derive_config(config_path: Path, replicas: int) -> tuple[ClusterConfig, Path, RunFiles]:
    """The file read (ConfigError when it is bad), what the children run on, and where the
    run's own files go: with the replicas and the role tokens (kept in var/run/tokens: the
    same on every call) added, a file written beside the logs; else the file itself."""
    from config.load import load_config
    from config.paths import run_files
    from deploy.replicas import with_replicas, write_config
    from deploy.role_tokens import with_role_tokens

    # The embedded demo file's relative paths (./var/...) are the current folder's, as with no
    # file at all; the children then read a derived file, whose paths are all absolute.
    embedded = config_path.resolve() == DEFAULT_CONFIG
    files = run_files(None if embedded else config_path)
    config = load_config(config_path, paths_against=files.home if embedded else None)
    derived = with_replicas(config, replicas) if replicas else config
    derived = with_role_tokens(derived, files.run_dir / "tokens")
    if derived is config and not embedded:
        return config, config_path, files
    return derived, write_config(derived, files.log_dir / "cluster-derived.toml"), files


def check_token_files(config: ClusterConfig, *, with_admin: bool) -> None:
    """Every token file a child will read, read now (ConfigError): a file others may read, or
    an empty one, stops `slotmap run` before it starts anything, not a child after 'the cluster
    is up' (the dashboard, started last, took the whole cluster down with it)."""
    from config.paths import token_files
    from config.tokens import read_token_file

    for path in token_files(config, sections=("queue_server", "admin") if with_admin else ("queue_server",)):
        try:
            read_token_file(path)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc


def run(args: argparse.Namespace) -> int:
    from config.load import CONFIG_ENV
    from config.tokens import role_token

    chosen = args.config or os.environ.get(CONFIG_ENV)
    source = Path(chosen) if chosen else DEFAULT_CONFIG
    config, config_path, files = derive_config(source, args.replicas)
    with_admin = admin_available()
    check_token_files(config, with_admin=with_admin)
    try:
        # The demo producer's and the status line's (STATS): the producer role's token.
        token = role_token(config.queue_server, "producer")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    specs = child_specs(
        config, config_path.resolve(), files, with_admin=with_admin,
        with_producer=not args.no_producer, producer_scale=args.producer_scale, queue_token=token,
        replicas=args.replicas,
    )
    launcher = Launcher(specs, config, files, out=sys.stdout, queue_token=token)
    # SIGHUP: the children re-read the file they run on, so it is derived again from yours first.
    launcher.rederive = lambda: derive_config(source, args.replicas)[1]
    return launcher.run()
