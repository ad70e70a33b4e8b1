"""`slotmap schedules --config FILE`: each schedule's next and last fire (a table or --json);
`slotmap schedules run|pause|resume NAME`: an admin's word, recorded as an event (door cli)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

# `slotmap` builds every parser: SQLAlchemy and the client load only when this command runs.
if TYPE_CHECKING:
    from collections.abc import Sequence

    from config.models import ClusterConfig
    from manager.schedules.view import ScheduleRow
    from manager.storage.store import Store

EXIT_UNKNOWN = 1
SCHEDULE_COLUMNS = ("schedule", "queue", "rule", "next fire (UTC)", "last job", "state")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("schedules", help="periodic jobs: next and last fire; run, pause, resume")
    parser.add_argument("--config", help="cluster config (TOML): [schedules.*] and the manager's database")
    parser.add_argument("--json", action="store_true", help="a JSON array, one object per schedule")
    parser.add_argument("action", nargs="?", choices=["run", "pause", "resume"],
                        help="run NAME (a job now), pause NAME, resume NAME")
    parser.add_argument("name", nargs="?", help="the schedule")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from config.load import load_config
    from manager.schedules.admin import UnknownSchedule, act
    from manager.storage.store import Store

    config = load_config(args.config)
    if args.action is not None and not args.name:
        print(f"slotmap schedules {args.action}: name the schedule", file=sys.stderr)
        return 2
    store = Store.open(config.manager.database_url)
    try:
        if args.action is not None:
            try:
                print(act(store, config.schedules, args.name, args.action, door="cli", now_unix=time.time()))
            except UnknownSchedule as exc:
                print(f"slotmap schedules: {exc}", file=sys.stderr)
                return EXIT_UNKNOWN
            return 0
        return _show(config, store, as_json=args.json)
    finally:
        store.close()


def _show(config: ClusterConfig, store: Store, *, as_json: bool) -> int:
    from config.tokens import component_token
    from manager.schedules.state import ScheduleStates
    from manager.schedules.view import schedule_rows
    from queue_server.client import QueueClient
    from queue_server.protocol.client_errors import QueueServerError

    servers = config.queue_server.servers or config.queue_server.listen
    unknown: list[str] = []
    with QueueClient(servers, token=component_token(config.queue_server), timeout_s=2.0, connect_timeout_s=1.0,
                     reconnect_attempts=0) as client:
        def job_state(key: str) -> str:
            try:
                info = client.job(key)
            except QueueServerError as exc:
                unknown.append(f"{key}: {exc}")
                return "unknown"
            return "done" if info is None else str(info.state)

        rows = schedule_rows(config.schedules, ScheduleStates(store.engine).all(),
                             now_unix=time.time(), job_state=job_state)
    if unknown:  # on stderr: --json's output stays one JSON document
        print(f"slotmap schedules: {len(unknown)} last job state(s) unknown, the queue server did not "
              f"say ({unknown[0]})", file=sys.stderr)
    if as_json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
        return 0
    if not rows:
        print("no schedules (add a [schedules.<name>] table to the config)")
        return 0
    print(schedules_table(rows), end="")
    if any(row.manager_differs for row in rows):
        print("[...]: the active manager runs otherwise than this file; `slotmap manager` reloads "
              "its config on SIGHUP (docs/CONFIG.md, Reloading)")
    return 0


def schedules_table(rows: Sequence[ScheduleRow]) -> str:
    """The table `slotmap schedules` prints: each column as wide as its longest value (a cron
    in America/Argentina/Buenos_Aires or a long schedule's last job key overran fixed widths)."""
    from queue_server.client.text_table import text_table

    cells = []
    for row in rows:
        next_fire = _utc(row.next_fire_unix) if row.next_fire_unix else ("paused" if row.paused else "disabled")
        state = (row.last_job_state or "-") + (f"  [{row.manager_differs}]" if row.manager_differs else "")
        cells.append([row.name, row.queue, row.rule, next_fire, row.last_job_key or "-", state])
    return text_table(SCHEDULE_COLUMNS, cells)


def _utc(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%d %H:%M:%S")
