"""The children of `slotmap run`: what each runs (ChildSpec) and its process (Child).

A child runs `python -m deploy.cli <args>` in a session of its own, its output appended to
its log file; it dies with the launcher (Linux PR_SET_PDEATHSIG), even when the launcher is
killed. Secrets reach it through its environment, never its command line.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# Seconds a child gets after SIGTERM before SIGKILL (a master's: its slots' deadline more).
STOP_DEADLINE_S = 10.0
PR_SET_PDEATHSIG = 1
# A child's log tail on the terminal: at most this much of its end is read, and each line cut.
TAIL_READ_BYTES = 64 * 1024
TAIL_LINE_CHARS = 300


@dataclass(frozen=True, slots=True)
class ChildSpec:
    name: str
    args: tuple[str, ...]
    where: str
    # Seconds to wait after SIGTERM before SIGKILL.
    stop_deadline_s: float = STOP_DEADLINE_S
    # Added to the child's environment (secrets go here, never in `args`).
    env: tuple[tuple[str, str], ...] = ()


class Child:
    def __init__(self, spec: ChildSpec, log_dir: Path) -> None:
        self.spec = spec
        self.started_at = time.monotonic()
        self.log_path = log_dir / f"{spec.name}.log"
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "deploy.cli", *spec.args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                # Own session: a terminal's Ctrl-C reaches the launcher only, which stops
                # the children in order.
                start_new_session=True,
                preexec_fn=_die_with_parent,
                env=dict(os.environ, PYTHONUNBUFFERED="1", **dict(spec.env)),
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        return self.process.poll()

    def log_tail(self, lines: int = 15) -> str:
        """The log's last lines, indented, for the terminal. Only its end is read, and each
        line is cut: a master's log holds what its handlers print, and one that wrote a 4 MB
        line put all of it on the terminal when the master died (a multi-GB log would
        have been read whole into memory)."""
        try:
            with open(self.log_path, "rb") as file:
                size = file.seek(0, os.SEEK_END)
                file.seek(max(0, size - TAIL_READ_BYTES))
                data = file.read(TAIL_READ_BYTES)
        except OSError as exc:
            return f"    (cannot read it: {exc.strerror})"
        text = data.decode(errors="replace").splitlines()
        if size > TAIL_READ_BYTES and text:
            text[0] = "..." + text[0]  # read from the middle of a line
        return "\n".join("    " + _cut(line) for line in text[-lines:])

    def stop(self) -> None:
        """SIGTERM, wait up to the child's deadline, then SIGKILL its whole group."""
        if self.exit_code() is None:
            with contextlib.suppress(ProcessLookupError):  # it died since exit_code(): wait() reaps it
                self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=self.spec.stop_deadline_s)
            except subprocess.TimeoutExpired:
                print(f"slotmap run: {self.spec.name} still running {self.spec.stop_deadline_s:.0f} s "
                      "after SIGTERM: SIGKILL", file=sys.stderr)
        # Whatever it left behind in its session (a master's slots) goes too.
        # No such group: nothing was left. PermissionError: the group is gone and its id reused.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait()


def _cut(line: str) -> str:
    if len(line) <= TAIL_LINE_CHARS:
        return line
    return f"{line[:TAIL_LINE_CHARS]}... ({len(line) - TAIL_LINE_CHARS} more characters)"


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM when the launcher dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
