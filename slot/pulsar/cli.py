"""`slotmap pulsar --config FILE`: serve the cluster's rate limiters (a limiter per queue with a rate_limit)."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING

from slot.pulsar.protocol import DEFAULT_ENDPOINT

if TYPE_CHECKING:  # the service (ZeroMQ) loads only when the pulsar runs
    from slot.pulsar.service import PulsarService

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"
EXIT_CANNOT_BIND = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pulsar", help="serve the cluster-wide rate limiters (permits for rate-limited queues)"
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="cluster config (TOML); embedded defaults when omitted")
    parser.add_argument("--listen", default=None,
                        help=f"ZeroMQ endpoint (default [pulsar] listen, {DEFAULT_ENDPOINT})")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


class _StopFlag:
    """SIGTERM/SIGINT only set the flag; the loop looks at it every tick."""

    def __init__(self) -> None:
        self.stopping = False
        self.reload_asked = False

    def handle_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True


    def handle_reload(self, signum: int, frame: FrameType | None) -> None:
        # SIGHUP's default ended the pulsar, and every rate-limited queue waited on it: now
        # it re-reads the queues' rate limits (between polls, not in the signal frame).
        self.reload_asked = True


def reload_limits(service: PulsarService, path: str | None) -> None:
    """The config file read again; a bad one changes nothing and the log says why."""
    from config.errors import ConfigError
    from config.load import load_config
    from slot.pulsar.service import limits_of

    try:
        config = load_config(path)
    except ConfigError as exc:
        log.error("SIGHUP: config reload refused, the limiters are unchanged: %s", exc)
        return
    changes = service.apply_limits(limits_of(config.queues))
    log.info("SIGHUP: limits reloaded: %s", "; ".join(changes) or "no rate_limit changed")


def run(args: argparse.Namespace) -> int:
    # Heavy imports wait until the pulsar really runs (every `slotmap` command builds the parser).
    import zmq

    from config.curve import server_keys
    from config.load import load_config
    from config.preflight import check_bindable
    from slot.pulsar.service import PulsarService, describe, limits_of

    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    config = load_config(args.config)
    limits = limits_of(config.queues)
    args.listen = args.listen or config.pulsar.listen
    check_bindable(args.listen, what="--listen" if args.listen != config.pulsar.listen else "pulsar.listen")
    curve = server_keys(config)
    flag = _StopFlag()
    signal.signal(signal.SIGTERM, flag.handle_stop)
    signal.signal(signal.SIGINT, flag.handle_stop)
    signal.signal(signal.SIGHUP, flag.handle_reload)
    try:
        service = PulsarService.from_config(
            config.pulsar, limits, endpoint=args.listen, curve=curve,
            authorized_keys_dir=config.curve_authorized_keys_dir,
        )
    except zmq.ZMQError as exc:
        log.error("cannot listen on %s: %s", args.listen, exc)
        return EXIT_CANNOT_BIND
    log.info("pulsar listening on %s%s: %s", args.listen, " with CURVE" if curve else "", describe(limits))
    try:
        while not flag.stopping:
            service.run_until(lambda: flag.stopping or flag.reload_asked)
            if flag.reload_asked:
                flag.reload_asked = False
                reload_limits(service, args.config)
    finally:
        service.close()
    log.info("pulsar stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m slot.pulsar.cli`: the pulsar alone, without the `slotmap` parser."""
    parser = argparse.ArgumentParser(prog="slotmap pulsar")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
