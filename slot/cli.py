"""`slotmap demo-producer`: keep the demo queues busy (used by the all-in-one launcher)."""
from __future__ import annotations

import argparse
import logging
import os

from slot.demo_producer import ProducerSettings, produce

# The queue server token, as `slotmap run` passes it (config/tokens.py reads the same).
TOKEN_ENV = "SLOTMAP_QUEUE_TOKEN"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo-producer", help="put a steady stream of jobs into the demo queues (demo_*)"
    )
    parser.add_argument("--servers", default="127.0.0.1:7400", help="queue servers, HOST:PORT[,..]")
    parser.add_argument("--token", default=None,
                        help=f"queue server token; prefer ${TOKEN_ENV} (a flag is visible in ps)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the job rate")
    parser.add_argument("--duration-s", type=float, default=None, help="stop after this long")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    put = produce(ProducerSettings(
        servers=args.servers, token=args.token or os.environ.get(TOKEN_ENV) or None, scale=args.scale, duration_s=args.duration_s,
    ))
    logging.getLogger(__name__).info("put %d jobs", put)
    return 0
