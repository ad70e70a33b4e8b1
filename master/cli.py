"""`slotmap master --config FILE`: run this host's master (preload handlers, fork slots)."""
from __future__ import annotations

import argparse
import logging
from pathlib import Path

from config.load import load_config
from master.arbiter import Master
from slot.discovery import extend_sys_path
from slot.queue_settings import conflicts

LOG_FORMAT = "%(asctime)s %(process)d %(name)s %(levelname)s %(message)s"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "master", help="run the host's master: preload handlers, fork and watch slots"
    )
    parser.add_argument("--config", help="cluster config (TOML); embedded defaults when omitted")
    parser.add_argument(
        "--report-file",
        type=Path,
        help="write the host report (JSON) here, replaced atomically every --report-interval-s",
    )
    parser.add_argument("--report-interval-s", type=float, default=1.0)
    parser.add_argument(
        "--manager",
        metavar="ENDPOINT[,ENDPOINT]",
        help="take the slot map from the manager here (e.g. tcp://127.0.0.1:7500); static map until then",
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT)
    config = load_config(args.config)
    options = dict(
        report_path=args.report_file,
        report_interval_s=args.report_interval_s,
        config_path=Path(args.config) if args.config else None,
    )
    if args.manager:
        from master.manager_link import ManagedMaster, parse_endpoints

        master: Master = ManagedMaster(config, manager_endpoints=parse_endpoints(args.manager), **options)
    else:
        master = Master(config, **options)
    extend_sys_path(config.master.python_path)
    master.preload()
    for conflict in conflicts(config.queues, master.loaded.handlers):
        logging.getLogger(__name__).warning("%s", conflict.message())
    # Until a manager assigns slots, the config's static map is the whole plan.
    master.apply_slot_map(config.master.static_slots)
    return master.run()
