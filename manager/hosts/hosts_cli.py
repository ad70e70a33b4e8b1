"""`slotmap hosts --config FILE`: each host's latest sample from the manager's database, with
the version of its handler code: during a rolling deploy the hosts that differ from the
version most live hosts run are marked, and a refused code reload is shown; under a host, each
queue whose handler cannot start there (setup() or import error, how many times, next try)."""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `slotmap` builds every parser: SQLAlchemy loads only when this command runs
    from manager.storage.store_reads import HostReading


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("hosts", help="hosts as the manager last heard them, with their code versions")
    parser.add_argument("--config", help="cluster config (TOML): the manager's database")
    parser.add_argument("--json", action="store_true", help="a JSON array, one object per host")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from config.load import load_config
    from manager.events.code_versions import other_code
    from manager.storage.samples import read_start_failures
    from manager.storage.store import Store
    from manager.storage.store_reads import reading

    config = load_config(args.config)
    store = Store.open(config.manager.database_url)
    try:
        with reading(store) as reads:
            # As the dashboard: a host not heard of for 12 plans is no longer current.
            hosts = reads.latest_host_samples(forget_after_s=max(60.0, 12 * config.manager.plan_interval_s))
    finally:
        store.close()
    hosts = sorted(hosts, key=lambda h: h.host)
    other = other_code((h.host, h.alive, h.code_version) for h in hosts)
    if args.json:
        print(json.dumps([{**asdict(h), "other_code": h.host in other,
                           "start_failures": read_start_failures(h.start_failures)} for h in hosts], indent=1))
        return 0
    print(table(hosts, other, now=time.time()))
    return 0


def table(hosts: Sequence[HostReading], other: set[str], *, now: float) -> str:
    lines = [f"{'host':<24} {'state':<6} {'slots':>5} {'heard':>8}  code"]
    for h in hosts:
        notes = []
        if h.host in other:
            notes.append("OTHER CODE")
        if h.code_reload_failure:
            notes.append(h.code_reload_failure)
        code = " ".join([h.code_version or "-", *notes])
        lines.append(f"{h.host:<24} {'up' if h.alive else 'lost':<6} {h.slots:>5} "
                     f"{max(0.0, now - h.at_unix):>7.0f}s  {code}")
        if h.alive:
            lines += start_failure_lines(h.start_failures, now=now)
    if len(lines) == 1:
        lines.append("(no host sample yet: is the manager running on this database?)")
    return "\n".join(lines)


def start_failure_lines(stored: str | None, *, now: float) -> list[str]:
    """One indented line per queue (or handler module) that cannot start on the host."""
    from manager.storage.samples import read_start_failures

    lines = []
    for failure in read_start_failures(stored):
        retry_at = failure.get("retry_at_unix")
        if failure.get("kind") == "import":
            what, retry = f"{failure.get('source')} failed to import", "fix it, then restart the master"
        else:
            what = f"queue {failure.get('queue')}: {failure.get('source')} failed"
            retry = f"next try in {max(0.0, retry_at - now):.0f}s" if isinstance(retry_at, (int, float)) else ""
        first = failure.get("first_at_unix")
        since = time.strftime(" since %H:%M:%S UTC", time.gmtime(first)) if isinstance(first, (int, float)) else ""
        lines.append(f"  ! {what}: {failure.get('error')} (x{failure.get('count')}{since}"
                     f"{'; ' + retry if retry else ''})")
    return lines
