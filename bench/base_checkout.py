"""The code dirs of an A/B against a base commit (the base from `git archive`, then the checkout),
and the queue server of one of them started for a measurement."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# How long a queue server of either tree may take to accept its first connection.
START_DEADLINE_S = 30.0


@contextlib.contextmanager
def code_dirs(base: str | None, *, prefix: str) -> Iterator[dict[str, Path]]:
    """{"base <commit>": its tree, "new": the checkout} (only "new" without a base); the
    base's tree is removed afterwards."""
    if base is None:
        yield {"new": REPO}
        return
    base_dir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", base], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_dir)], input=archive, check=True)
        yield {f"base {base}": base_dir, "new": REPO}
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


def start_queue_server(code_dir: Path, work: Path, *, config: str | None = None,
                       ) -> tuple[subprocess.Popen[bytes], int]:
    """`slotmap queue-server` of `code_dir` (fsync never, its data in work/data, with
    `config` as its --config when given) on a free port; returns once it accepts."""
    port = _free_port()
    command = [sys.executable, "-m", "deploy.cli", "queue-server", "--listen", f"127.0.0.1:{port}",
               "--data-dir", str(work / "data"), "--fsync", "never"]
    if config is not None:
        (work / "server.toml").write_text(config)
        # It may hold a token: the server refuses a config others can read (docs/SECURITY.md).
        (work / "server.toml").chmod(0o600)
        command += ["--config", str(work / "server.toml")]
    process = subprocess.Popen(command, cwd=code_dir, env=dict(os.environ, PYTHONPATH=str(code_dir)),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the queue server did not start")


def rss_bytes(pid: int) -> int:
    """The process's VmRSS (0 when /proc does not say)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
