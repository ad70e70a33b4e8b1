"""`slotmap reload`: ask a running master to reload its handler code (SIGHUP) and wait for
its answer in its report file: rolled to a new version, refused (exit 1), or unchanged. The
report of `slotmap run --config FILE` is found with the same --config (or $SLOTMAP_CONFIG)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from master.report import HostReport, ReportError

POLL_S = 0.2
MAX_WAIT_S = 86400.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reload", help="reload a running master's handler code (as SIGHUP) and wait for the result"
    )
    parser.add_argument("--config", help="the config `slotmap run` runs: its report is var/run/"
                        "master.report.json beside it (default $SLOTMAP_CONFIG, else the current folder's)")
    parser.add_argument("--report-file", type=Path,
                        help="the master's --report-file, when it is not `slotmap run`'s")
    parser.add_argument("--timeout-s", type=float, default=600.0,
                        help="give up waiting after this long (the reload goes on); 0: do not wait")
    parser.set_defaults(func=run)


def report_path(args: argparse.Namespace) -> Path:
    from config.load import CONFIG_ENV
    from config.paths import run_files

    if args.report_file is not None:
        return Path(args.report_file)
    config = args.config or os.environ.get(CONFIG_ENV)
    return run_files(Path(config) if config else None).master_report


def read(path: Path) -> HostReport:
    try:
        return HostReport.decode(path.read_bytes())
    except (OSError, ReportError) as exc:
        raise SystemExit(f"slotmap reload: cannot read the master's report {path}: {exc}") from None


def is_master(pid: int) -> bool:
    """The pid is a live `slotmap master` (a stale report must not get another process signalled)."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    # `slotmap master ...`, or `python -m deploy.cli master ...` as `slotmap run` starts it.
    return b"master" in words and (b"deploy.cli" in words or any(b"slotmap" in word for word in words))


def run(args: argparse.Namespace) -> int:
    timeout_s = args.timeout_s
    if not (0 <= timeout_s <= MAX_WAIT_S):
        raise SystemExit(f"slotmap reload: --timeout-s must be within 0..{MAX_WAIT_S:g}")
    report_file = report_path(args)
    before = read(report_file)
    if not is_master(before.master_pid):
        raise SystemExit(f"slotmap reload: pid {before.master_pid} in {report_file} is not a "
                         "running slotmap master (a stale report?)")
    os.kill(before.master_pid, signal.SIGHUP)
    print(f"slotmap reload: SIGHUP to the master of {before.host} (pid {before.master_pid}), "
          f"code version {before.code_version or '-'}", flush=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        report = read(report_file)
        if report.master_pid != before.master_pid:
            print("slotmap reload: the master restarted meanwhile", file=sys.stderr)
            return 1
        # A SIGHUP during a reload is answered after that one ends: its end, counted, is not
        # ours, so wait until no reload is under way (ours follows it within the same turn).
        if report.code_reloads_answered <= before.code_reloads_answered or report.code_reloading:
            continue
        if report.code_reload_failure and report.code_generation == before.code_generation:
            print(f"slotmap reload: {report.code_reload_failure}", file=sys.stderr)
            return 1
        if report.code_generation == before.code_generation:
            print(f"slotmap reload: handler code unchanged (version {report.code_version or '-'})")
        else:
            print(f"slotmap reload: every slot runs version {report.code_version} "
                  f"(generation {report.code_generation})")
        return 0
    if timeout_s:
        print(f"slotmap reload: no answer within {timeout_s:g} s; the reload goes on", file=sys.stderr)
        return 1
    return 0
