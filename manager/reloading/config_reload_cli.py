"""`slotmap config-reload --config FILE`: ask the active manager to reload its config (as
SIGHUP, from any host that reaches the cluster database) and wait for what it says."""
from __future__ import annotations

import argparse
import sys
import time

EXIT_REFUSED = 1
EXIT_NO_ANSWER = 2
# The manager takes requests every second; a loaded box and a database round trip or two.
WAIT_S = 30.0
POLL_S = 0.2


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config-reload",
        help="ask the active manager to reload its config file (queues, schedules) and show the result",
    )
    parser.add_argument("--config", help="cluster config (TOML): the manager's database")
    parser.add_argument("--wait-s", type=float, default=WAIT_S,
                        help=f"how long to wait for the manager's answer (default {WAIT_S:g}, at most 600)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from config.load import load_config
    from manager.reloading.reload_requests import request_reload
    from manager.storage.db import Event
    from manager.storage.store import EventKind, Store

    if not 0 < args.wait_s <= 600:
        print("slotmap config-reload: --wait-s must be in (0, 600]", file=sys.stderr)
        return 2
    config = load_config(args.config)
    store = Store.open(config.manager.database_url)
    kinds = (EventKind.CONFIG_RELOADED, EventKind.CONFIG_RELOAD_REFUSED)
    try:
        with Session(store.engine) as session:
            before = session.scalar(select(Event.id).order_by(Event.id.desc()).limit(1)) or 0
        request_reload(store.engine, door="cli", now_unix=time.time())
        deadline = time.monotonic() + args.wait_s
        while time.monotonic() < deadline:
            with Session(store.engine) as session:
                answer = session.scalars(select(Event).where(Event.id > before, Event.kind.in_(kinds))
                                         .order_by(Event.id).limit(1)).first()
            if answer is not None:
                print(answer.message)
                return EXIT_REFUSED if answer.kind == EventKind.CONFIG_RELOAD_REFUSED else 0
            time.sleep(POLL_S)  # polling another process's answer in the database
    finally:
        store.close()
    print(f"slotmap config-reload: no answer from an active manager within {args.wait_s:g} s "
          "(the request stays: the next active manager takes it)", file=sys.stderr)
    return EXIT_NO_ANSWER
