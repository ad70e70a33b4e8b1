"""`slotmap jobs`, `slotmap job`, `slotmap result`, `slotmap retry`, `slotmap delete`, `slotmap
cancel`: see jobs (finished ones too, with their results), fix failed and dead ones.

Server address and token as `slotmap put/get/stats` take them. `--json` prints one JSON
value (an array for `jobs`, an object for `job`) of the queue server's JOB/JOBS fields.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from queue_server.client import QueueClient
from queue_server.client.cancels import not_cancelled_text
from queue_server.client.commands_cli import (
    EXIT_FAILED,
    EXIT_OK,
    _add_server_options,
    _command,
)
from queue_server.client.text_table import text_table
from queue_server.protocol.job_info import JOB_STATES, JobInfo, error_summary
from queue_server.protocol.job_requests import JOBS_LIMIT_MAX

PREVIEW_CHARS = 40
DEFAULT_LIMIT = 100
_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})
JOB_COLUMNS = ("key", "attempts", "when", "error", "data")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    jobs = subparsers.add_parser(
        "jobs", help="list a queue's jobs in one state (failed, dead, ...)",
        description="Failed jobs wait for a retry after a backoff; dead ones ran out of attempts; "
                    "done ones finished (kept keep_done_s, at most keep_done_max per queue). "
                    "Columns: key, attempts, next run (failed, delayed), time of death (dead) or "
                    "of finishing (done), the error's last line, the start of the data.")
    jobs.add_argument("queue", metavar="QUEUE")
    jobs.add_argument("--state", choices=JOB_STATES, default="failed", help="default failed")
    jobs.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                      help=f"at most N jobs (default {DEFAULT_LIMIT})")
    jobs.add_argument("--after", metavar="KEY", help="start after this key (the last of a page)")
    jobs.add_argument("--json", action="store_true", help="one JSON array of job objects")
    _add_server_options(jobs)
    jobs.set_defaults(func=_command(_jobs))

    job = subparsers.add_parser("job", help="where a job is: state, queue, attempts, errors, data, "
                                             "and for a finished one when, where and its result")
    job.add_argument("key", metavar="KEY")
    job.add_argument("--json", action="store_true", help="one JSON object")
    _add_server_options(job)
    job.set_defaults(func=_command(_job))

    result = subparsers.add_parser(
        "result", help="a finished job's result, waiting for it to finish with --wait",
        description="Prints the result (what the handler returned, or job.result()). Exit 1 when "
                    "the job is dead, unknown, or not finished within --wait seconds.")
    result.add_argument("queue", metavar="QUEUE")
    result.add_argument("key", metavar="KEY")
    result.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long in the server for it to finish (default 0)")
    result.add_argument("--json", action="store_true", help="the whole finished job as one JSON object")
    _add_server_options(result)
    result.set_defaults(func=_command(_result))

    retry = subparsers.add_parser(
        "retry", help="run failed or dead jobs again",
        description="A dead job goes back to ready with its attempts reset; a failed one is ready "
                    "now (its attempts kept). Exit 1 when a key was not found.")
    retry.add_argument("queue", metavar="QUEUE")
    retry.add_argument("keys", metavar="KEY", nargs="*")
    retry.add_argument("--all", action="store_true", help="every dead job of the queue (--state failed: every failed one)")
    retry.add_argument("--state", choices=("dead", "failed"), default="dead",
                       help="with --all: which jobs (default dead)")
    _add_server_options(retry)
    retry.set_defaults(func=_command(_retry))

    delete = subparsers.add_parser(
        "delete", help="delete waiting, failed or dead jobs",
        description="Running jobs are not deleted (DONE or FAIL them). Exit 1 when a key was "
                    "not found or is running.")
    delete.add_argument("queue", metavar="QUEUE")
    delete.add_argument("keys", metavar="KEY", nargs="*")
    delete.add_argument("--all-dead", action="store_true", help="every dead job of the queue")
    _add_server_options(delete)
    delete.set_defaults(func=_command(_delete))

    cancel = subparsers.add_parser(
        "cancel", help="cancel a job: a waiting one is removed, a running one ends dead",
        description='A running job ends dead with "cancelled by cli" (its slot\'s DONE then '
                    'answers as for a lapsed lease). Exit 1 when the key is not found.')
    cancel.add_argument("queue", metavar="QUEUE")
    cancel.add_argument("key", metavar="KEY")
    _add_server_options(cancel)
    cancel.set_defaults(func=_command(_cancel))


def fetch_jobs(client: QueueClient, queue: str, state: str, *, limit: int,
               after: str | None = None) -> list[JobInfo]:
    """Up to `limit` jobs, JOBS_LIMIT_MAX per request."""
    if limit < 1:
        raise ValueError(f"--limit must be at least 1, got {limit}")
    found: list[JobInfo] = []
    while len(found) < limit:
        want = min(limit - len(found), JOBS_LIMIT_MAX)
        page = client.jobs(queue, state, limit=want, after=after)
        found += page
        if len(page) < want:
            break
        after = page[-1].key
    return found


def _jobs(client: QueueClient, args: argparse.Namespace) -> int:
    found = fetch_jobs(client, args.queue, args.state, limit=args.limit, after=args.after)
    if args.json:
        print(json.dumps([info.model_dump(mode="json") for info in found], ensure_ascii=False))
    elif found:
        sys.stdout.write(jobs_table(found))
    else:
        print(f"slotmap jobs: {args.queue}: no {args.state} jobs", file=sys.stderr)
    return EXIT_OK


def _job(client: QueueClient, args: argparse.Namespace) -> int:
    info = client.job(args.key, errors=True)
    if info is None:
        print(f"slotmap job: no job {args.key!r} (deleted, never put, or finished longer ago than "
              "its queue keeps finished jobs: keep_done_s, keep_done_max)", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        print(json.dumps(info.model_dump(mode="json"), ensure_ascii=False))
    else:
        sys.stdout.write(job_text(info))
    return EXIT_OK


def _result(client: QueueClient, args: argparse.Namespace) -> int:
    info = client.finished(args.queue, args.key, timeout_s=args.wait)
    if args.json and info is not None:
        print(json.dumps(info.model_dump(mode="json"), ensure_ascii=False))
    if info is None:
        print(f"slotmap result: no job {args.key!r} in {args.queue} (deleted, never put, or finished "
              "longer ago than its queue keeps finished jobs)", file=sys.stderr)
    elif info.state == "dead":
        print(f"slotmap result: {args.key} is dead: {error_summary(info.error)}", file=sys.stderr)
    elif info.state != "done":
        print(f"slotmap result: {args.key} is still {info.state} after {args.wait:g} s", file=sys.stderr)
    elif not info.result_kept:
        print(f"slotmap result: {args.key} finished; its result of {info.result_len} bytes was over "
              "max_result_bytes, not kept", file=sys.stderr)
    else:
        if not args.json:
            print(info.result if info.result is not None else "")
        return EXIT_OK
    return EXIT_FAILED


def _keys_or_all(keys: Sequence[str], every: bool, flag: str) -> None:
    if every and keys:
        raise ValueError(f"give job keys or {flag}, not both")
    if not every and not keys:
        raise ValueError(f"give one or more job keys, or {flag}")


def not_found_text(done: str, queue: str, key: str, info: JobInfo | None) -> str:
    """Why RETRY or DELETE found nothing to change for `key`, from what JOB says of it just
    after: a bare "not found" misled when `slotmap job` showed the job done or running."""
    if info is None:
        return (f"{key}: not found in {queue} (deleted, never put, or finished longer ago than its "
                "queue keeps finished jobs)")
    if info.queue != queue:
        return f"{key}: not found in {queue} (a job {key} is in {info.queue})"
    if info.state == "done":
        then = ("put it again with its key to run it again" if done == "retried"
                else "kept until keep_done_s or keep_done_max drops it")
        return f"{key}: already finished{_at(info.done_at)}: a finished job is not {done} ({then})"
    if info.state == "running":
        return f"{key}: running: only failed and dead jobs are {done} (slotmap cancel stops a running one)"
    return f"{key}: {info.state}, not failed or dead: nothing to retry"


def _at(at_unix: float | None) -> str:
    return "" if at_unix is None else datetime.fromtimestamp(at_unix, UTC).strftime(" at %Y-%m-%d %H:%M:%S UTC")


def _report(client: QueueClient, queue: str, command: str, done: str, keys: Sequence[str],
            outcomes: Sequence[str]) -> int:
    """`<done> n of m jobs`, then one line on stderr per key not done (exit 1 if any)."""
    missed = [(key, outcome) for key, outcome in zip(keys, outcomes, strict=True) if outcome != "ok"]
    print(f"{done} {len(keys) - len(missed)} of {len(keys)} jobs")
    for key, outcome in missed:
        why = (not_found_text(done, queue, key, client.job(key)) if outcome == "not_found"
               else f"{key}: {outcome.replace('_', ' ')}")
        print(f"slotmap {command}: {why}", file=sys.stderr)
    return EXIT_FAILED if missed else EXIT_OK


def _retry(client: QueueClient, args: argparse.Namespace) -> int:
    _keys_or_all(args.keys, args.all, "--all")
    if args.all:
        print(f"retried {client.retry_all(args.queue, args.state)} {args.state} jobs")
        return EXIT_OK
    found = client.retry(args.queue, *args.keys)
    return _report(client, args.queue, "retry", "retried", args.keys,
                   ["ok" if hit else "not_found" for hit in found])


def _delete(client: QueueClient, args: argparse.Namespace) -> int:
    _keys_or_all(args.keys, args.all_dead, "--all-dead")
    if args.all_dead:
        print(f"deleted {client.delete_all_dead(args.queue)} dead jobs")
        return EXIT_OK
    return _report(client, args.queue, "delete", "deleted", args.keys,
                   [str(o) for o in client.delete(args.queue, *args.keys)])


def _cancel(client: QueueClient, args: argparse.Namespace) -> int:
    outcome = client.cancel(args.queue, args.key)
    if outcome == "not_found":
        text, _ = not_cancelled_text(args.queue, args.key, client.job(args.key))
        print(f"slotmap cancel: {text}", file=sys.stderr)
        return EXIT_FAILED
    print(f"{args.key}: {outcome}")
    return EXIT_OK


def _time(at_unix: float | None) -> str:
    if at_unix is None:
        return "-"
    return datetime.fromtimestamp(at_unix, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _when(info: JobInfo) -> str:
    """Dead: when it died; failed/delayed: its next run; running: its lease id."""
    if info.state == "dead":
        return _time(info.died_at)
    if info.state == "done":
        return _time(info.done_at)
    if info.state == "running":
        return f"lease {info.lease_id}" if info.lease_id is not None else "-"
    return _time(info.next_run_at)


def _preview(data: str) -> str:
    text = data.translate(_ESCAPES)
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "\u2026"


def jobs_table(found: Sequence[JobInfo]) -> str:
    """Aligned columns (the error and data last, unaligned: they are long)."""
    rows = [[info.key, str(info.attempts), _when(info), error_summary(info.error) or "-", _preview(info.data)]
            for info in found]
    return text_table(JOB_COLUMNS, rows, right={1}, aligned=3)


def job_text(info: JobInfo) -> str:
    """`name: value` lines, then the whole error and data."""
    fields = [("key", info.key), ("queue", info.queue), ("state", info.state),
              ("attempts", str(info.attempts)), ("priority", str(info.priority))]
    if info.item is not None:
        fields.append(("item", info.item))
    if info.lease_id is not None:
        fields.append(("lease id", str(info.lease_id)))
    for label, at in (("failed at", info.failed_at), ("next run", info.next_run_at), ("died at", info.died_at),
                      ("started at", info.started_at), ("done at", info.done_at)):
        if at is not None:
            fields.append((label, _time(at) + " UTC"))
    if info.running_by is not None:
        place = f" (host {info.running_host}, slot {info.running_slot})" if info.running_host is not None else ""
        fields.append(("running on", info.running_by + place))
    if info.runtime_s is not None:
        fields.append(("runtime", f"{info.runtime_s:.3f} s"))
    if info.ran_by is not None:
        fields.append(("finished by", info.ran_by))
    if info.trace is not None:
        fields.append(("trace", info.trace))
    fields.append(("data bytes", str(info.data_len)))
    text = "".join(f"{label}: {value}\n" for label, value in fields)
    if info.errors:
        text += f"errors of the last {len(info.errors)} failed attempts, oldest first:\n"
        for entry in info.errors:
            text += f"  attempt {entry.attempt} at {_time(entry.at)} UTC:\n" + _indent(entry.error, "      ")
    else:
        text += "error:\n" + _indent(info.error or "none")
    text += "data:\n" + _indent(info.data)
    if info.state == "done":
        kept = info.result if info.result_kept else f"({info.result_len} bytes, over max_result_bytes: not kept)"
        text += "result:\n" + _indent(kept if kept is not None else "none")
    return text


def _indent(text: str, prefix: str = "    ") -> str:
    return "".join(f"{prefix}{line}\n" for line in text.splitlines() or [""])
