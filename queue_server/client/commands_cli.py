"""`slotmap put`, `slotmap get`, `slotmap stats`: the queue client from the shell."""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from config.errors import ConfigError
from config.load import CONFIG_ENV, load_config
from config.tokens import TOKEN_ENV, TOKEN_FILE_ENV, resolve_token
from queue_server.client import QueueClient
from queue_server.client.text_table import text_table
from queue_server.protocol.client_errors import ConnectionLost, OfflineError, QueueServerError
from queue_server.protocol.replies import Job, QueueStats
from queue_server.protocol.requests import DEFAULT_SERVER

EXIT_OK = 0
EXIT_FAILED = 1  # the server could not be reached or refused the request
EXIT_USAGE = 2
# The door the queue server counts this CLI's RETRY and DELETE under (the manager's events).
DOOR = "cli"
# A failover takes 1.5-2 s (docs/DESIGN.md, "Failover time"): a command waits that out.
CLI_OFFLINE_WAIT_S = 10.0

# failed: waiting for a retry (also in delayed); dead: out of attempts (put = done + deleted +
# ready + delayed + running + dead + ..., so a job that failed for good is accounted for).
STATS_COLUMNS = ("queue", "ready", "delayed", "running", "failed", "dead", "put", "done", "later",
                 "expired", "oldest age")
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})

Action = Callable[[QueueClient, argparse.Namespace], int]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    put = subparsers.add_parser("put", help="add a job to a queue")
    put.add_argument("queue", metavar="QUEUE")
    put.add_argument("data", metavar="DATA", help="the job's data; '-' reads it from stdin")
    put.add_argument("--priority", type=int, default=0, metavar="P", help="higher first; default 0")
    put.add_argument("--delay", type=float, metavar="S", help="invisible to GET for S seconds")
    item = put.add_mutually_exclusive_group()
    item.add_argument("--item", metavar="NAME", help="the item (group of jobs) the job belongs to")
    item.add_argument("--new-item", action="store_true",
                      help="a new item made by the server; its name is printed after the key")
    put.add_argument("--key", metavar="KEY",
                     help="the job's key (unique jobs: nothing is added while a job holds it); "
                          "default: the server makes one")
    put.add_argument("--json", action="store_true",
                     help='print {"key", "queue", "item", "existing_state", "existing_queue"} as one JSON object')
    _add_server_options(put)
    put.set_defaults(func=_command(_put))

    get = subparsers.add_parser(
        "get", help="take jobs from a queue and print them",
        description="Print each job as `queue id priority item data` (item '-' when none). "
                    "The jobs are running: give --done, or --expire to have them come back.",
    )
    get.add_argument("queue", metavar="QUEUE", help="a queue, or several as a|b|c")
    get.add_argument("--count", type=int, metavar="N", help="up to N jobs in one batch")
    get.add_argument("--expire", type=float, metavar="S",
                     help="the jobs come back (LATER) unless DONE within S seconds")
    get.add_argument("--block", action="store_true", help="wait until a job is ready (GETB)")
    get.add_argument("--done", action="store_true", help="DONE the jobs once printed")
    _add_server_options(get)
    get.set_defaults(func=_command(_get))

    stats = subparsers.add_parser("stats", help="per-queue counters as a table")
    stats.add_argument("queue", metavar="QUEUE", nargs="?", help="only this queue")
    stats.add_argument("--top", type=int, metavar="N",
                       help="only the N queues holding the most jobs, and * for the others summed")
    _add_server_options(stats)
    stats.set_defaults(func=_command(_stats))


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", metavar="FILE",
                        help=f"cluster config (TOML; default ${CONFIG_ENV}): the queue servers' "
                             "addresses and token come from it; --server and --token win")
    parser.add_argument("--server", action="append", metavar="HOST:PORT",
                        help=f"queue server; repeat for a cluster (default {DEFAULT_SERVER})")
    parser.add_argument("--token", help=f"AUTH token, when the server requires one; prefer ${TOKEN_ENV} "
                        "or --token-file (a command line is visible in ps)")
    parser.add_argument("--token-file", metavar="FILE",
                        help=f"the AUTH token is the first line of FILE (also ${TOKEN_FILE_ENV})")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S",
                        help="seconds to wait for a reply (default 30)")


def _command(action: Action) -> Callable[[argparse.Namespace], int]:
    """Wrap an action: connect, run it, turn client errors into one line and an exit code."""

    def run(args: argparse.Namespace) -> int:
        name = f"slotmap {args.command}"
        try:
            servers, token = server_and_token(args)
            # offline_wait_s: a command refused by a server that is not the primary (a
            # failover under way) asks the server list again until one answers (issue 25).
            client = QueueClient(servers, token=token,
                                 timeout_s=args.timeout, name=DOOR,
                                 offline_wait_s=min(args.timeout, CLI_OFFLINE_WAIT_S))
        except (ValueError, ConfigError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        try:
            with client:
                return action(client, args)
        except (ValueError, TypeError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ConnectionLost as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return EXIT_FAILED
        except OfflineError as exc:
            # Seen after a failover with a config naming only the old primary (a bare `listen`):
            # that server now follows the new one, and nothing here knows where it is.
            known = ", ".join(f"{host}:{port}" for host, port in client.addresses)
            print(f"{name}: the server answered {exc}: {known} is not the primary (a replica, or a "
                  "failover that did not end); give every queue server of the cluster: "
                  "[queue_server] servers in the config, or one --server each", file=sys.stderr)
            return EXIT_FAILED
        except QueueServerError as exc:
            print(f"{name}: the server answered {exc}", file=sys.stderr)
            return EXIT_FAILED

    return run


def server_and_token(args: argparse.Namespace) -> tuple[str | list[str], str | None]:
    """Where to connect and the AUTH token: the flags first, then $SLOTMAP_QUEUE_TOKEN(_FILE),
    then the config (--config or $SLOTMAP_CONFIG: [queue_server] servers or listen, and its
    token_file or token); nothing: the default address without a token."""
    path = args.config or os.environ.get(CONFIG_ENV) or None
    if path is None:
        return args.server or DEFAULT_SERVER, resolve_token(flag=args.token, flag_file=args.token_file)
    section = load_config(path).queue_server
    token = resolve_token(flag=args.token, flag_file=args.token_file,
                          config_token=section.token, config_file=section.token_file)
    return args.server or section.servers or section.listen, token


def _put(client: QueueClient, args: argparse.Namespace) -> int:
    """Prints the job's key (`slotmap job KEY` finds it), then its new item's name if asked;
    warns on stderr when the server's config names no such queue (the job is put anyway:
    sockPQd takes any queue, but no slot serves one that no config names)."""
    data = sys.stdin.buffer.read() if args.data == "-" else args.data.encode("utf-8")
    result = client.put_job(args.queue, data, priority=args.priority, item=args.item,
                            new_item=args.new_item, delay_s=args.delay, key=args.key)
    warning = unknown_queue_warning(client, args.queue)
    if warning is not None:
        print(f"slotmap put: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({"key": result.key, "queue": args.queue, "item": result.item,
                          "existing_state": result.existing_state, "existing_queue": result.existing_queue}))
    else:
        print(result.key if result.item is None else f"{result.key} {result.item}")
    if result.existing_state is not None:
        where = "" if result.existing_queue is None else f" in queue {result.existing_queue}"
        print(f"slotmap put: nothing added: job {result.key} exists ({result.existing_state}){where}",
              file=sys.stderr)
    return EXIT_OK


def unknown_queue_warning(client: QueueClient, queue: str) -> str | None:
    """What to say when the queue server's config names no queue `queue` (a typo, or a
    queue nobody set up); None when it does, or when the server does not say."""
    stats = client.stats(queue).get(queue)
    if stats is None or stats.configured is not False:
        return None
    return (f"no config names queue {queue!r} ([queues.{queue}] in the cluster config): no slot "
            f"serves it, so the job waits until one does; check the name")


def _get(client: QueueClient, args: argparse.Namespace) -> int:
    jobs = client.get(args.queue.split("|"), count=args.count, expire_s=args.expire,
                      block=bool(args.block))
    write_jobs(jobs, sys.stdout)
    if not jobs:
        print(f"slotmap get: {args.queue}: no job ready", file=sys.stderr)
    elif args.done:
        client.done(*(job.id for job in jobs))
    return EXIT_OK


def _stats(client: QueueClient, args: argparse.Namespace) -> int:
    if args.top is not None and args.queue is None:
        stats = client.stats_top(args.top)
    else:
        stats = client.stats(args.queue)
    sys.stdout.write(stats_table(stats.values()))
    return EXIT_OK


def job_line(job: Job) -> str:
    """`queue id priority item data`: item `-` when none, data as UTF-8 with \\n \\r \\t escaped."""
    data = job.data.decode("utf-8", "backslashreplace").translate(_ESCAPES)
    return f"{job.queue} {job.id} {job.priority} {job.item or '-'} {data}"


def write_jobs(jobs: Sequence[Job], out: TextIO) -> None:
    out.writelines(job_line(job) + "\n" for job in jobs)


def _age(stats: QueueStats) -> str:
    if not stats.ready or stats.oldest_ready_age_s is None:
        return "-"
    age_s = stats.oldest_ready_age_s
    if age_s < 60:
        return f"{age_s:.1f}s"
    if age_s < 3600:
        return f"{age_s / 60:.1f}m"
    return f"{age_s / 3600:.1f}h"


def stats_table(stats: Iterable[QueueStats]) -> str:
    """Aligned columns, one row per queue in name order; numbers right-aligned."""
    rows = [
        [s.queue, *(str(n) for n in (s.ready, s.delayed, s.running, s.failed, s.dead, s.put, s.done,
                                     s.later, s.expired)), _age(s)]
        for s in sorted(stats, key=lambda s: s.queue)
    ]
    return text_table(STATS_COLUMNS, rows, right=range(1, len(STATS_COLUMNS)))
